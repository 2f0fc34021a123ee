"""Can the reward model learn a claim's truth? Its comparisons plus one minimal pair a prompt.

The pipeline's reward model scores an answer the same whether one of its claims is true or false
(`python evaluate.py --suite=reward_features`: the in-place edit). Its labelers rank answers that
differ in many ways at once. This writes the pipeline's RM comparisons again, each followed, where
one of its completions states a false fact that `reward_features.correct_in_place` can correct, by a
two-way comparison of the corrected completion ranked above the original (a labeler who checks one
fact; not the pipeline's recipe). Then train an RM on it and PPO against that RM with the stage
scripts, and measure both:

    python pipeline.py --preset=small                                   # first, once
    python -m experiments.fact_pairs --run_dir=out/small --out_dir=out/fact_pairs
    python train_rm.py --preset=small --sft=out/small/sft_1m/ckpt.pt --comparisons=out/fact_pairs/comparisons.jsonl \\
        --out_dir=out/fact_pairs/rm --lr=3e-4 --epochs=3 --dtype=auto
    python train_ppo.py --preset=small --sft=out/small/sft_100k/ckpt.pt --rm=out/fact_pairs/rm/ckpt.pt \\
        --out_dir=out/fact_pairs/ppo_100k --iterations=30 --lr=2e-4 --beta=0.1 --dtype=auto
    python evaluate.py --suite=reward_features --split=val --rm=out/fact_pairs/rm/ckpt.pt \\
        --policies=sft=out/small/sft_100k/ckpt.pt,ppo=out/fact_pairs/ppo_100k/ckpt.pt

Writes out_dir/comparisons.jsonl (train_rm.py draws its validation comparisons anew, as the pipeline's RM stage does).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from nanorlhf.evals.reward_features import correct_in_place
from nanorlhf.infra.cli import run
from nanorlhf.infra.jsonl import PROMPT, read_jsonl, write_jsonl
from nanorlhf.world.comparisons import load_comparisons
from nanorlhf.world.judge import Judge


@dataclass
class Config:
    run_dir: str = "out/small"
    """the pipeline's output folder (its rm/comparisons.jsonl)"""
    data_dir: str = "data/small"
    """the pipeline's data folder (rm_prompts.jsonl: the prompts the comparisons answer)"""
    out_dir: str = "out/fact_pairs"
    """where the comparisons with minimal pairs go"""


def with_fact_pairs(judge, comparisons: list[dict], prompts: dict) -> list[dict]:
    """Each comparison, then (where one of its completions can be corrected in place) that completion
    corrected, ranked above it by the same labeler: a two-way comparison that differs in one claim's truth."""
    out = []
    for c in comparisons:
        out.append(c)
        for text in c["completions"]:
            fixed = correct_in_place(judge, prompts[c["prompt_id"]], text)
            if fixed is not None:
                # DEVIATION: the paper's labelers rank 4-9 of the policy's own samples, never an edited one
                pair = {k: v for k, v in c.items() if k not in ("second_ranking", "group_rankings", "likert")}
                out.append({**pair, "id": c["id"] + "-fact", "completions": [fixed, text], "ranking": [[0], [1]]})
                break
    return out


def main(cfg: Config) -> dict:
    src = os.path.join(cfg.run_dir, "rm", "comparisons.jsonl")
    if not os.path.exists(src):
        raise SystemExit(f"no {src}: run `python pipeline.py` first (or point --run_dir at its output folder)")
    judge = Judge(cfg.data_dir)
    prompts = {p["id"]: p for p in read_jsonl(os.path.join(cfg.data_dir, "rm_prompts.jsonl"), PROMPT)}
    comparisons = load_comparisons(src)
    out = with_fact_pairs(judge, comparisons, prompts)
    os.makedirs(cfg.out_dir, exist_ok=True)
    write_jsonl(os.path.join(cfg.out_dir, "comparisons.jsonl"), out)
    res = {"comparisons": len(comparisons), "fact_pairs": len(out) - len(comparisons)}
    print(f"{res['comparisons']} comparisons, {res['fact_pairs']} minimal pairs added "
          f"-> {os.path.join(cfg.out_dir, 'comparisons.jsonl')}")
    return res


if __name__ == "__main__":
    run(main, Config, __doc__)
