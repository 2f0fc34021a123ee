"""PPO's step 1 and the data it draws from: prompts in a resumable order, responses sampled, pretraining batches.

`rollout` samples a batch of responses with the KV cache (generate.py), prompts of similar length
together; `PromptSampler` hands out the PPO prompts in a seeded order per epoch, resumable by
(epoch, index); `ptx_batches` are PPO-ptx's pretraining batches from the base model's corpus.

Example:
    prompts = PromptSampler("data/tiny/ppo_prompts.jsonl", tok, max_prompt_tokens=96)
    ro = rollout(policy, tok, prompts.next(hp.batch_size), hp, generator)
    ro.tokens, ro.response_mask       # (B, P+N) each (layout: generate.py)
"""
from __future__ import annotations

import os
import random

import torch

from nanorlhf.chat import chat_prompt
from nanorlhf.generate import Rollout, SamplingConfig, generate_in_length_groups, response_texts
from nanorlhf.infra.jsonl import PROMPT, DataError, read_jsonl
from nanorlhf.lmdata import LMBatches, encode_docs, read_corpus
from nanorlhf.ppo import PPOConfig


class PromptSampler:
    """Prompts from a JSONL file, in a seeded order per epoch; resumable by (epoch, index). keep(row), when given,
    keeps only the rows it accepts (RLVR: the tasks a rule can check)."""

    def __init__(self, path, tok, max_prompt_tokens: int, seed: int = 0, keep=None):
        rows = [r for r in read_jsonl(path, PROMPT) if keep is None or keep(r)]
        if not rows:
            raise DataError(f"{path}: no prompt is of the kind this run trains on")
        self.rows = [r for r in rows if len(chat_prompt(tok, r["prompt"])) <= max_prompt_tokens]
        if not self.rows:
            raise DataError(f"{path}: no prompt fits in {max_prompt_tokens} tokens (the context less --max_new_tokens)")
        self.tok, self.seed, self.epoch, self.index = tok, seed, 0, 0
        self._order = self._make_order()

    def _make_order(self):
        order = list(range(len(self.rows)))
        random.Random(self.seed * 1_000_003 + self.epoch).shuffle(order)
        return order

    def next(self, n: int) -> list[dict]:
        out = []
        while len(out) < n:
            if self.index >= len(self._order):
                self.epoch, self.index = self.epoch + 1, 0
                self._order = self._make_order()
            out.append(self.rows[self._order[self.index]])
            self.index += 1
        return out

    def state_dict(self):
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, s):
        self.epoch, self.index = s["epoch"], s["index"]
        self._order = self._make_order()


@torch.no_grad()
def rollout(policy, tok, batch: list[dict], hp: PPOConfig, generator, cache_dtype: str = "float32") -> Rollout:
    """Step 1: responses to a batch of prompts, sampled with the KV cache, ending at <|endoftext|>.

    A bfloat16 cache (precision.cache_dtype) changes the samples' distribution only slightly; the old
    log-probs PPO's ratio needs are recomputed by make_experience either way, so the first ratio is 1.
    """
    ids = [chat_prompt(tok, r["prompt"]) for r in batch]
    return sample_episodes(policy, ids, hp, generator, stop_token=tok.eot_id, pad_id=tok.pad_id,
                           cache_dtype=cache_dtype)


def sample_episodes(policy, ids: list[list[int]], hp: PPOConfig, generator, *, stop_token=None, pad_id=0,
                    cache_dtype: str = "float32") -> Rollout:
    """Step 1 on token ids, at hp's temperature and length; with hp.group_by_length, prompts of similar length
    sampled minibatch_size at a time (generate_in_length_groups: one batch's samples up to float rounding, less
    decoding over left padding)."""
    group = hp.minibatch_size if hp.group_by_length else len(ids)
    sampling = SamplingConfig(max_new_tokens=hp.max_new_tokens, temperature=hp.temperature, cache_dtype=cache_dtype)
    return generate_in_length_groups(policy, ids, sampling, group_size=group, stop_token=stop_token, pad_id=pad_id,
                                     generator=generator)


def ptx_batches(data_dir: str, tok, block_size: int, batch_size: int, seed: int):
    """Pretraining batches for PPO-ptx, from the same corpus the base model learned on."""
    stream = encode_docs(tok, read_corpus(os.path.join(data_dir, "corpus.jsonl")))
    return LMBatches(stream, block_size, batch_size, seed=seed + 1)


def show_samples(tok, batch, ro: Rollout, exp: dict, n: int) -> None:
    """Print n decoded responses of a batch with their RM score and KL (the log's samples)."""
    texts = response_texts(ro, tok)
    kl = exp["kl"].sum(1)
    for i in range(min(n, len(batch))):
        print(f"  [{exp['score'][i].item():+.2f} kl {kl[i].item():.2f}] {batch[i]['prompt'][:70]!r}")
        print(f"      -> {texts[i][:120]!r}")
