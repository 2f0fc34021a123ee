"""Why GPT prompted ties GPT at a size: the ladder's first rung by use-case category.

The ladder's first rung (InstructGPT Figure 1: GPT-3 given a few-shot prefix is preferred to GPT-3 given the bare
prompt) holds at 1m and ties at 100k. For one pipeline run's base model this samples, on the validation prompts,
S answers a prompt to the bare prompt (GPT) and after the few-shot prefix (GPT prompted: nanorlhf/evals/ladder.py),
and reports the held-out labelers' paired win rate of the prefix overall and by category, beside each side's gold
and the share of answers that attempt the task. Then it judges the same answers once more under a counterfactual
utility in which an answer's length and its explicit constraints earn credit only when it attempts the task
(`attempt_gated`): does the rung tie because the world's labelers pay an off-task continuation for its form?

    python pipeline.py --preset=small                                   # first, once
    python -m experiments.first_rung --run_dir=out/small --size=100k
    python -m experiments.first_rung --run_dir=out/small --size=1m

Nothing is trained or written; the world's labelers are not changed (the gated utility is measured, not adopted).
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import ClassVar

from nanorlhf.chat import chat_prompt
from nanorlhf.checkpoint import load_model
from nanorlhf.evals.context import EvalContext
from nanorlhf.evals.ladder import base_responses, few_shots
from nanorlhf.evals.preference import win_rate_over_samples
from nanorlhf.infra.cli import run
from nanorlhf.infra.jsonl import PROMPT, read_jsonl
from nanorlhf.world.judge import Judge

GATED = ("length_score", "constraints")  # the features that describe an answer's form, not whether it answers


@dataclass
class Config:
    run_dir: str = "out/small"
    """the pipeline's output folder (its base_<size>/ckpt.pt)"""
    data_dir: str = "data/small"
    """the pipeline's data folder"""
    size: str = "100k"
    """which base model: base_<size>"""
    split: str = "val"
    """prompt split: val (for choices) or test"""
    n: int = 300
    """prompts"""
    samples: int = 4
    """answers a prompt on each side (the ladder's paired comparisons use 4)"""
    max_new_tokens: int = 48
    """longest answer"""
    seed: int = 0
    """seed of sampling and of the prefix's shots"""
    labeler_seed: int = 0
    """seed of the simulated labeler pool"""

    POSITIVE: ClassVar[tuple] = ("n", "samples", "max_new_tokens")
    CHOICES: ClassVar[dict] = {"split": ("val", "test")}


def attempt_gated(feats: dict, keys: tuple[str, ...] = GATED) -> dict:
    """The features with `keys` set to 0 where the answer does not attempt the task (attempted == 0)."""
    return {k: (v * feats["attempted"] if k in keys else v) for k, v in feats.items()}


class GatedJudge:
    """A judge whose labelers weigh attempt_gated features: the same pool, the same gold weights."""

    def __init__(self, judge):
        self.judge, self.pool = judge, judge.pool

    def features(self, row: dict, response: str) -> dict:
        return attempt_gated(self.judge.features(row, response))

    def gold(self, row: dict, response: str) -> float:
        return self.pool.gold(self.features(row, response))


def rung(judge, rows: list[dict], upper: list[list[str]], lower: list[list[str]], labeler_seed: int) -> dict:
    """The paired win rate of `upper` over `lower` (S answers a prompt each), with its interval and categories."""
    return win_rate_over_samples(judge, rows, upper, lower, random.Random(labeler_seed + 23))


def side_stats(judge, rows: list[dict], texts: list[list[str]]) -> dict:
    """Mean gold and the share of answers that attempt the task, over every answer of every prompt."""
    feats = [judge.features(r, t) for ts in texts for r, t in zip(rows, ts)]  # parsed once, read twice
    return {"gold": sum(judge.pool.gold(f) for f in feats) / len(feats),
            "attempted": sum(f["attempted"] for f in feats) / len(feats)}


def main(cfg: Config) -> dict:
    ckpt = os.path.join(cfg.run_dir, f"base_{cfg.size}", "ckpt.pt")
    if not os.path.exists(ckpt):
        raise SystemExit(f"no {ckpt}: run `python pipeline.py` first (or name a --size it trained)")
    model, tok, _ = load_model(ckpt, "cpu", dropout=0.0)
    model.eval()
    judge = Judge(cfg.data_dir, cfg.labeler_seed)
    ctx = EvalContext(judge, cfg.data_dir, cfg.run_dir, {}, seed=cfg.seed, labeler_seed=cfg.labeler_seed, n=cfg.n)
    rows = read_jsonl(os.path.join(cfg.data_dir, f"{cfg.split}_prompts.jsonl"), PROMPT)
    rows = [r for r in rows if len(chat_prompt(tok, r["prompt"])) + cfg.max_new_tokens <= model.cfg.block_size]
    rows = rows[:cfg.n]
    shots = few_shots(ctx)
    texts = {"gpt": [], "prompted": []}
    for s in range(cfg.samples):  # the seeds the ladder's paired comparisons use
        seed = cfg.seed + 1000 * s
        texts["gpt"].append(base_responses(model, tok, rows, cfg.max_new_tokens, seed))
        texts["prompted"].append(base_responses(model, tok, rows, cfg.max_new_tokens, seed, shots))
    res = {}
    for name, j in (("world's labelers", judge), ("form credited only when attempted", GatedJudge(judge))):
        w = rung(j, rows, texts["prompted"], texts["gpt"], cfg.labeler_seed)
        res[name] = {"rung": w, **{k: side_stats(j, rows, t) for k, t in texts.items()}}
    cats = sorted(res["world's labelers"]["rung"]["by_category"])
    counts = {c: sum(r["category"] == c for r in rows) for c in cats}
    print(f"base_{cfg.size}: GPT prompted over GPT, {len(rows)} {cfg.split} prompts x {cfg.samples} answers, "
          "held-out labelers (95% bootstrap interval)\n")
    print("| utility | prompted over bare | gold bare / prompted | attempted bare / prompted | "
          + " | ".join(f"{c} ({counts[c]})" for c in cats) + " |")
    print("|---" * (4 + len(cats)) + "|")
    for name, r in res.items():
        w = r["rung"]
        print(f"| {name} | {w['rate']:.1%} [{w['lo']:.1%}, {w['hi']:.1%}] | {r['gpt']['gold']:+.2f} / "
              f"{r['prompted']['gold']:+.2f} | {r['gpt']['attempted']:.0%} / {r['prompted']['attempted']:.0%} | "
              + " | ".join(f"{w['by_category'][c]:.0%}" for c in cats) + " |")
    return res


if __name__ == "__main__":
    run(main, Config, __doc__)
