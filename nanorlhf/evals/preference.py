"""Win rates judged by the held-out labelers with evaluation-time instructions (InstructGPT §4.1).

For each test prompt, one sampled response per policy; a held-out labeler drawn
at random compares the policy's response with the reference policy's (a K = 2
ranking, Bradley-Terry noise). Ties (identical texts) count one half. The 95%
interval is Wilson's score interval on the number of wins.

Example:
    texts = sample_responses(model, tok, rows)                       # one per prompt
    wr = win_rate(judge, rows, texts, ref_texts, random.Random(0))   # {"rate": .71, "lo": .66, "hi": .76, ...}
"""
from __future__ import annotations

import math
import random
from collections import defaultdict

import torch

from nanorlhf.chat import chat_prompt
from nanorlhf.generate import generate, response_texts


def fitting(rows: list[dict], tok, block_size: int, max_new_tokens: int) -> list[dict]:
    return [r for r in rows if len(chat_prompt(tok, r["prompt"])) + max_new_tokens <= block_size]


@torch.no_grad()
def sample_responses(model, tok, rows: list[dict], max_new_tokens: int = 48, seed: int = 0, batch: int = 64,
                     prefix: str = "") -> list[str]:
    """One sampled response per prompt row, in the chat format (prefix: e.g. a few-shot header)."""
    gen, out = torch.Generator().manual_seed(seed), []
    for i in range(0, len(rows), batch):
        ids = [chat_prompt(tok, prefix + r["prompt"]) for r in rows[i:i + batch]]
        ro = generate(model, ids, max_new_tokens, stop_token=tok.eot_id, pad_id=tok.pad_id, generator=gen)
        out += response_texts(ro, tok)
    return out


def wilson(wins: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion."""
    if n == 0:
        return 0.0, 1.0
    p = wins / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    # clamped: at p = 0 or 1 rounding can put the bound ~1e-17 on the wrong side of p (negative error bars)
    return max(0.0, min(c - h, p)), min(1.0, max(c + h, p))


def win_rate(judge, rows: list[dict], texts: list[str], ref_texts: list[str], rng: random.Random) -> dict:
    """Share of prompts where a held-out labeler prefers `texts` over `ref_texts`, with a 95% interval."""
    wins, per_cat = 0.0, defaultdict(list)
    for row, a, b in zip(rows, texts, ref_texts):
        lab = rng.choice(judge.pool.heldout)
        ranking = lab.rank([judge.features(row, a), judge.features(row, b)], rng, [a, b])
        w = 0.5 if len(ranking) == 1 else float(ranking[0] == [0])
        wins += w
        per_cat[row["category"]].append(w)
    lo, hi = wilson(wins, len(rows))
    return {"rate": wins / len(rows), "lo": lo, "hi": hi, "n": len(rows),
            "by_category": {k: sum(v) / len(v) for k, v in per_cat.items()}}


def gold_mean(judge, rows: list[dict], texts: list[str]) -> float:
    """Mean gold score (held-out pool, eval-time instructions, no noise): evaluation only."""
    return sum(judge.gold(r, t) for r, t in zip(rows, texts)) / len(rows)
