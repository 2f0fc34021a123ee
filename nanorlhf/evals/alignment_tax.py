"""The alignment tax (InstructGPT §4.2, Table 14, Figures 28-29): what RLHF costs on public NLP benchmarks.

Every model is asked in the pretraining format, as the paper prompts GPT-3 and
InstructGPT alike on these benchmarks (no chat tokens):

  squad        passage, question -> answer or "no answer" (SQuAD v2 analog): exact match, F1
  drop         counting over a passage (DROP analog): exact match of the number
  hellaswag    story + 4 endings: the ending with the highest length-normalised
               log-probability (mean log-prob per token) is the choice: accuracy
  translation  English -> moon-speak, 2 solved pairs then the sentence (WMT analog):
               corpus BLEU and exact match

The table is normalised to GPT = 100, like the paper's Table 14. The capability
index is the mean of the normalised headline scores (SQuAD F1, DROP EM,
HellaSwag accuracy, translation BLEU); the tax is 100 minus it. Paper: PPO
regresses all four; PPO-ptx recovers most (and beats GPT-3 on HellaSwag);
raising beta instead costs reward and never fully repairs.

Example:
    scores = capability_scores(ctx, model, tok)    # {"squad_em": .., "squad_f1": .., ..., "translation_bleu": ..}
    sec = alignment_tax(ctx)                       # the GPT = 100 table and alignment_tax.png
    sec = sweep_table(ctx, {"ptx 0": ("out/small/ppo_1m/ckpt.pt", 0.0, 1.2), ...}, knob="gamma_ptx")
"""
from __future__ import annotations

import random

import torch

from nanorlhf.evals.common import bench_items, continuation_logprobs, doc_answers, grouped_bars, md_table
from nanorlhf.evals.common import new_figure, policy_names, save_figure
from nanorlhf.evals.context import Section
from nanorlhf.evals.textmatch import bleu, exact_match, f1_score

HEADLINE = ("squad_f1", "drop_em", "hellaswag_acc", "translation_bleu")


def translation_prompts(items: list[dict], pool: list[dict], shots: int = 2, seed: int = 0) -> list[str]:
    """A moon-speak document: `shots` solved pairs from other items, then the sentence to translate."""
    rng = random.Random(f"translation-shots-{seed}")
    out = []
    for it in items:
        others = [p for p in pool if p["source"] != it["source"]]
        lines = ["Moon-speak:"]
        for p in rng.sample(others, min(shots, len(others))):
            lines += [f"English: {p['source']}", f"Moon: {p['target']}"]
        out.append("\n".join(lines + [f"English: {it['source']}", "Moon:"]))
    return out


def hellaswag_accuracy(model, tok, items: list[dict]) -> float:
    """Share of items where the true ending has the highest mean log-prob per token."""
    ctxs = [tok.encode(it["context"]) for it in items for _ in it["endings"]]
    ends = [tok.encode(" " + e) for it in items for e in it["endings"]]
    lp, n = continuation_logprobs(model, ctxs, ends)
    right, k = 0, 0
    for it in items:
        m = len(it["endings"])
        right += int(torch.argmax(lp[k:k + m] / n[k:k + m]).item() == it["label"])  # length-normalised
        k += m
    return right / len(items)


def capability_scores(ctx, model, tok) -> dict:
    """The four benchmarks' raw scores (each in [0, 1]) for one model, greedy, in the pretraining format."""
    sq, dr = bench_items(ctx, "squad"), bench_items(ctx, "drop")
    hs, tr = bench_items(ctx, "hellaswag"), bench_items(ctx, "translation")
    pool = bench_items(ctx, "translation", 10**9)
    sq_out = doc_answers(model, tok, [it["doc_prompt"] for it in sq], 8)
    dr_out = doc_answers(model, tok, [it["doc_prompt"] for it in dr], 6)
    tr_out = doc_answers(model, tok, translation_prompts(tr, pool, seed=ctx.seed), 32)
    return {
        "squad_em": sum(exact_match(p, it["answer"]) for p, it in zip(sq_out, sq)) / len(sq),
        "squad_f1": sum(f1_score(p, it["answer"]) for p, it in zip(sq_out, sq)) / len(sq),
        "drop_em": sum(exact_match(p, str(it["answer"])) for p, it in zip(dr_out, dr)) / len(dr),
        "hellaswag_acc": hellaswag_accuracy(model, tok, hs),
        "translation_bleu": bleu(tr_out, [it["target"] for it in tr]),
        "translation_em": sum(exact_match(p, it["target"]) for p, it in zip(tr_out, tr)) / len(tr),
    }


def normalised(scores: dict, gpt: dict) -> dict:
    """Each score as a percentage of GPT's (None where GPT scores 0), plus the capability index."""
    out = {k: (100 * v / gpt[k] if gpt.get(k) else None) for k, v in scores.items()}
    head = [out[k] for k in HEADLINE if out.get(k) is not None]
    out["index"] = sum(head) / len(head) if head else None
    return out


def scores_of(ctx, name: str) -> dict:
    """capability_scores of a named policy, computed once per context."""
    key = ("capability", name)
    if key not in ctx._cache:
        ctx._cache[key] = capability_scores(ctx, *ctx.model(name))
    return ctx._cache[key]


def _fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def alignment_tax(ctx) -> Section:
    """Few-shot benchmark scores per model, raw and normalised to GPT = 100."""
    res = {name: scores_of(ctx, name) for name in policy_names(ctx)}
    keys = list(next(iter(res.values())))
    raw = md_table(["model"] + keys, [[m] + [_fmt(100 * v[k]) for k in keys] for m, v in res.items()])
    figs, norm_md, norm = [], "", {}
    if "gpt" in res:
        norm = {m: normalised(v, res["gpt"]) for m, v in res.items()}
        norm_md = "\n\nNormalised to GPT = 100 (index: mean of " + ", ".join(HEADLINE) + "):\n\n" + md_table(
            ["model"] + keys + ["index"], [[m] + [_fmt(v[k]) for k in keys + ["index"]] for m, v in norm.items()])
        fig, (ax,) = new_figure(1, width=7)
        grouped_bars(ax, list(HEADLINE), {m: [v[k] or 0 for k in HEADLINE] for m, v in norm.items()},
                     "score (GPT = 100)", "alignment tax")
        ax.axhline(100, color="gray", lw=0.8, ls="--")
        figs.append(save_figure(fig, ctx, "alignment_tax.png"))
    text = ("Scores x 100 in the pretraining format (greedy; HellaSwag by length-normalised log-prob). "
            "Paper (Table 14): PPO regresses SQuAD, DROP, HellaSwag and translation; PPO-ptx recovers most "
            "and beats GPT-3 on HellaSwag.\n\n" + raw + norm_md)
    return Section("Alignment tax (few-shot public-NLP analogs)", text, figs, {"raw": res, "normalised": norm})


def sweep_table(ctx, runs: dict, knob: str = "gamma_ptx", reward_name: str = "gold") -> Section:
    """The gamma_ptx (or beta) sweep: capability index (GPT = 100) against reward, one row per run.

    runs: {label: (checkpoint path, knob value, reward)}; the reward is whatever the
    pipeline measured for that run (gold or RM score on validation prompts).
    Paper §4.2 / Figure 34: raising gamma_ptx repairs the tax at a small cost in
    reward; raising beta costs reward and never fully repairs it.
    """
    from nanorlhf.checkpoint import load_model
    gpt = scores_of(ctx, "gpt") if "gpt" in ctx.policies else None
    res = {}
    for label, (path, value, reward) in runs.items():
        key = ("sweep", path)
        if key not in ctx._cache:
            m, tok, _ = load_model(path, ctx.device)
            ctx._cache[key] = (m.eval(), tok)
        s = capability_scores(ctx, *ctx._cache[key])
        res[label] = {"knob": value, "reward": reward, "raw": s, "normalised": normalised(s, gpt) if gpt else None}
    res = dict(sorted(res.items(), key=lambda kv: kv[1]["knob"]))    # rows and the plotted line in knob order
    idx = {lab: (r["normalised"] or {}).get("index") for lab, r in res.items()}
    rows = [[lab, r["knob"], f"{r['reward']:+.3f}", _fmt(idx[lab])] + [_fmt(100 * r["raw"][k]) for k in HEADLINE]
            for lab, r in res.items()]
    table = md_table(["run", knob, reward_name, "index (GPT = 100)"] + list(HEADLINE), rows)
    fig, (ax,) = new_figure(1)
    ys = [idx[lab] if idx[lab] is not None else 100 * sum(r["raw"][k] for k in HEADLINE) / len(HEADLINE)
          for lab, r in res.items()]
    xs = [r["reward"] for r in res.values()]
    ax.plot(xs, ys, "o-")
    for (lab, r), x, y in zip(res.items(), xs, ys):
        ax.annotate(f"{knob}={r['knob']}", (x, y), fontsize=7)
    ax.set_xlabel(f"{reward_name} reward")
    ax.set_ylabel("capability index (GPT = 100)" if gpt else "mean headline score x 100")
    ax.set_title(f"alignment tax vs reward: {knob} sweep")
    figs = [save_figure(fig, ctx, f"sweep_{knob}.png")]
    text = (f"Sweep of {knob}: capability on the four benchmarks against reward. Paper: the pretraining mix "
            f"(gamma_ptx) recovers capability at little reward cost; a larger KL coefficient beta does not.\n\n"
            + table)
    return Section(f"Alignment tax vs reward: {knob} sweep", text, figs, res)


def sweep_sections(ctx, runs: dict, big: str) -> list:
    """gamma_ptx and beta sweeps: capability index (GPT = 100) against gold reward on test prompts.

    runs: {name: (checkpoint, beta, gamma_ptx)}; the gamma_ptx sweep holds beta at that of
    "ppo_ptx_<big>", the beta sweep holds gamma_ptx at 0. Policies named gpt_<big> in ctx.
    """
    from nanorlhf.evals.context import EvalContext
    from nanorlhf.evals.ladder import test_rows
    from nanorlhf.evals.preference import gold_mean, sample_responses
    from nanorlhf.checkpoint import load_model
    sub = EvalContext(ctx.judge, ctx.data_dir, ctx.out_dir, {"gpt": ctx.policies[f"gpt_{big}"]}, rm=ctx.rm,
                      device=ctx.device, seed=ctx.seed, labeler_seed=ctx.labeler_seed, n=200)
    rows, gold = None, {}
    for name, (path, _, _) in runs.items():
        model, tok, _ = load_model(path, ctx.device)
        rows = rows or test_rows(ctx, tok, model.cfg.block_size)
        gold[name] = gold_mean(ctx.judge, rows, sample_responses(model.eval(), tok, rows, seed=ctx.seed))
    ptx = {k: (p, g, gold[k]) for k, (p, b, g) in runs.items() if b == runs[f"ppo_ptx_{big}"][1]}
    beta = {k: (p, b, gold[k]) for k, (p, b, g) in runs.items() if g == 0.0}
    return [sweep_table(sub, ptx, knob="gamma_ptx"), sweep_table(sub, beta, knob="beta")]
