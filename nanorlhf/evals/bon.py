"""Best-of-n sampling against the reward model: the cheapest way to optimise a policy against an RM.

Draw n responses from the SFT policy and keep the one the RM scores highest.
The KL divergence of the resulting distribution from the SFT policy is, for
continuous scores (Stiennon et al. 2020; Gao et al. 2022),

    KL(BoN || SFT) = log n - (n - 1) / n

so n = 1 is the SFT policy itself (KL 0) and n = 256 sits at KL ~ 4.55 nats.

We sample N = max(n) responses per prompt once, and for every n compute the
exact expectation, over a uniformly random n-subset of the N, of the chosen
sample's score: sorting the N by RM score, the sample of rank i (1 = lowest) is
the best of a random n-subset with probability C(i-1, n-1) / C(N, n). One draw
of N serves every n, with less noise than splitting the N into groups.

Example:
    bon_kl(1), bon_kl(2)                              # (0.0, 0.193...)  = log 2 - 1/2
    expected_best([0.1, 0.9, 0.5], [1, 2, 3], n=3)    # 2.0: the top-RM sample's value
    curve = best_of_n(ctx, sft, tok, rm, rows[:32], bias=b)   # [{"n", "kl", "d", "rm", "gold"}, ...]
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

from nanorlhf.evals.common import chat_answers
from nanorlhf.reward import score_texts

NS = tuple(2 ** k for k in range(9))  # 1, 2, 4, ..., 256


def bon_kl(n: int) -> float:
    """Analytic KL(best-of-n || base) in nats: log n - (n - 1) / n."""
    return math.log(n) - (n - 1) / n


def expected_best(scores, values, n: int) -> float:
    """E[value of the top-scoring sample] over a uniformly random n-subset of the N samples (exact)."""
    scores, values = np.asarray(scores, dtype=float), np.asarray(values, dtype=float)
    N = len(scores)
    assert 1 <= n <= N, f"need 1 <= n <= {N}, got {n}"
    order = np.argsort(scores, kind="stable")                      # ascending: rank i = position + 1
    return float((_weights(N, n) * values[order]).sum())


@lru_cache(maxsize=64)
def _weights(N: int, n: int) -> np.ndarray:
    """P(rank i is the best of a random n-subset) = C(i-1, n-1) / C(N, n), for i = 1..N."""
    total = math.comb(N, n)
    return np.array([math.comb(i, n - 1) / total for i in range(N)])


def sample_n(model, tok, rows: list[dict], n: int, max_new_tokens: int = 48, seed: int = 0,
             batch: int = 256) -> list[list[str]]:
    """n sampled chat responses for each prompt row: (P lists of n)."""
    flat = chat_answers(model, tok, [r["prompt"] for r in rows for _ in range(n)], max_new_tokens,
                        seed=seed, batch=batch)
    return [flat[i * n:(i + 1) * n] for i in range(len(rows))]


@torch.no_grad()
def rm_matrix(rm, tok, rows: list[dict], texts: list[list[str]], bias: float = 0.0, device: str = "cpu",
              chunk: int = 96) -> np.ndarray:
    """RM scores (P, N). Each prompt's distinct completions are scored once, shortest first in chunks
    (less padding); a completion's score does not depend on its batch."""
    out = np.zeros((len(rows), max(len(ts) for ts in texts)))
    for i, (r, ts) in enumerate(zip(rows, texts)):
        uniq = sorted(set(ts), key=len)
        score = {}
        for k in range(0, len(uniq), chunk):
            part = uniq[k:k + chunk]
            s = score_texts(rm, tok, [r["prompt"]] * len(part), part, device, bias, batch=len(part))
            s = s.float().cpu().tolist()
            score.update(zip(uniq[k:k + chunk], s))
        out[i, :len(ts)] = [score[t] for t in ts]
    return out


def best_of_n(ctx, model, tok, rm, rows: list[dict], ns=NS, *, bias: float = 0.0) -> list[dict]:
    """Best-of-n from `model` against `rm`: per n, the analytic KL, d = sqrt(KL), and the mean over prompts
    of the chosen sample's RM score and gold score (ctx.judge.gold; a ctx without a judge skips gold), the
    samples drawn at ctx's seed and length.

    Rows must be prompt rows ({"prompt", ...} with Prompt fields for the judge).
    """
    N, judge = max(ns), ctx.judge
    texts = sample_n(model, tok, rows, N, ctx.max_new_tokens, ctx.seed)
    rm_s = rm_matrix(rm, tok, rows, texts, bias, str(next(rm.parameters()).device))
    gold = None if judge is None else np.array([[judge.gold(r, t) for t in ts] for r, ts in zip(rows, texts)])
    curve = []
    for n in ns:
        point = {"n": n, "kl": bon_kl(n), "d": math.sqrt(bon_kl(n)),
                 "rm": float(np.mean([expected_best(s, s, n) for s in rm_s]))}
        if gold is not None:
            point["gold"] = float(np.mean([expected_best(s, g, n) for s, g in zip(rm_s, gold)]))
        curve.append(point)
    return curve
