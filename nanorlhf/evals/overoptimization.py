"""Over-optimisation of the reward model (InstructGPT §3.5 "why the KL penalty"; Gao et al. 2022).

The RM is a proxy learned from noisy rankings; the gold score (the held-out
labelers' noise-free utility) is what we actually want. Push the RM score far
enough and the gold score stops rising, then falls. Two ways of pushing:

  best-of-n from SFT   KL = log n - (n - 1)/n (bon.py), n = 1 .. 256
  PPO                  checkpoints along training ("ppo@20", ..., "ppo"), KL measured as
                       the mean over sampled responses of sum_t log pi_RL(y_t|.) - log pi_SFT(y_t|.)

Against d = sqrt(KL), Gao et al. fit the gold reward gained over the SFT policy as

    best-of-n:  R(d) = d (alpha - beta d)          peak at d* = alpha / (2 beta)
    RL:         R(d) = d (alpha - beta log d)

Both are linear in (alpha, beta), so least squares is closed form (no intercept:
R(0) = 0 at the SFT policy).

Example:
    alpha, beta = fit_gao(d, gold - gold[0], "bon")
    sec = overoptimization(ctx)      # tables and overoptimization.png
"""
from __future__ import annotations

import math
import os
import random

import numpy as np
import torch

from nanorlhf.evals.bon import best_of_n, rm_matrix
from nanorlhf.evals.common import md_table, new_figure, save_figure
from nanorlhf.evals.context import Section
from nanorlhf.evals.preference import fitting
from nanorlhf.generate import SamplingConfig, generate, response_texts, sequence_logprobs
from nanorlhf.infra.jsonl import PROMPT, read_jsonl

BON_PROMPTS = 32
"""prompts for best-of-n (x 256 samples each): about a minute at the small scale"""


def gao_features(d, form: str) -> np.ndarray:
    """Design matrix (len(d), 2) with R = X @ (alpha, beta): bon [d, -d^2], rl [d, -d log d]."""
    d = np.asarray(d, dtype=float)
    if form == "bon":
        return np.stack([d, -d * d], 1)
    if form == "rl":
        dlogd = np.where(d > 0, d * np.log(np.where(d > 0, d, 1.0)), 0.0)  # d log d -> 0 at d = 0
        return np.stack([d, -dlogd], 1)
    raise ValueError(f"form is 'bon' or 'rl', got {form!r}")


def fit_gao(d, r, form: str) -> tuple[float, float]:
    """Least-squares (alpha, beta) of Gao et al.'s form through the origin."""
    coef, *_ = np.linalg.lstsq(gao_features(d, form), np.asarray(r, dtype=float), rcond=None)
    return float(coef[0]), float(coef[1])


def gao_curve(d, alpha: float, beta: float, form: str) -> np.ndarray:
    return gao_features(d, form) @ np.array([alpha, beta])


@torch.no_grad()
def policy_point(ctx, policy, ref, tok, rm, bias, rows, per_prompt) -> dict:
    """KL(policy || ref) from the policy's own samples (ctx's seed and length), and their mean RM and gold scores."""
    judge, max_new_tokens, seed = ctx.judge, ctx.max_new_tokens, ctx.seed
    ids = [[tok.user_id] + tok.encode(r["prompt"]) + [tok.assistant_id] for r in rows for _ in range(per_prompt)]
    ro = generate(policy, ids, SamplingConfig(max_new_tokens=max_new_tokens), stop_token=tok.eot_id, pad_id=tok.pad_id,
                  generator=torch.Generator().manual_seed(seed))
    ref_lp = sequence_logprobs(ref, ro.tokens, ro.attention_mask)                 # (B, T)
    kl = ((ro.logprobs - ref_lp) * ro.response_mask).sum(1).mean().item()       # nats per response
    texts = response_texts(ro, tok)
    grouped = [texts[i * per_prompt:(i + 1) * per_prompt] for i in range(len(rows))]
    rm_s = rm_matrix(rm, tok, rows, grouped, bias, str(next(rm.parameters()).device))
    gold = np.mean([judge.gold(r, t) for r, ts in zip(rows, grouped) for t in ts])
    return {"kl": kl, "d": math.sqrt(max(kl, 0.0)), "rm": float(rm_s.mean()), "gold": float(gold)}


def rl_checkpoints(ctx) -> dict[str, list[tuple[float, str]]]:
    """{series: [(iteration, policy name)]} for "ppo@20"-style names and the final "ppo" / "ppo_ptx"."""
    series: dict[str, list] = {}
    for name in ctx.policies:
        base, _, it = name.partition("@")
        if base.startswith("ppo"):
            series.setdefault(base, []).append((float(it) if it else math.inf, name))
    return {k: sorted(v) for k, v in series.items()}


def overoptimization(ctx) -> Section:
    """Gold and RM score against d = sqrt(KL) for best-of-n and PPO checkpoints, with Gao et al.'s fits."""
    if "sft" not in ctx.policies or not ctx.rm:
        return Section("Over-optimisation", "Needs an `sft` policy and a reward model; skipped.", [], {})
    sft, tok = ctx.model("sft")
    rm, _, bias = ctx.reward_model()
    rows = fitting(read_jsonl(os.path.join(ctx.data_dir, "test_prompts.jsonl"), PROMPT), tok,
                   sft.cfg.block_size, ctx.max_new_tokens)
    rows = random.Random(f"bon-{ctx.seed}").sample(rows, min(BON_PROMPTS, ctx.n, len(rows)))
    curve = best_of_n(ctx, sft, tok, rm, rows, bias=bias)
    g0, r0 = curve[0]["gold"], curve[0]["rm"]                                   # n = 1: the SFT policy
    d = np.array([p["d"] for p in curve])
    bon_fit = fit_gao(d, [p["gold"] - g0 for p in curve], "bon")
    rl, rl_fits = {}, {}
    per_prompt = max(1, 256 // len(rows))
    for series, ckpts in rl_checkpoints(ctx).items():
        rl[series] = [{"name": name, **policy_point(ctx, ctx.model(name)[0], sft, tok, rm, bias, rows, per_prompt)}
                      for _, name in ckpts]
        if len(rl[series]) >= 2:
            rl_fits[series] = fit_gao([p["d"] for p in rl[series]], [p["gold"] - g0 for p in rl[series]], "rl")
    # the figure: gold and RM gain over SFT against d, data and fits
    fig, axes = new_figure(2)
    dd = np.linspace(0, max([d.max()] + [p["d"] for s in rl.values() for p in s]) * 1.05, 100)
    axes[0].plot(d, [p["gold"] - g0 for p in curve], "o", label="best-of-n")
    axes[0].plot(dd, gao_curve(dd, *bon_fit, "bon"), "-", color="C0", lw=0.8, label="d(a - b d)")
    axes[1].plot(d, [p["rm"] - r0 for p in curve], "o-", label="best-of-n")
    for k, (series, pts) in enumerate(rl.items()):
        c = f"C{k + 1}"
        axes[0].plot([p["d"] for p in pts], [p["gold"] - g0 for p in pts], "s", color=c, label=series)
        if series in rl_fits:
            axes[0].plot(dd, gao_curve(dd, *rl_fits[series], "rl"), "-", color=c, lw=0.8,
                         label=f"{series}: d(a - b log d)")
        axes[1].plot([p["d"] for p in pts], [p["rm"] - r0 for p in pts], "s-", color=c, label=series)
    for ax, what in zip(axes, ("gold", "RM")):
        ax.set_xlabel("d = sqrt(KL from SFT)")
        ax.set_ylabel(f"{what} score - SFT's")
        ax.set_title(f"{what} score against optimisation")
        ax.legend(fontsize=7)
    figs = [save_figure(fig, ctx, "overoptimization.png")]
    # the tables
    bon_rows = [[p["n"], f"{p['kl']:.3f}", f"{p['d']:.3f}", f"{p['rm']:+.3f}", f"{p['gold']:+.3f}"] for p in curve]
    text = (f"Best-of-n from SFT on {len(rows)} test prompts x {curve[-1]['n']} samples, chosen by the RM; "
            f"KL = log n - (n-1)/n. Gao et al. fit (gold gain over SFT): alpha = {bon_fit[0]:.3f}, beta = "
            f"{bon_fit[1]:.3f}" + (f", peak at d* = {bon_fit[0] / (2 * bon_fit[1]):.2f}" if bon_fit[1] > 0 else
                                    " (no peak within reach: beta <= 0)") + ".\n\n"
            + md_table(["n", "KL (nats)", "d", "RM of chosen", "gold of chosen"], bon_rows))
    if rl:
        rl_rows = [[p["name"], f"{p['kl']:.3f}", f"{p['d']:.3f}", f"{p['rm']:+.3f}", f"{p['gold']:+.3f}"]
                   for pts in rl.values() for p in pts]
        text += (f"\n\nPPO checkpoints ({per_prompt} samples per prompt; KL = mean over responses of the summed "
                 f"log pi_RL - log pi_SFT):\n\n" + md_table(["checkpoint", "KL (nats)", "d", "RM", "gold"], rl_rows))
        for s, (a, b) in rl_fits.items():
            text += f"\n\nRL fit for {s}: gold gain = d ({a:.3f} - {b:.3f} log d)."
    data = {"bon": curve, "bon_fit": bon_fit, "rl": rl, "rl_fits": rl_fits}
    return Section("Over-optimisation (best-of-n and PPO against the gold score)", text, figs, data)
