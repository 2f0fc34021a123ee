"""Two failure modes of InstructGPT (§4.3, §5.3): hedging and accepting false premises.

  hedging        definite fact questions (benchmarks/hedging.jsonl) that deserve a
                 plain answer; a response hedges when it uses a hedging phrase
                 ("I think", "maybe", "probably": world feature `hedging` > 0).
                 The paper traces this to labelers who rewarded epistemic humility.
  false premise  questions that presuppose a wrong fact ("Why does Gil work as a
                 guard?" when Gil is a doctor): a response corrects the premise
                 (feature `premise_corrected`) or accepts it (attempts an answer
                 without correcting it).

`labeler_hedge_preference` measures the cause without any model: for each
definite question, a plain true answer and the same answer hedged ("I think
..."); the probability that the training labelers prefer the hedged one,
P = mean over labelers j and pairs of sigmoid((u_j(hedged) - u_j(plain)) / tau_j)
(the Bradley-Terry probability of their K = 2 rankings), as the share of
humility-rewarding labelers (PoolConfig.hedge_share) moves.

Example:
    labeler_hedge_preference("data/small", shares=(0.0, 0.5))
    # {0.0: {"p_hedged": 0.32, "lovers": 0, ...}, 0.5: {"p_hedged": 0.50, "lovers": 12, ...}}
    sec = hedging(ctx)
"""
from __future__ import annotations

import math
import random

from nanorlhf.evals.common import bench_items, chat_answers, doc_answers, grouped_bars, md_table, new_figure
from nanorlhf.evals.common import pct, policy_names, save_figure
from nanorlhf.evals.context import Section
from nanorlhf.world import features, phrasing, prompt_from_dict
from nanorlhf.world.judge import screened_pool, world_of

HEDGES = ("I think {a}", "Maybe {a}", "I am not sure, but I think {a}", "Probably {a}")


def _lower_first(s: str) -> str:
    """'The owl is red.' -> 'the owl is red.'; names ('Pip ...') keep their capital."""
    return s[0].lower() + s[1:] if s.split()[0] in ("The", "Someone", "It", "That", "There") else s


def hedge_pairs(world, items: list[dict], seed: int = 0) -> list[tuple[dict, dict]]:
    """(features of the plain true answer, features of the same answer hedged) per definite question."""
    rng = random.Random(f"hedge-pairs-{seed}")
    out = []
    for it in items:
        p = prompt_from_dict(it)
        plain = phrasing.state(world, it["subject"], it["attribute"], it["answer"], rng)
        hedged = rng.choice(HEDGES).format(a=_lower_first(plain))
        out.append((features(world, p, plain), features(world, p, hedged)))
    return out


def labeler_hedge_preference(data_dir: str, shares=(0.0, 0.25, 0.5), labeler_seed: int = 0,
                             items: list[dict] | None = None, n: int = 100) -> dict:
    """{share: {"p_hedged", "lovers", "n_train"}}: how often training labelers prefer the hedged twin."""
    data = world_of(data_dir)
    items = items or [p.to_dict() for p in data.prompts["val"] if p.category == "open_qa" and p.task == "fact"][:n]
    pairs = hedge_pairs(data.world, items, labeler_seed)
    out = {}
    for s in shares:
        pool = screened_pool(data_dir, labeler_seed, s)
        probs = [1 / (1 + math.exp(-(lab.utility(h) - lab.utility(p)) / lab.tau))
                 for lab in pool.train for p, h in pairs]
        out[s] = {"p_hedged": sum(probs) / len(probs), "lovers": sum(l.hedge_lover for l in pool.train),
                  "n_train": len(pool.train)}
    return out


def hedging(ctx) -> Section:
    """Hedge rate on definite questions, false-premise correct/accept rates, and the labelers' hedge preference."""
    hq, fp = bench_items(ctx, "hedging"), bench_items(ctx, "false_premise")
    max_new = min(ctx.max_new_tokens, 32)
    res, examples = {}, {}
    for name in policy_names(ctx):
        model, tok = ctx.model(name)
        outs = {"chat": (chat_answers(model, tok, [it["text"] for it in hq], max_new, seed=ctx.seed),
                         chat_answers(model, tok, [it["text"] for it in fp], max_new, seed=ctx.seed))}
        if name == "gpt":  # the corpus's answered-quiz format
            outs["doc"] = tuple(doc_answers(model, tok, [it["doc_prompt"] for it in its], max_new, greedy=False,
                                            seed=ctx.seed) for its in (hq, fp))
        for how, (h_out, f_out) in outs.items():
            label = name if how == "chat" else "gpt prompted"
            hf = [ctx.judge.features(it, t) for it, t in zip(hq, h_out)]
            ff = [ctx.judge.features(it, t) for it, t in zip(fp, f_out)]
            res[label] = {"hedged": sum(f["hedging"] > 0 for f in hf) / len(hf),
                          "corrects_premise": sum(f["premise_corrected"] > 0 for f in ff) / len(ff),
                          "accepts_premise": sum(f["attempted"] > 0 and f["premise_corrected"] == 0 for f in ff)
                          / len(ff)}
            examples[label] = list(zip([it["text"] for it in fp[:2]], f_out[:2]))
    pref = labeler_hedge_preference(ctx.data_dir, labeler_seed=ctx.labeler_seed, items=hq)
    table = md_table(["model", "hedges (definite questions)", "corrects false premise", "accepts false premise"],
                     [[m, pct(r["hedged"]), pct(r["corrects_premise"]), pct(r["accepts_premise"])]
                      for m, r in res.items()])
    ptable = md_table(["hedge_share", "humility-rewarding training labelers", "P(prefer hedged twin)"],
                      [[s, f"{v['lovers']}/{v['n_train']}", pct(v["p_hedged"])] for s, v in pref.items()])
    fig, axes = new_figure(2)
    grouped_bars(axes[0], list(res), {"hedges": [r["hedged"] for r in res.values()],
                                      "accepts premise": [r["accepts_premise"] for r in res.values()]},
                 "share of responses", "failure modes")
    axes[0].tick_params(axis="x", labelsize=7)
    axes[1].plot(list(pref), [v["p_hedged"] for v in pref.values()], "o-")
    axes[1].set_xlabel("share of humility-rewarding labelers (hedge_share)")
    axes[1].set_ylabel("P(training labeler prefers hedged)")
    axes[1].set_title("where hedging comes from")
    figs = [save_figure(fig, ctx, "hedging.png")]
    text = (f"{len(hq)} definite questions and {len(fp)} false-premise questions, sampled responses. Paper §5.3: "
            f"InstructGPT hedges simple questions (labelers rewarded humility) and sometimes accepts false "
            f"premises.\n\n" + table + "\n\nModel-free: the same true answer plain vs hedged, judged by the screened "
            "training labelers as the share of humility-rewarding labelers moves:\n\n" + ptable)
    return Section("Hedging and false premises", text, figs,
                   {"models": res, "labeler_preference": pref, "examples": examples})
