"""Comparison data: sample K completions per prompt, have a labeler rank them, save as JSONL.

A comparison row (schema COMPARISON in jsonl.py) is what a stage consumes,
whether a simulated labeler or a person (label.py) produced it; only `source`
tells them apart:

    {"id", "prompt_id", "prompt", "completions": [K strings], "ranking": [[2], [0, 3], [1]],
     "labeler": "L07", "source": "sim", "likert": [K ints 1..7]}

`ranking` lists groups of completion indices, best first; a group of two or more is a tie.

Example:
    train_cmp, val_cmp = collect_comparisons(sft, tok, cfg, "cpu")
    write_jsonl("comparisons.jsonl", train_cmp, COMPARISON)
"""
from __future__ import annotations

import os
import random

import torch

from nanorlhf.chat import chat_prompt
from nanorlhf.generate import generate, response_texts
from nanorlhf.jsonl import COMPARISON, PROMPT, read_jsonl, write_jsonl
from nanorlhf.judge import Judge
from nanorlhf.labelers import pair_agreement
from nanorlhf.metrics import Progress


def sample_completions(policy, tok, prompts: list[str], ks: list[int], cfg, device, seed: int) -> list[list[str]]:
    """K_i completions for prompt i from the policy, batched through the KV-cache engine."""
    flat = [(i, p) for i, (p, k) in enumerate(zip(prompts, ks)) for _ in range(k)]
    out: list[list[str]] = [[] for _ in prompts]
    gen = torch.Generator().manual_seed(seed)
    bar = Progress(len(flat), "sample")
    for s in range(0, len(flat), cfg.gen_batch):
        if s and (s // cfg.gen_batch) % 20 == 0:
            print(bar.line(s))
        chunk = flat[s:s + cfg.gen_batch]
        ro = generate(policy, [chat_prompt(tok, p) for _, p in chunk], cfg.max_new_tokens,
                      temperature=cfg.temperature, stop_token=tok.eot_id, pad_id=tok.pad_id, generator=gen)
        for (i, _), text in zip(chunk, response_texts(ro, tok)):
            out[i].append(text)
    return out


def fitting_prompts(path, tok, block_size: int, max_new_tokens: int, limit: int = 0) -> list[dict]:
    rows = [r for r in read_jsonl(path, PROMPT) if len(chat_prompt(tok, r["prompt"])) + max_new_tokens <= block_size]
    return rows[:limit] if limit else rows


def label(judge: Judge, rows: list[dict], completions: list[list[str]], labelers, rng: random.Random,
          id_prefix: str) -> list[dict]:
    """One labeler per prompt (like the paper) ranks its K completions and gives each a Likert score."""
    out = []
    for row, comps in zip(rows, completions):
        lab = rng.choice(labelers)
        feats = [judge.features(row, c) for c in comps]
        out.append({"id": f"{id_prefix}-{row['id']}", "prompt_id": row["id"], "prompt": row["prompt"],
                    "completions": comps, "ranking": lab.rank(feats, rng, comps), "labeler": lab.id,
                    "source": lab.source, "likert": [lab.likert(f, rng) for f in feats]})
    return out


def collect_comparisons(sft, tok, cfg, device, only_val: bool = False):
    """Sample and rank the RM training prompts (unless only_val) and the validation prompts.

    Validation comparisons also carry `second_ranking` by a different labeler, for the
    agreement ceiling, and `group_rankings` (one per labeler group) for the held-out-labeler test.
    """
    judge = Judge(cfg.data_dir, labeler_seed=cfg.labeler_seed)
    rng = random.Random(f"rm-{cfg.seed}")
    block = sft.cfg.block_size
    train_cmp = None
    if not only_val:
        rows = fitting_prompts(os.path.join(cfg.data_dir, "rm_prompts.jsonl"), tok, block, cfg.max_new_tokens,
                               cfg.max_prompts)
        ks = [rng.randint(cfg.k_min, cfg.k_max) for _ in rows]
        print(f"sampling {sum(ks)} completions for {len(rows)} RM prompts (K = {cfg.k_min}..{cfg.k_max})")
        comps = sample_completions(sft, tok, [r["prompt"] for r in rows], ks, cfg, device, cfg.seed)
        train_cmp = label(judge, rows, comps, judge.pool.train, rng, "rm")
        write_jsonl(os.path.join(cfg.out_dir, "comparisons.jsonl"), train_cmp, COMPARISON)
    rows = fitting_prompts(os.path.join(cfg.data_dir, "val_prompts.jsonl"), tok, block, cfg.max_new_tokens,
                           cfg.val_prompts)
    ks = [rng.randint(cfg.k_min, cfg.k_max) for _ in rows]
    comps = sample_completions(sft, tok, [r["prompt"] for r in rows], ks, cfg, device, cfg.seed + 1)
    val_cmp = label(judge, rows, comps, judge.pool.train, rng, "val")
    groups = judge.pool.groups(5)
    for c, row in zip(val_cmp, rows):
        feats = [judge.features(row, x) for x in c["completions"]]
        others = [l for l in judge.pool.train if l.id != c["labeler"]]
        c["second_ranking"] = rng.choice(others).rank(feats, rng, c["completions"])
        c["group_rankings"] = [rng.choice(g).rank(feats, rng, c["completions"]) for g in groups]
    write_jsonl(os.path.join(cfg.out_dir, "val_comparisons.jsonl"), val_cmp, COMPARISON)
    return train_cmp, val_cmp


def load_comparisons(path) -> list[dict]:
    return read_jsonl(path, COMPARISON)


def labeler_agreement(val_cmp: list[dict]) -> float:
    """Share of pairs two different training labelers order alike on the same completions (the ceiling)."""
    vals = [pair_agreement(c["ranking"], c["second_ranking"]) for c in val_cmp if "second_ranking" in c]
    vals = [v for v in vals if v == v]
    return sum(vals) / max(len(vals), 1)


def heldout_group_eval(sft, tok, train_cmp: list[dict], val_cmp: list[dict], cfg, device) -> dict:
    """The held-out-labeler test (paper §4.1: 69.6% vs 72.4%).

    Training labelers are split into 5 groups; an RM trained on the comparisons of 4
    groups predicts the 5th group's rankings of the validation completions ("held-out")
    and the 4 groups' own rankings of them ("own"). Folds: cfg.heldout_folds.
    """
    from nanorlhf.model import ScalarHeadModel
    from nanorlhf.reward import fit_reward_model, ranking_accuracy
    judge = Judge(cfg.data_dir, labeler_seed=cfg.labeler_seed)
    groups = [{l.id for l in g} for g in judge.pool.groups(5)]
    held, own = [], []
    for g in range(cfg.heldout_folds):
        subset = [c for c in train_cmp if c["labeler"] not in groups[g]]
        rm = ScalarHeadModel.from_gpt(sft).to(device)
        print(f"held-out-labeler fold {g + 1}/{cfg.heldout_folds}: training on {len(subset)} comparisons")
        fit_reward_model(rm, tok, subset, lr=cfg.lr, epochs=cfg.epochs, batch_prompts=cfg.batch_prompts,
                         seed=cfg.seed, device=device, progress=False)
        held.append(ranking_accuracy(rm, tok, [dict(c, r=c["group_rankings"][g]) for c in val_cmp], device, "r"))
        own.append(sum(ranking_accuracy(rm, tok, [dict(c, r=c["group_rankings"][o]) for c in val_cmp], device, "r")
                       for o in range(5) if o != g) / 4)
        print(f"  accuracy on the held-out group {held[-1]:.3f}, on the training groups {own[-1]:.3f}")
    return {"heldout_group_accuracy": sum(held) / len(held), "own_groups_accuracy": sum(own) / len(own),
            "folds": cfg.heldout_folds}
