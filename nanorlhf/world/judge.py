"""The judge: the world a data folder was built from, its gold scorers, and the screened labeler pool.

Stages and evaluations ask the judge for what a labeler would see (features of a
response to a prompt row) and what only evaluation may see (the gold score).

Example:
    judge = Judge("data/small")
    f = judge.features(row, "Pip is a red fox.")      # dict over world FEATURES
    judge.gold(row, "Pip is a red fox.")              # held-out pool, eval-time instructions, no noise
"""
from __future__ import annotations

import json
import os
import random
from dataclasses import replace
from functools import lru_cache

from nanorlhf.world import build_world, features, get_scale, gold_metadata, prompt_from_dict, sample_completions
from nanorlhf.world.labelers import LabelerPool, PoolConfig


@lru_cache(maxsize=4)
def _world_data(scale: str, seed: int, rm_extra: int = 0):
    return build_world(replace(get_scale(scale), rm_extra=rm_extra), seed)


def meta_of(data_dir: str) -> dict:
    """A data folder's meta.json: scale, seed, rm_extra and, where a study set it, the labelers' agree_share."""
    path = os.path.join(data_dir, "meta.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing: write the data with `python -m nanorlhf.world --out={data_dir}`")
    with open(path) as f:
        return json.load(f)


def world_of(data_dir: str):
    """The WorldData a data folder was written from (rebuilt from its meta.json in about a second)."""
    meta = meta_of(data_dir)
    return _world_data(meta["scale"], meta["seed"], meta.get("rm_extra", 0))


def screening_items(data, n: int = 60, k: int = 4, seed: int = 0) -> list[list[dict]]:
    """Feature lists of K stand-in SFT samples for n RM prompts: the screening test set."""
    rng = random.Random(f"screening-{seed}")
    prompts = data.prompts["rm"][:n]
    return [[features(data.world, p, c) for c in sample_completions(data.world, p, k, rng)] for p in prompts]


AGREE_SHARE = 0.25  # share of agreement-rewarding candidates where the data folder's meta.json sets none


@lru_cache(maxsize=8)
def screened_pool(data_dir: str, labeler_seed: int, hedge_share: float = 0.25,
                  agree_share: float | None = None) -> LabelerPool:
    """The screened labelers of a data folder; agree_share None: the folder's meta.json, else AGREE_SHARE."""
    data = world_of(data_dir)
    if agree_share is None:
        agree_share = meta_of(data_dir).get("agree_share", AGREE_SHARE)
    pool = LabelerPool.build(labeler_seed, PoolConfig(hedge_share=hedge_share, agree_share=agree_share))
    pool.screen(screening_items(data, seed=labeler_seed), cutoff=0.75, seed=labeler_seed)
    return pool


class Judge:
    def __init__(self, data_dir: str, labeler_seed: int = 0, hedge_share: float = 0.25,
                 agree_share: float | None = None):
        self.data = world_of(data_dir)
        self.world = self.data.world
        self.pool = screened_pool(data_dir, labeler_seed, hedge_share, agree_share)

    def features(self, row: dict, response: str) -> dict:
        return features(self.world, prompt_from_dict(row), response)

    def gold(self, row: dict, response: str) -> float:
        return self.pool.gold(self.features(row, response))

    def metadata(self, row: dict, response: str) -> dict:
        return gold_metadata(self.world, prompt_from_dict(row), response)


def realistic_items(data, n: int = 300, seed: int = 1):
    """K = 4..9 stand-in SFT samples (world/completions.py) of n validation prompts: (features, texts)."""
    rng = random.Random(f"realistic-{seed}")
    items, texts = [], []
    for p in data.prompts["val"][:n]:
        cs = sample_completions(data.world, p, rng.randint(4, 9), rng)
        items.append([features(data.world, p, c) for c in cs])
        texts.append(cs)
    return items, texts


def labeler_report(data, pool: LabelerPool, seed: int = 0) -> str:
    """Agreement among training and among held-out labelers, and who passed screening."""
    from nanorlhf.world.labelers import mean_pairwise_agreement
    items, texts = realistic_items(data, seed=seed + 1)
    a = mean_pairwise_agreement(pool.train, items, seed=seed, texts=texts)
    h = mean_pairwise_agreement(pool.heldout, items, seed=seed, texts=texts)
    passed = ", ".join(f"{l.id} ({pool.screening[l.id]:.2f})" for l in pool.train)
    failed = ", ".join(f"{l.id} ({pool.screening[l.id]:.2f})" for l in pool.candidates if l not in pool.train)
    lovers = sum(l.hedge_lover for l in pool.train)
    return (f"pairs of training labelers agree on {a:.1%} of pairs, held-out labelers on {h:.1%}\n"
            f"  (on {len(items)} prompts x K = 4..9 stand-in SFT samples from world/completions.py, which are\n"
            f"  easier to tell apart than real SFT samples; tau is tuned on real samples of the small SFT model,\n"
            f"  where train_rm.py reports the agreement: paper 72.6 +- 1.5% and 77.3 +- 1.3%)\n"
            f"screening (agreement with researcher rankings, soft cutoff 75%): "
            f"{len(pool.train)}/{len(pool.candidates)} passed; {lovers} of them reward hedging\n"
            f"  passed: {passed}\n  screened out: {failed}")
