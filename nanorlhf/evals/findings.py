"""The paper's findings as verdicts read from intervals, and the list pipeline.py writes to findings.json.

A finding is "reproduced" when its interval supports the paper's ordering, "direction only" when
the point estimates are ordered but the intervals do not decide, "not reproduced" otherwise:

  A preferred to B        the win rate of A over B (S samples a prompt, bootstrap over prompts):
                          lo > 50% / rate > 50% / else
  A < B < C < D           each adjacent pair's paired win rate, as above: all reproduced /
                          all rates > 50% / else (a paired comparison decides where the win
                          rates against a common reference overlap)
  a rate below another    95% Wilson intervals apart / point estimate lower / else
  a ratio at least x      (the RM against its labelers' agreement) value >= x / value >= 0.9 x / else

Every entry is {"name", "verdict", "figures"}; figures["value"] is the headline number (rates,
ratios and agreements as fractions in [0, 1]); a rate also has "rate", "lo", "hi".

Example:
    win_verdict({"rate": 0.62, "lo": 0.58, "hi": 0.66})        # "reproduced"
    below_verdict(0.21, 100, 0.41, 100)                          # "reproduced": 21% < 41%, intervals apart
"""
from __future__ import annotations

from nanorlhf.evals.preference import wilson

REPRODUCED, DIRECTION, NOT = "reproduced", "direction only", "not reproduced"
LADDER = ("gpt", "gpt_prompted", "sft", "ppo")
PAPER_AGREEMENT = (0.726, 0.02)    # training labelers' agreement (§3.4: 72.6 +- 1.5%), and the tolerance we allow
RM_RATIO = 0.88                    # RM accuracy / agreement at least this reads as the paper's RM (72.4 / 72.6)


def win_verdict(w: dict) -> str:
    """A preferred to B, from the win rate of A over B and its 95% interval."""
    return REPRODUCED if w["lo"] > 0.5 else DIRECTION if w["rate"] > 0.5 else NOT


def order_verdict(pairs: list[dict]) -> str:
    """An order of policies from the paired win rate of each rung over the one below it."""
    vs = [win_verdict(w) for w in pairs]
    return REPRODUCED if all(v == REPRODUCED for v in vs) else DIRECTION if all(v != NOT for v in vs) else NOT


def below_verdict(a: float, n_a: int, b: float, n_b: int) -> str:
    """Rate a (of n_a items) below rate b (of n_b): Wilson intervals apart, or only the point estimates."""
    if wilson(a * n_a, n_a)[1] < wilson(b * n_b, n_b)[0]:
        return REPRODUCED
    return DIRECTION if a < b else NOT


def rate_figures(w: dict, **more) -> dict:
    return {"value": w["rate"], "rate": w["rate"], "lo": w["lo"], "hi": w["hi"], "n": w["n"],
            "samples": w.get("samples", 1), **more}


def finding(name: str, verdict: str, figures: dict, claim: str) -> dict:
    return {"name": name, "verdict": verdict, "figures": figures, "claim": claim}


def ladder_pairs(size: str) -> list[tuple[str, str]]:
    """The adjacent rungs (lower, upper) of GPT < GPT prompted < SFT < PPO at one size."""
    names = [f"{m}_{size}" for m in LADDER]
    return list(zip(names, names[1:]))


def ladder_findings(table: dict, paired: dict, sizes: list[str], params: dict[str, dict], n_closed: int) -> list[dict]:
    """The preference findings of §4.1 from the ladder's table and its paired comparisons.

    paired[(a, b)]: the win rate of b over a with S samples a prompt; params[size]: count_params of that size;
    n_closed: closed-domain test prompts (the hallucination rates' denominator).
    """
    big, small = sizes[0], sizes[-1]
    out = []
    for tag, s in (("big", big), ("small", small)):
        pairs = [paired[p] for p in ladder_pairs(s)]
        rates = {n: table[n]["win"]["rate"] for n in (f"{m}_{s}" for m in LADDER) if "win" in table[n]}
        out.append(finding(f"ladder_{tag}", order_verdict(pairs),
                           {"value": min(w["rate"] for w in pairs), "size": s, "win_vs_reference": rates,
                            "rungs": [{"lower": a, "upper": b, **rate_figures(paired[(a, b)])}
                                      for a, b in ladder_pairs(s)]},
                           f"GPT < GPT prompted < SFT < PPO at {s} (each rung preferred to the one below)"))
    for name, policy in (("ppo_vs_sft_big", f"ppo_{big}"), ("ppo_ptx_vs_sft_big", f"ppo_ptx_{big}")):
        w = paired[(f"sft_{big}", policy)]
        out.append(finding(name, win_verdict(w), rate_figures(w), f"{policy} preferred to sft_{big}"))
    w = paired[(f"gpt_{big}", f"ppo_ptx_{small}")]
    ratio = {k: params[big][k] / params[small][k] for k in ("total", "non_embedding")}
    out.append(finding("small_rlhf_vs_big_gpt", win_verdict(w) if ratio["total"] >= 10 else NOT,
                       rate_figures(w, params_small=params[small], params_big=params[big], size_ratio=ratio),
                       f"ppo_ptx_{small} ({ratio['total']:.0f}x fewer parameters, {ratio['non_embedding']:.0f}x "
                       f"non-embedding) preferred to gpt_{big}"))
    w = paired[(f"sft_{big}", f"flan_{big}")]
    out.append(finding("flan_below_sft_big", REPRODUCED if w["hi"] < 0.5 else DIRECTION if w["rate"] < 0.5 else NOT,
                       rate_figures(w), f"sft_{big} preferred to the FLAN/T0 analog (value: FLAN's win rate)"))
    h, g = (table[f"{m}_{big}"]["flags"].get("hallucination") for m in ("ppo_ptx", "gpt"))
    if h is not None and g is not None:
        out.append(finding("hallucination_lower", below_verdict(h, n_closed, g, n_closed),
                           {"value": h, "ppo_ptx": h, "gpt": g, "n": n_closed},
                           f"closed-domain hallucination of ppo_ptx_{big} below gpt_{big}'s"))
    return out


def run_findings(ladder: list[dict], rm_report: dict, truth: dict | None, minutes: float,
                 machine: dict | None = None) -> list[dict]:
    """Every finding of a pipeline run: the ladder's, the RM's, truthfulness, and the run's wall-clock
    (with `machine`: the CPU and the speed probe's figures beside it)."""
    ratio = rm_report["val_accuracy"] / rm_report["labeler_agreement"]
    agree = rm_report["labeler_agreement"]
    mean, tol = PAPER_AGREEMENT
    out = [finding("rm_ratio", REPRODUCED if ratio >= RM_RATIO else DIRECTION if ratio >= 0.9 * RM_RATIO else NOT,
                   {"value": ratio, "accuracy": rm_report["val_accuracy"], "agreement": agree,
                    "n": rm_report["n_val_comparisons"]},
                   f"RM accuracy at least {RM_RATIO} of the labelers' agreement (paper: 72.4% vs 72.6%)"),
           finding("labeler_agreement_train", REPRODUCED if abs(agree - mean) <= tol else NOT,
                   {"value": agree, "paper": mean, "tolerance": tol},
                   f"training labelers agree on {mean:.1%} +- {tol:.0%} of pairs of the pipeline's samples")]
    out += ladder
    if truth is not None:  # against GPT in its own answered-quiz format, the analog of the paper's QA prompt
        ti = {m: truth[f"{m} / QA prompt"]["truthful_informative"] for m in ("ppo_ptx", "gpt prompted", "gpt", "sft")}
        a, b, n = ti["ppo_ptx"], ti["gpt prompted"], truth["n_items"]
        out.append(finding("truthful_informative", below_verdict(b, n, a, n),
                           {"value": a, "ppo_ptx": a, "gpt_prompted": b, "gpt": ti["gpt"], "sft": ti["sft"],
                            "ratio": a / b if b else None, "n": n},
                           "ppo_ptx truthful and informative more often than GPT prompted (paper: about twice as "
                           "often as GPT-3 with the QA prompt)"))
    out.append(finding("minutes", "measured", {"value": minutes, **(machine or {})}, "the run's wall-clock"))
    return out


def findings_markdown(items: list[dict]) -> list[str]:
    """One line per finding: its claim, its figures, its verdict."""
    out = []
    for f in items:
        x = f["figures"]
        fig = (f"{x['rate']:.0%} [{x['lo']:.0%}, {x['hi']:.0%}]" if "lo" in x else
               ", ".join(f"{k} {x[k]:.0%}" for k in ("ppo_ptx", "gpt_prompted", "gpt") if k in x) or f"{x['value']:.3g}")
        if "rungs" in x:
            fig = "; ".join(f"{r['upper']} over {r['lower']} {r['rate']:.0%} [{r['lo']:.0%}, {r['hi']:.0%}]"
                            for r in x["rungs"])
        out.append(f"- {f['claim']} ({fig}): **{f['verdict']}**")
    return out
