"""One policy's answer to one prompt, and what the world thinks of it: the pieces of sample.py.

A language model checkpoint is either a base model (pretraining only: it has never seen
the chat tokens, so it gets the raw prompt text, the "GPT" baseline of InstructGPT
Figure 1) or a chat policy (SFT, FLAN, PPO, PPO-ptx, DPO: `<|user|> prompt <|assistant|>`).
The world generated every prompt in a data folder and can score any answer to them: gold
is the held-out labelers' mean utility, Likert one held-out labeler's 1-7 rating. A prompt
the world did not generate has no gold; the reward model still scores it.

Example:
    model, tok, ck = load_model("out/small/ppo_1m/ckpt.pt")
    row = world_prompt("data/small", "test:0")        # the first test prompt, or None for free text
    text = answer(model, tok, row["prompt"], base=is_base(ck), hp=SamplingConfig())
"""
from __future__ import annotations

import os
import random

import torch

from nanorlhf.chat import chat_prompt
from nanorlhf.generate import SamplingConfig, generate, response_texts
from nanorlhf.infra.jsonl import PROMPT, read_jsonl

PROMPT_FILES = ("test_prompts.jsonl", "val_prompts.jsonl", "ppo_prompts.jsonl", "rm_prompts.jsonl")


@torch.no_grad()
def answer(model, tok, prompt: str, *, base: bool, hp: SamplingConfig, seed: int = 0) -> str:
    """One answer to a prompt: in the chat format, or for a base model after the raw text and a newline."""
    room = model.cfg.block_size - hp.max_new_tokens
    ids = tok.encode(prompt + "\n")[-room:] if base else chat_prompt(tok, prompt)
    if len(ids) > room:
        raise ValueError(f"the prompt takes {len(ids)} tokens; with --max_new_tokens={hp.max_new_tokens} "
                         f"at most {room} fit the model's context of {model.cfg.block_size}")
    ro = generate(model, [ids], hp, stop_token=tok.eot_id, pad_id=tok.pad_id,
                  generator=torch.Generator().manual_seed(seed))
    return response_texts(ro, tok)[0].strip()


def world_prompt(data_dir: str, prompt: str) -> dict | None:
    """The prompt row the world generated: `test:N` is the N-th test prompt, any other text is looked up in the
    data folder's prompt files. None for a prompt the world did not generate."""
    if prompt.startswith("test:"):
        rows = read_jsonl(os.path.join(data_dir, "test_prompts.jsonl"), PROMPT)
        try:
            return rows[int(prompt[5:])]
        except (ValueError, IndexError):
            raise ValueError(f"--prompt={prompt}: test:N needs 0 <= N < {len(rows)}") from None
    for name in PROMPT_FILES:
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            row = next((r for r in read_jsonl(path, PROMPT) if r["prompt"] == prompt.strip()), None)
            if row is not None:
                return row
    return None


def world_scores(judge, row: dict, text: str, labeler_seed: int = 0) -> dict:
    """Gold (held-out labelers' mean utility) and one held-out labeler's 1-7 Likert rating of an answer."""
    rng = random.Random(f"{labeler_seed}-{row['id']}")
    feats = judge.features(row, text)
    return {"gold": judge.gold(row, text), "likert": rng.choice(judge.pool.heldout).likert(feats, rng)}
