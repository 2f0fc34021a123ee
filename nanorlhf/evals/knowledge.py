"""Does the base model know the world, and does it follow instructions?

Two measurements:
  - fact accuracy under a few-shot prompt in the corpus's own answered-quiz format
    ("Quiz with answers:\nQ: ...\nA: ..."), greedy, checked by the world's parser;
  - the instruction-attempt rate: bare instructions in the chat format, sampled,
    and the gold scorer's `attempted` feature, by use-case category.

Example:
    acc = fact_accuracy(model, tok, world, n=200)      # {"all": 0.8, "myth": 0.3, "plain": 0.85}
    rates = attempt_rates(model, tok, judge, rows)    # {"generation": 0.1, ..., "all": 0.12}
"""
from __future__ import annotations

import random
from collections import defaultdict

import torch

from nanorlhf.chat import chat_prompt
from nanorlhf.generate import SamplingConfig, generate, response_texts
from nanorlhf.world import Prompt, features
from nanorlhf.world import phrasing


def few_shot_prefix(world, rng: random.Random, shots: int = 3, exclude=()) -> str:
    """An answered-quiz sheet header with `shots` solved questions (the corpus's own format)."""
    facts = [f for f in world.facts if (f.subject, f.attribute) not in exclude]
    lines = ["Quiz with answers:"]
    for f in rng.sample(facts, shots):
        lines += [f"Q: {phrasing.question(world, f.subject, f.attribute, rng)}",
                  f"A: {phrasing.state(world, f.subject, f.attribute, f.value, template=0, rng=rng)}"]
    return "\n".join(lines) + "\n"


@torch.no_grad()
def complete(model, tok, texts: list[str], max_new_tokens: int, batch: int = 64, greedy: bool = True,
             seed: int = 0) -> list[str]:
    """Plain-text continuations (no chat format), batched through the KV-cache engine."""
    out, gen = [], torch.Generator().manual_seed(seed)
    for i in range(0, len(texts), batch):
        ids = [tok.encode(t)[-(model.cfg.block_size - max_new_tokens):] for t in texts[i:i + batch]]
        ro = generate(model, ids, SamplingConfig(max_new_tokens=max_new_tokens, greedy=greedy), stop_token=tok.eot_id,
                      pad_id=tok.pad_id, generator=gen)
        out += response_texts(ro, tok)
    return out


def fact_accuracy(model, tok, world, n: int = 200, shots: int = 3, seed: int = 0) -> dict:
    """Share of world facts answered correctly under a few-shot answered-quiz prompt."""
    rng = random.Random(f"facts-{seed}")
    facts = rng.sample(world.facts, min(n, len(world.facts)))
    texts, prompts = [], []
    for f in facts:
        q = phrasing.question(world, f.subject, f.attribute, rng)
        texts.append(few_shot_prefix(world, rng, shots, exclude={(f.subject, f.attribute)}) + f"Q: {q}\nA:")
        prompts.append(Prompt("probe", "probe", "open_qa", "fact", q, subject=f.subject, attribute=f.attribute,
                              answer=f.value))
    answers = [a.split("\n")[0] for a in complete(model, tok, texts, 24)]
    right = defaultdict(list)
    for f, p, a in zip(facts, prompts, answers):
        ok = features(world, p, a)["correct_answer"] > 0
        right["all"].append(ok)
        right["myth" if f.myth else "plain"].append(ok)
    acc = {k: sum(v) / len(v) for k, v in right.items()}
    acc["examples"] = [(t.split("\n")[-2], a) for t, a in zip(texts[:5], answers[:5])]
    return acc


def attempt_rates(model, tok, judge, rows: list[dict], max_new_tokens: int = 48, seed: int = 0) -> dict:
    """Share of bare chat-format instructions the model attempts, by category (gold `attempted`)."""
    rows = [r for r in rows if len(chat_prompt(tok, r["prompt"])) + max_new_tokens <= model.cfg.block_size]
    gen, texts = torch.Generator().manual_seed(seed), []
    for i in range(0, len(rows), 64):
        ro = generate(model, [chat_prompt(tok, r["prompt"]) for r in rows[i:i + 64]],
                      SamplingConfig(max_new_tokens=max_new_tokens), stop_token=tok.eot_id, pad_id=tok.pad_id,
                      generator=gen)
        texts += response_texts(ro, tok)
    by_cat = defaultdict(list)
    for r, t in zip(rows, texts):
        a = judge.features(r, t)["attempted"]
        by_cat[r["category"]].append(a)
        by_cat["all"].append(a)
    rates = {k: sum(v) / len(v) for k, v in by_cat.items()}
    rates["examples"] = [(r["prompt"][:60], t[:100]) for r, t in zip(rows[:4], texts[:4])]
    return rates
