"""The frontier: what each method of the lineage buys in gold reward per nat of KL from SFT.

Every method moves the policy away from pi_SFT to please a learned preference;
the question is how much real preference (the gold score, and held-out-labeler
win rate against SFT) it gets for how far it moves. For each run:

  gold     mean gold score of one sampled response per test prompt (ctx.judge.gold)
  win      share of prompts where a held-out labeler prefers it to SFT's response
  KL       mean over prompts of sum_t [log pi(y_t) - log pi_SFT(y_t)] on the sampled responses;
           best-of-n uses the analytic KL(BoN) = log n - (n - 1)/n instead
  labels   comparisons that went into it (human-simulated prompts ranked + AI-labeled pairs)
  wall     seconds of the method's own training (best-of-n: of sampling n and scoring, at test time)

Over-optimisation laws (Gao et al. 2022), d = sqrt(KL): gold gain of best-of-n
~ d(alpha - beta d), of RL ~ d(alpha - beta log d); fitted when there are points.

Which runs, trained how: nanorlhf/evals/lineage.py (`pipeline.py --lineage=true`).

Example:
    runs = [Run("ppo_1m", "PPO", "out/small/ppo_1m/ckpt.pt"), Run("bon16", "best-of-n", n=16)]
    sec = frontier_section(ctx, runs)        # a markdown table beside frontier.png
"""
from __future__ import annotations

import math
import os
import random
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from nanorlhf.chat import chat_prompt
from nanorlhf.evals.common import md_table, new_figure, pct, save_figure
from nanorlhf.evals.context import Section
from nanorlhf.evals.preference import fitting, paired_difference, sample_responses, win_rate
from nanorlhf.generate import SamplingConfig, generate, response_texts
from nanorlhf.infra.jsonl import PROMPT, read_jsonl
from nanorlhf.masks import token_logprobs
from nanorlhf.ppo import kl_estimate

METHODS = ("SFT", "best-of-n", "PPO", "PPO-ptx", "DPO", "RLAIF-hybrid PPO", "iterated PPO", "up-front PPO", "GRPO",
           "Dr. GRPO", "RLOO", "REINFORCE-baseline", "RLVR (GRPO, rule reward)", "random reward (control)")


@dataclass
class Run:
    name: str
    """row label, e.g. "dpo_b0.1" """
    method: str
    """one of METHODS"""
    ckpt: str = ""
    """policy checkpoint ('' for best-of-n, which samples SFT)"""
    n: int = 0
    """best-of-n: samples per prompt"""
    human_labels: int | None = None
    """comparisons (prompts ranked) by simulated humans; None = read from the run's files"""
    ai_labels: int | None = None
    """pairs labeled by the feedback model"""
    wall_s: float | None = None
    """seconds of the method's own training; None = read from the run's files"""


# -----------------------------------------------------------------------------
# measuring one policy


@torch.no_grad()
def sample_with_kl(model, ref, tok, rows: list[dict], max_new_tokens: int, seed: int, batch: int = 64):
    """One sampled response per prompt and the per-prompt KL estimate sum_t log pi - log pi_SFT.  # (texts, (N,))"""
    gen, texts, kls = torch.Generator().manual_seed(seed), [], []
    dev = next(model.parameters()).device
    for i in range(0, len(rows), batch):
        ro = generate(model, [chat_prompt(tok, r["prompt"]) for r in rows[i:i + batch]],
                      SamplingConfig(max_new_tokens=max_new_tokens), stop_token=tok.eot_id, pad_id=tok.pad_id,
                      generator=gen)
        ref_lp = token_logprobs(ref(ro.tokens.to(dev), attention_mask=ro.attention_mask.to(dev)), ro.tokens)
        kls.append(kl_estimate(ro.logprobs, ref_lp, ro.response_mask).cpu())     # (b,)
        texts += response_texts(ro, tok)
    return texts, torch.cat(kls)


def bon_texts(ctx, rows: list[dict], ns: list[int]) -> tuple[dict[int, list[str]], float]:
    """For each n, SFT's best of its first n samples per prompt by the RM; and the seconds it took for max(ns)."""
    from nanorlhf.evals.bon import rm_matrix, sample_n
    t0 = time.time()
    sft, tok = ctx.model("sft")
    rm, _, bias = ctx.reward_model()
    samples = sample_n(sft, tok, rows, max(ns), ctx.max_new_tokens, ctx.seed)       # (P lists of N)
    scores = rm_matrix(rm, tok, rows, samples, bias, ctx.device)                     # (P, N)
    picks = {n: [ts[int(s[:n].argmax())] for ts, s in zip(samples, scores)] for n in ns}
    return picks, time.time() - t0


def provenance(run: Run) -> tuple[int | None, int | None, float | None]:
    """(human labels, AI labels, wall seconds): the Run's own, else what train_dpo.py wrote into its checkpoint."""
    from nanorlhf.checkpoint import load_checkpoint
    h, a, w = run.human_labels, run.ai_labels, run.wall_s
    if not run.ckpt or None not in (h, a, w):
        return h, a, w
    lin = load_checkpoint(run.ckpt)["extra"].get("lineage", {})
    return (h if h is not None else lin.get("human_labels"), a if a is not None else lin.get("ai_labels"),
            w if w is not None else lin.get("wall_s"))


def measure(ctx, runs: list[Run]) -> list[dict]:
    """gold, win rate vs SFT (held-out labelers), KL from SFT, labels and wall time of every run."""
    from nanorlhf.checkpoint import load_checkpoint, load_model
    sft, tok = ctx.model("sft")
    rows = read_jsonl(os.path.join(ctx.data_dir, "test_prompts.jsonl"), PROMPT)
    rows = fitting(rows, tok, sft.cfg.block_size, ctx.max_new_tokens)[:ctx.n]
    sft_texts = sample_responses(sft, tok, rows, ctx.max_new_tokens, ctx.seed)     # = sample_with_kl's texts
    sft_gold = [ctx.judge.gold(r, t) for r, t in zip(rows, sft_texts)]
    rm_labels = load_checkpoint(ctx.rm)["extra"].get("report", {}).get("n_train_comparisons") if ctx.rm else None
    points = [{"name": "sft", "method": "SFT", "kl": 0.0, "gold": sum(sft_gold) / len(rows), "gold_vs_sft": None,
               "win": 0.5, "lo": None, "hi": None, "human_labels": 0, "ai_labels": 0, "wall_s": None,
               "n_prompts": len(rows)}]
    bon_ns = [r.n for r in runs if r.method == "best-of-n"]
    bon, bon_s = bon_texts(ctx, rows, bon_ns) if bon_ns else ({}, 0.0)
    for run in runs:
        if run.method == "best-of-n":
            from nanorlhf.evals.bon import bon_kl
            texts, kl = bon[run.n], bon_kl(run.n)           # analytic: log n - (n - 1)/n
            h = run.human_labels if run.human_labels is not None else rm_labels
            a, w = 0, bon_s * run.n / max(bon_ns)          # sampling and scoring n per prompt, at test time
        else:
            model, _, _ = load_model(run.ckpt, ctx.device)
            texts, kls = sample_with_kl(model.eval(), sft, tok, rows, ctx.max_new_tokens, ctx.seed)
            kl, (h, a, w) = kls.mean().item(), provenance(run)
        wr = win_rate(ctx.judge, rows, texts, sft_texts, random.Random(ctx.labeler_seed + 7))
        gold = [ctx.judge.gold(r, t) for r, t in zip(rows, texts)]
        d = paired_difference(sft_gold, gold, seed=ctx.seed)       # the gold's change from SFT, paired over prompts
        points.append({**asdict(run), "kl": kl, "gold": sum(gold) / len(rows),
                       "gold_vs_sft": {k: d[k] for k in ("diff", "lo", "hi")}, "win": wr["rate"],
                       "lo": wr["lo"], "hi": wr["hi"], "human_labels": h, "ai_labels": a, "wall_s": w})
        print(f"{run.name:14s} KL {kl:6.2f}  gold {points[-1]['gold']:+.3f}  win vs SFT {wr['rate']:.1%}")
    return points


# -----------------------------------------------------------------------------
# the over-optimisation laws, the table and the figure


def gao_fit(points: list[dict], form: str, gold0: float) -> tuple[float, float] | None:
    """Gao et al.'s (alpha, beta) through the SFT origin, for points with KL > 0 (None with fewer than 3:
    two points determine both parameters exactly, which says nothing)."""
    from nanorlhf.evals.overoptimization import fit_gao
    pts = [p for p in points if p["kl"] > 0]
    if len(pts) < 3:
        return None
    return fit_gao([math.sqrt(p["kl"]) for p in pts], [p["gold"] - gold0 for p in pts], form)


def labels_text(h, a) -> str:
    if h is None and a is None:
        return "-"
    return f"{h or 0}" + (f" + {a} AI" if a else "")


def gold_change(d: dict | None) -> str:
    return "-" if d is None else f"{d['diff']:+.2f} [{d['lo']:+.2f}, {d['hi']:+.2f}]"


def frontier_table(points: list[dict]) -> str:
    rows = [[p["method"], p["name"], f"{p['kl']:.2f}", f"{p['gold']:+.3f}", gold_change(p.get("gold_vs_sft")),
             "50% (ref)" if p["lo"] is None else f"{pct(p['win'])} [{pct(p['lo'])}, {pct(p['hi'])}]",
             labels_text(p["human_labels"], p["ai_labels"]),
             "-" if p["wall_s"] is None else f"{p['wall_s']:.0f}s"]
            for p in sorted(points, key=lambda p: (METHODS.index(p["method"]) if p["method"] in METHODS else 99,
                                                   p["kl"]))]
    return md_table(["method", "run", "KL from SFT (nats)", "gold", "gold - SFT's [95%, paired]", "win vs SFT [95% CI]",
                     "labels", "wall"], rows)


def frontier_plot(ctx, points: list[dict], fits: dict) -> str:
    import matplotlib.pyplot as plt

    from nanorlhf.evals.overoptimization import gao_curve
    fig, (ax_g, ax_w) = new_figure(2)
    gold0 = points[0]["gold"]
    for m in METHODS:
        pts = sorted([p for p in points if p["method"] == m], key=lambda p: p["kl"])
        if not pts:
            continue
        i = METHODS.index(m)                # one look a method: tab20's dark colours, then its light ones, squares
        colour, marker = plt.get_cmap("tab20")((2 * i) % 20 + (2 * i) // 20), "os"[i // 10]
        line = ax_g.plot([p["kl"] for p in pts], [p["gold"] for p in pts], marker + "-", color=colour, label=m)[0]
        ax_w.plot([p["kl"] for p in pts], [p["win"] for p in pts], marker + "-", color=line.get_color(), label=m)
        form = "bon" if m == "best-of-n" else "rl" if m == "PPO" else None
        if form and fits.get(form):
            kls = np.concatenate([np.linspace(0, 1, 20), np.geomspace(1, max(1.0, max(p["kl"] for p in pts)), 40)])
            ax_g.plot(kls, gold0 + gao_curve(np.sqrt(kls), *fits[form], form), ":", color=line.get_color())
    ax_g.set(xlabel="KL from SFT (nats)", ylabel="gold score", title="gold reward vs KL")
    ax_w.set(xlabel="KL from SFT (nats)", ylabel="win rate vs SFT", title="held-out labelers vs KL")
    ax_w.axhline(0.5, color="grey", lw=0.5)
    for ax in (ax_g, ax_w):                 # linear to 1 nat, logarithmic beyond: a hacked run at 50 nats fits too
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(left=-0.1)
    ax_g.legend(fontsize=7)
    return save_figure(fig, ctx, "frontier.png")


def frontier_section(ctx, runs, notes: list[str] = ()) -> Section:
    """The lineage's frontier as a report Section: table, Gao et al. fits, notes and frontier.png."""
    runs = [r if isinstance(r, Run) else Run(**r) for r in runs]
    points = measure(ctx, runs)
    gold0 = points[0]["gold"]
    fits = {"bon": gao_fit([p for p in points if p["method"] == "best-of-n"], "bon", gold0),
            "rl": gao_fit([p for p in points if p["method"] == "PPO"], "rl", gold0)}
    fig = frontier_plot(ctx, points, fits)
    lines = [frontier_table(points),
             f"{len(points) - 1} runs against SFT on {points[0]['n_prompts']} test prompts (held-out organisations); "
             "gold: held-out pool, evaluation-time instructions; win: a held-out labeler compares with SFT's response; "
             "KL: the sampled per-token estimate (best-of-n: log n - (n-1)/n); labels: prompts ranked (+ AI-labeled "
             "pairs); wall: the method's own training (best-of-n: sampling and scoring at test time)."]
    for kind, law in (("bon", "d(alpha - beta d)"), ("rl", "d(alpha - beta log d)")):
        if fits[kind]:
            lines.append(f"Gao et al. fit, {'best-of-n' if kind == 'bon' else 'PPO'}: gold gain = {law} with "
                         f"alpha = {fits[kind][0]:+.3f}, beta = {fits[kind][1]:+.3f} (d = sqrt(KL)).")
    data = {"points": points, "fits": fits, "notes": list(notes)}
    return Section("The lineage: gold reward against KL", "\n\n".join(lines + list(notes)), [fig], data)
