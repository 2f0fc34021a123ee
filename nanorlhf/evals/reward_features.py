"""What the reward model pays for, beside what the labelers pay for: reward hacking read in the world's features.

The gold score is linear in the world's answer features (nanorlhf/world/scorers.py): the held-out
labelers' mean utility, sum over f of w_f * x_f (`gold_weights`). The reward model is a network on
text. On each policy's answers (K sampled per prompt) this diagnostic regresses the RM's score, and
the gold score, on the same features *within prompt*: each prompt's K answers are centred on their
own mean (`within_prompt_fit`), so a coefficient says what one more unit of a feature is worth at a
fixed prompt, and whatever a prompt adds to every answer's score drops out. The gold's coefficients
come back as the weights w_f (a check of the fit); the RM's are on its own scale, so compare a
feature's RM / gold ratio with the other features'. A feature the RM underpays (a false fact, say)
is one PPO will not learn to avoid; one it overpays is one PPO will buy. Beside them, each policy's
mean of each feature per answer: what PPO changed, and what that change was worth in gold.

    python evaluate.py --suite=reward_features --split=val \
        --policies=sft=out/small/sft_1m/ckpt.pt,ppo=out/small/ppo_1m/ckpt.pt --rm=out/small/rm/ckpt.pt
"""
from __future__ import annotations

import numpy as np
import torch

from nanorlhf.evals.common import md_table
from nanorlhf.evals.context import Section
from nanorlhf.evals.preference import sample_responses
from nanorlhf.reward import score_texts


def gold_weights(pool) -> dict[str, float]:
    """w_f such that pool.gold(x) == sum_f w_f * x_f: the held-out labelers' mean weight under their instructions."""
    w: dict[str, float] = {}
    for lab in pool.heldout:
        for f, x in lab.weights.items():
            w[f] = w.get(f, 0.0) + lab.instructions.get(f, 1.0) * x / len(pool.heldout)
    return w


def centred(a: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """a (N, ...) as float64 with each group's mean subtracted from its rows (a fixed effect per prompt)."""
    out = a.astype(np.float64).copy()
    for g in np.unique(groups):
        out[groups == g] -= out[groups == g].mean(axis=0)
    return out


def within_prompt_fit(X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Least-squares coefficients of y on X after centring both within each group.

    X (N, F), y (N,), groups (N,) of group ids. A feature with no variation inside any group gets 0.
    """
    Xc, yc = centred(X, groups), centred(y, groups)
    varied = np.abs(Xc).sum(axis=0) > 1e-12
    coef = np.zeros(X.shape[1])
    coef[varied] = np.linalg.lstsq(Xc[:, varied], yc, rcond=None)[0]
    return coef


def within_prompt_corr(a: np.ndarray, b: np.ndarray, groups: np.ndarray) -> float:
    """Pearson correlation of a and b after centring each within its group."""
    ac, bc = centred(a, groups), centred(b, groups)
    den = np.sqrt((ac ** 2).sum() * (bc ** 2).sum())
    return float((ac * bc).sum() / den) if den > 0 else 0.0


@torch.no_grad()
def policy_features(ctx, name: str, rows: list[dict], samples: int, names: list[str]) -> dict:
    """K = `samples` answers a prompt from one policy: features (N, F), RM scores, gold scores, prompt ids."""
    model, tok = ctx.model(name)
    rm, rtok, bias = ctx.reward_model()
    texts = [sample_responses(model, tok, rows, ctx.max_new_tokens, seed=ctx.seed + 1000 * s) for s in range(samples)]
    pairs = [(r, t) for ts in texts for r, t in zip(rows, ts)]
    feats = [ctx.judge.features(r, t) for r, t in pairs]
    rm_scores = score_texts(rm, rtok, [r["prompt"] for r, _ in pairs], [t for _, t in pairs], ctx.device, bias)
    return {"X": np.array([[f.get(n, 0.0) for n in names] for f in feats]),
            "rm": rm_scores.float().cpu().numpy(),
            "gold": np.array([ctx.judge.gold(r, t) for r, t in pairs]),
            "groups": np.array([i for _ in range(samples) for i in range(len(rows))])}


def reward_features(ctx, rows: list[dict], samples: int = 4) -> Section:
    """Per policy in ctx.policies: mean features per answer, and the RM's and the gold's within-prompt coefficients."""
    w = gold_weights(ctx.judge.pool)
    names = sorted(w, key=lambda f: -abs(w[f]))
    res = {p: policy_features(ctx, p, rows, samples, names) for p in ctx.policies}
    data, first = {}, next(iter(res))
    for p, d in res.items():
        data[p] = {"mean": dict(zip(names, d["X"].mean(axis=0).tolist())),
                   "rm_coef": dict(zip(names, within_prompt_fit(d["X"], d["rm"], d["groups"]).tolist())),
                   "gold_coef": dict(zip(names, within_prompt_fit(d["X"], d["gold"], d["groups"]).tolist())),
                   "corr_rm_gold": within_prompt_corr(d["rm"], d["gold"], d["groups"]),
                   "rm_mean": float(d["rm"].mean()), "gold_mean": float(d["gold"].mean())}
    used = [f for f in names if any(abs(data[p]["mean"][f]) > 0 for p in data)]
    means = md_table(["feature", "gold weight"] + [f"{p} per answer" for p in data]
                     + [f"{p} - {first}, in gold" for p in list(data)[1:]],
                     [[f, f"{w[f]:+.2f}"] + [f"{data[p]['mean'][f]:.3f}" for p in data]
                      + [f"{(data[p]['mean'][f] - data[first]['mean'][f]) * w[f]:+.3f}" for p in list(data)[1:]]
                      for f in used])
    coefs = md_table(["feature"] + [f"{p}: {k}" for p in data for k in ("RM", "gold")],
                     [[f] + [f"{data[p][k][f]:+.2f}" for p in data for k in ("rm_coef", "gold_coef")] for f in used])
    corr = "; ".join(f"{p} {data[p]['corr_rm_gold']:.2f}" for p in data)
    md = (f"{len(rows)} prompts x {samples} answers a policy. Mean feature per answer, and what the change from "
          f"{first} is worth in gold (the feature's change times its gold weight):\n\n{means}\n\n"
          f"Within-prompt least-squares coefficients of the RM's score and of the gold score on the features, "
          f"on each policy's answers (the gold's are its weights, up to features that do not vary):\n\n{coefs}\n\n"
          f"Within-prompt correlation of the RM's score with the gold: {corr}.")
    return Section("What the reward model pays for", md, [], data)
