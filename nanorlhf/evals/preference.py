"""Win rates judged by the held-out labelers with evaluation-time instructions (InstructGPT §4.1).

For each test prompt, one sampled response per policy; a held-out labeler drawn
at random compares the policy's response with the reference policy's (a K = 2
ranking, Bradley-Terry noise). Ties (identical texts) count one half. The 95%
interval is Wilson's score interval on the number of wins. With S responses per
prompt (win_rate_over_samples) the rate is the mean over S x n comparisons and
the interval a bootstrap over prompts.

Example:
    texts = sample_responses(model, tok, rows)                       # one per prompt
    wr = win_rate(judge, rows, texts, ref_texts, random.Random(0))   # {"rate": .71, "lo": .66, "hi": .76, ...}
    wr = win_rate_over_samples(judge, rows, [texts, texts2], [ref, ref2], random.Random(0))   # 2 per prompt
"""
from __future__ import annotations

import math
import random
from collections import defaultdict

import torch

from nanorlhf.chat import chat_prompt
from nanorlhf.generate import SamplingConfig, generate, response_texts


def fitting(rows: list[dict], tok, block_size: int, max_new_tokens: int) -> list[dict]:
    return [r for r in rows if len(chat_prompt(tok, r["prompt"])) + max_new_tokens <= block_size]


@torch.no_grad()
def sample_responses(model, tok, rows: list[dict], max_new_tokens: int = 48, seed: int = 0, batch: int = 64,
                     prefix: str = "") -> list[str]:
    """One sampled response per prompt row, in the chat format (prefix: e.g. a few-shot header)."""
    gen, out = torch.Generator().manual_seed(seed), []
    for i in range(0, len(rows), batch):
        ids = [chat_prompt(tok, prefix + r["prompt"]) for r in rows[i:i + batch]]
        ro = generate(model, ids, SamplingConfig(max_new_tokens=max_new_tokens), stop_token=tok.eot_id,
                      pad_id=tok.pad_id, generator=gen)
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


def ratio_interval(num: list[tuple[int, int]], den: list[tuple[int, int]], n_boot: int = 2000,
                   seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval, over rows, of (sum k / sum n of num) / (sum k / sum n of den): e.g. the
    RM's accuracy over its labelers' agreement, num and den each one (k, n) per row, rows paired."""
    rng, n, out = random.Random(f"ratio-{seed}"), len(num), []
    for _ in range(n_boot):
        idx = [rng.randrange(n) for _ in range(n)]
        a = sum(num[i][0] for i in idx) / max(1, sum(num[i][1] for i in idx))
        b = sum(den[i][0] for i in idx) / max(1, sum(den[i][1] for i in idx))
        out.append(a / b if b else float("nan"))
    out.sort()
    return out[int(0.025 * n_boot)], out[int(0.975 * n_boot) - 1]


def judged_wins(judge, rows: list[dict], texts: list[str], ref_texts: list[str], rng: random.Random) -> list[float]:
    """Per prompt: 1 if a held-out labeler drawn at random prefers texts[i] to ref_texts[i], else 0 (1/2 if equal)."""
    wins = []
    for row, a, b in zip(rows, texts, ref_texts):
        lab = rng.choice(judge.pool.heldout)
        ranking = lab.rank([judge.features(row, a), judge.features(row, b)], rng, [a, b])
        wins.append(0.5 if len(ranking) == 1 else float(ranking[0] == [0]))
    return wins


def _by_category(rows: list[dict], per_prompt: list[float]) -> dict:
    per_cat = defaultdict(list)
    for row, w in zip(rows, per_prompt):
        per_cat[row["category"]].append(w)
    return {k: sum(v) / len(v) for k, v in per_cat.items()}


def win_rate(judge, rows: list[dict], texts: list[str], ref_texts: list[str], rng: random.Random) -> dict:
    """Share of prompts where a held-out labeler prefers `texts` over `ref_texts`, with a 95% interval."""
    wins = judged_wins(judge, rows, texts, ref_texts, rng)
    lo, hi = wilson(sum(wins), len(rows))
    return {"rate": sum(wins) / len(rows), "lo": lo, "hi": hi, "n": len(rows), "by_category": _by_category(rows, wins)}


def win_rate_over_samples(judge, rows: list[dict], texts: list[list[str]], ref_texts: list[list[str]],
                          rng: random.Random, n_boot: int = 2000) -> dict:
    """win_rate with S sampled responses per prompt (texts[s][i]), each pair judged by its own labeler draw.

    The rate is the mean over all S x n comparisons: the same quantity as win_rate's, with less noise. The S
    comparisons of one prompt are not independent, so for S > 1 the 95% interval is a percentile bootstrap
    over prompts, not Wilson's on S x n trials; S = 1 is win_rate exactly.
    """
    if len(texts) == 1:
        return {**win_rate(judge, rows, texts[0], ref_texts[0], rng), "samples": 1}
    wins = [judged_wins(judge, rows, t, r, rng) for t, r in zip(texts, ref_texts)]   # (S, n)
    per_prompt = [sum(w) / len(w) for w in zip(*wins)]                                 # (n,)
    n, boot = len(rows), random.Random(f"bootstrap-{len(rows)}")
    means = sorted(sum(per_prompt[boot.randrange(n)] for _ in range(n)) / n for _ in range(n_boot))
    return {"rate": sum(per_prompt) / n, "lo": means[int(0.025 * n_boot)], "hi": means[int(0.975 * n_boot) - 1],
            "n": n, "samples": len(texts), "by_category": _by_category(rows, per_prompt)}


def paired_difference(a: list[float], b: list[float], n_boot: int = 2000, seed: int = 0) -> dict:
    """Mean of b - a over paired items (b: the treatment, a: the baseline), with a percentile bootstrap interval
    over items: {"a", "b", "diff", "lo", "hi", "n"}."""
    n, rng = len(a), random.Random(f"paired-{seed}-{len(a)}")
    d = [y - x for x, y in zip(a, b)]
    means = sorted(sum(d[rng.randrange(n)] for _ in range(n)) / n for _ in range(n_boot))
    return {"a": sum(a) / n, "b": sum(b) / n, "diff": sum(d) / n, "lo": means[int(0.025 * n_boot)],
            "hi": means[int(0.975 * n_boot) - 1], "n": n}


def gold_mean(judge, rows: list[dict], texts: list[str]) -> float:
    """Mean gold score (held-out pool, eval-time instructions, no noise): evaluation only."""
    return sum(judge.gold(r, t) for r, t in zip(rows, texts)) / len(rows)
