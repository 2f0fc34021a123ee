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
    text, _ = answer(model, tok, row["prompt"], base=is_base(ck), hp=SamplingConfig())
"""
from __future__ import annotations

import os
import random

import torch

from nanorlhf.generate import SamplingConfig, generate, response_texts
from nanorlhf.infra.jsonl import PROMPT, read_jsonl

PROMPT_FILES = ("test_prompts.jsonl", "val_prompts.jsonl", "ppo_prompts.jsonl", "rm_prompts.jsonl")


def fit_prompt(tok, prompt: str, *, base: bool, room: int) -> tuple[list[int], int]:
    """A prompt's ids in the format the model knows, left-truncated to `room` tokens (its end, where the question
    and <|assistant|> are, survives): (ids, how many of the prompt's tokens were dropped). room >= 3."""
    if base:
        ids = tok.encode(prompt + "\n")
        return ids[-room:], max(0, len(ids) - room)
    body = tok.encode(prompt)
    keep = room - 2  # <|user|> and <|assistant|>
    return [tok.user_id] + body[max(0, len(body) - keep):] + [tok.assistant_id], max(0, len(body) - keep)


class TextStream:
    """on_token for generate(): decodes a one-row answer as it grows and hands each new piece of text to `emit`
    (a piece that ends inside a multi-byte character waits for the rest of it)."""

    def __init__(self, tok, emit):
        self.tok, self.emit, self.ids, self.shown = tok, emit, [], ""

    def __call__(self, step_tokens) -> None:
        t = int(step_tokens[0])
        if t in (self.tok.eot_id, self.tok.pad_id):
            return
        self.ids.append(t)
        text = self.tok.decode(self.ids).lstrip()
        if not text.endswith("\ufffd") and len(text) > len(self.shown):
            self.emit(text[len(self.shown):])
            self.shown = text


@torch.no_grad()
def answer(model, tok, prompt: str, *, base: bool, hp: SamplingConfig, seed: int = 0, on_text=None) -> tuple[str, int]:
    """One answer to a prompt, in the chat format or, for a base model, after the raw text and a newline: (the
    answer, how many prompt tokens were dropped to fit the context). on_text(piece) streams it as it is sampled."""
    ids, dropped = fit_prompt(tok, prompt, base=base, room=model.cfg.block_size - hp.max_new_tokens)
    ro = generate(model, [ids], hp, stop_token=tok.eot_id, pad_id=tok.pad_id,
                  generator=torch.Generator().manual_seed(seed), on_token=TextStream(tok, on_text) if on_text else None)
    return response_texts(ro, tok)[0].strip(), dropped


def world_prompt(data_dir: str, prompt: str) -> dict | None:
    """The prompt row the world generated: `test:N` is the N-th test prompt, any other text is looked up in the
    data folder's prompt files. None for a prompt the world did not generate; a `test:N` that names no test prompt
    is a UsageError saying why."""
    from nanorlhf.infra.cli import UsageError
    if prompt.startswith("test:"):
        path = os.path.join(data_dir, "test_prompts.jsonl")
        if not data_dir or not os.path.exists(path):
            raise UsageError(f"{prompt} is a test prompt of the world's data folder, and there is none at "
                             f"{data_dir or '(no folder given)'}: give --data_dir=FOLDER (data/<scale>)")
        rows = read_jsonl(path, PROMPT)
        n = prompt[5:].strip()
        if not n.isdigit() or int(n) >= len(rows):
            raise UsageError(f"{prompt}: {data_dir} has {len(rows)} test prompts, test:0 to test:{len(rows) - 1}")
        return rows[int(n)]
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
