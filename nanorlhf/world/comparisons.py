"""Comparison data: sample K completions per prompt, have a labeler rank them, save as JSONL.

A comparison row (schema COMPARISON in jsonl.py) is what a stage consumes,
whether a simulated labeler or a person (label.py) produced it; only `source`
tells them apart:

    {"id", "prompt_id", "prompt", "completions": [K strings], "ranking": [[2], [0, 3], [1]],
     "labeler": "L07", "source": "sim", "likert": [K ints 1..7]}

`ranking` lists groups of completion indices, best first; a group of two or more is a tie.

How many prompts, how many completions each and how they are sampled is CollectConfig;
train_rm.py's Config contains it, so each of its fields is a flag of that script.

Example:
    judge = Judge("data/small", labeler_seed=0)
    train_cmp, val_cmp = collect_comparisons(sft, tok, judge, "data/small", "out/small/rm", CollectConfig(), seed=0)
"""
from __future__ import annotations

import os
import random
from functools import partial
from typing import ClassVar
from dataclasses import dataclass

import torch

from nanorlhf.chat import chat_prompt
from nanorlhf.generate import SamplingConfig, generate, response_texts
from nanorlhf.infra.config import check_values
from nanorlhf.infra.jsonl import COMPARISON, PROMPT, DataError, read_jsonl, write_jsonl
from nanorlhf.infra.lanes import side_by_side, usable_cpus
from nanorlhf.infra.metrics import Progress
from nanorlhf.rankings import pair_counts
from nanorlhf.world import qa_pairs
from nanorlhf.world.judge import Judge


@dataclass(frozen=True)
class CollectConfig:
    """What the labelers are shown: K = k_min..k_max samples of the SFT model for each RM prompt (paper §3.4)."""
    max_prompts: int = 0
    """use at most this many RM prompts (0 = all): the label budget"""
    val_prompts: int = 200
    """validation prompts for held-out comparisons"""
    k_min: int = 4
    """fewest completions ranked per prompt (paper: 4)"""
    k_max: int = 9
    """most completions ranked per prompt (paper: 9)"""
    max_new_tokens: int = 48
    """longest sampled completion"""
    temperature: float = 1.0
    """sampling temperature for the completions"""
    gen_batch: int = 64
    """sequences generated at once"""
    # DEVIATION: the paper's labelers rank model samples only. Ours also rank, for open questions, two replies that
    # differ in one claim a labeler can check (world/qa_pairs.py): samples of a 1M-parameter SFT model rarely
    # answer the asked attribute, so the rankings alone carry neither truth nor relevance unconfounded
    claim_checks: bool = True
    """for each open question among the RM prompts, a truth pair and a relevance pair ranked by a labeler; and
    for each ranked set with a sample stating a checkable claim, that sample set true against set false"""
    fact_checks: int = 0
    """more such pairs, on questions the labelers write about random characters' colour, home, food and job"""

    # values checked before any work starts (nanorlhf/infra/config.py check_values)
    POSITIVE: ClassVar[tuple] = ("val_prompts", "max_new_tokens", "temperature", "gen_batch")
    NONNEGATIVE: ClassVar[tuple] = ("max_prompts", "fact_checks")
    RANGES: ClassVar[dict] = {"k_min": "[2, 9]", "k_max": "[2, 9]"}  # a comparison ranks 2..9 (schemas.COMPARISON)
    RULES: ClassVar[tuple] = ((lambda c: c.k_min <= c.k_max, "--k_min={k_min} is above --k_max={k_max}"),)

    def __post_init__(self):
        check_values(self)

    @property
    def sampling(self) -> SamplingConfig:
        """The completions' sampling distribution and length."""
        return SamplingConfig(max_new_tokens=self.max_new_tokens, temperature=self.temperature)


def sample_completions(policy, tok, prompts: list[str], ks: list[int], sampling: SamplingConfig, *, batch: int,
                       seed: int, procs: int = 1) -> list[list[str]]:
    """K_i completions for prompt i from the policy, `batch` sequences at a time through the KV-cache engine.

    The sequences go shortest prompt first (stable: prompt i's K_i in order), so a batch's left padding
    stays short; which batch a row lands in changes its noise, not its distribution (generate.py). Each
    batch draws from its own generator, seeded by (seed, batch index), so procs > 1 (CPU: that many
    processes, one core each, taking every procs-th batch; nanorlhf/infra/lanes.py) samples the same texts.
    """
    ids = [chat_prompt(tok, p) for p in prompts]
    flat = sorted(((i, ids[i]) for i, k in enumerate(ks) for _ in range(k)), key=lambda x: len(x[1]))
    chunks = [flat[s:s + batch] for s in range(0, len(flat), batch)]
    run = partial(sample_chunks, policy, tok, chunks, sampling=sampling, seed=seed, total=len(flat))
    on_cpu = next(policy.parameters()).device.type == "cpu"
    procs = min(procs, len(chunks), len(usable_cpus())) if on_cpu else 1
    parts = side_by_side([(f"sample {r}", partial(run, r, procs)) for r in range(procs)], procs)
    out: list[list[str]] = [[] for _ in prompts]
    for b, chunk in enumerate(chunks):
        for (i, _), text in zip(chunk, parts[b % procs][b // procs]):
            out[i].append(text)
    return out


def batch_generator(seed: int, b: int) -> torch.Generator:
    """The sampling noise of batch b: a generator of its own, so any split of the batches draws the same."""
    return torch.Generator().manual_seed(seed * 1_000_003 + b)


@torch.no_grad()
def sample_chunks(policy, tok, chunks: list[list[tuple[int, list[int]]]], rank: int, procs: int, *,
                  sampling: SamplingConfig, seed: int, total: int) -> list[list[str]]:
    """The completions of chunks rank, rank + procs, ... (each a list of (prompt index, prompt ids))."""
    bar, out = Progress(total, "sample"), []
    for b in range(rank, len(chunks), procs):
        if rank == 0 and b and bar.due(b * len(chunks[0])):
            print(bar.line(b * len(chunks[0])))
        ro = generate(policy, [p for _, p in chunks[b]], sampling, stop_token=tok.eot_id, pad_id=tok.pad_id,
                      generator=batch_generator(seed, b))
        out.append(response_texts(ro, tok))
    return out


def fitting_prompts(path, tok, block_size: int, max_new_tokens: int, limit: int = 0) -> list[dict]:
    """The prompts of a file that leave room for max_new_tokens in the context (the first `limit`); at least one."""
    rows = [r for r in read_jsonl(path, PROMPT) if len(chat_prompt(tok, r["prompt"])) + max_new_tokens <= block_size]
    if not rows:
        raise DataError(f"{path}: no prompt fits in the model's context of {block_size} tokens with "
                        f"--max_new_tokens={max_new_tokens}")
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


def collect_comparisons(sft, tok, judge: Judge, data_dir: str, out_dir: str, hp: CollectConfig, seed: int,
                        only_val: bool = False, procs: int = 1):
    """Sample and rank the RM training prompts (unless only_val) and the validation prompts; write both to out_dir.
    procs: processes the sampling runs in (sample_completions: the same texts for any number).

    Validation comparisons also carry `second_ranking` by a different labeler, for the
    agreement ceiling, and `group_rankings` (one per labeler group) for the held-out-labeler test.
    """
    rng = random.Random(f"rm-{seed}")
    block = sft.cfg.block_size

    def sample(rows, seed_, what):
        ks = [rng.randint(hp.k_min, hp.k_max) for _ in rows]
        print(f"sampling {sum(ks)} completions for {len(rows)} {what} (K = {hp.k_min}..{hp.k_max})")
        return sample_completions(sft, tok, [r["prompt"] for r in rows], ks, hp.sampling, batch=hp.gen_batch,
                                  seed=seed_, procs=procs)

    train_cmp = None
    if not only_val:
        rows = fitting_prompts(os.path.join(data_dir, "rm_prompts.jsonl"), tok, block, hp.max_new_tokens,
                               hp.max_prompts)
        comps = sample(rows, seed, "RM prompts")
        train_cmp = label(judge, rows, comps, judge.pool.train, rng, "rm")
        train_cmp += checks(judge, rows, hp, seed, comps)
        write_jsonl(os.path.join(out_dir, "comparisons.jsonl"), train_cmp, COMPARISON)
    rows = fitting_prompts(os.path.join(data_dir, "val_prompts.jsonl"), tok, block, hp.max_new_tokens,
                           hp.val_prompts)
    comps = sample(rows, seed + 1, "validation prompts")
    val_cmp = label(judge, rows, comps, judge.pool.train, rng, "val")
    groups = judge.pool.groups(5)
    for c, row in zip(val_cmp, rows):
        feats = [judge.features(row, x) for x in c["completions"]]
        others = [l for l in judge.pool.train if l.id != c["labeler"]]
        c["second_ranking"] = rng.choice(others).rank(feats, rng, c["completions"])
        c["group_rankings"] = [rng.choice(g).rank(feats, rng, c["completions"]) for g in groups]
    write_jsonl(os.path.join(out_dir, "val_comparisons.jsonl"), val_cmp, COMPARISON)
    return train_cmp, val_cmp


def checks(judge: Judge, rows: list[dict], hp: CollectConfig, seed: int, completions=None) -> list[dict]:
    """The labelers' claim checks (hp.claim_checks: on the RM prompts' open questions, and on the samples of each
    ranked set, given its completions; hp.fact_checks more on questions of their own), from random streams of
    their own: every other comparison is as without them."""
    rng, out = random.Random(f"claim-checks-{seed}"), []
    if hp.claim_checks:
        out += qa_pairs.claim_checks(judge, rows, judge.pool.train, rng)
        if completions is not None:
            out += qa_pairs.sample_checks(judge, rows, completions, judge.pool.train, random.Random(f"samples-{seed}"))
    if hp.fact_checks:
        out += qa_pairs.claim_checks(judge, qa_pairs.fact_questions(judge.world, hp.fact_checks, seed),
                                     judge.pool.train, rng)
    if out:
        print(f"{len(out)} claim checks: pairs of replies that differ in one claim, ranked by training labelers")
    return out


def load_comparisons(path) -> list[dict]:
    return read_jsonl(path, COMPARISON, nonempty="comparisons")


def agreement_counts(val_cmp: list[dict]) -> list[tuple[int, int]]:
    """Per validation row, (pairs two different training labelers order alike, pairs compared): the counts
    behind labeler_agreement.

    Pooled over every pair of rankings that are sure to come from two different labelers: the row's labeler and
    the second one, and each two of the group rankings (the groups share no labeler). 200 validation prompts
    then give about 11 times the pairs of one second ranking each, and the figure moves less between draws.
    """
    out = []
    for c in val_cmp:
        g = c.get("group_rankings", [])
        two = ([(c["ranking"], c["second_ranking"])] if "second_ranking" in c else []) + \
            [(g[i], g[j]) for i in range(len(g)) for j in range(i + 1, len(g))]
        counts = [pair_counts(a, b) for a, b in two]
        out.append((sum(s for s, _ in counts), sum(n for _, n in counts)))
    return out


def labeler_agreement(val_cmp: list[dict]) -> float:
    """Share of pairs two different training labelers order alike on the same completions (the ceiling). Pairs
    are pooled as in reward.ranking_accuracy, so the RM's accuracy over this ceiling compares like with like."""
    counts = agreement_counts(val_cmp)
    return sum(s for s, _ in counts) / max(sum(n for _, n in counts), 1)
