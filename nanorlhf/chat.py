"""The chat format every post-pretraining stage uses, and its response mask.

    <|user|> {prompt} <|assistant|> {response} <|endoftext|>

The special tokens never occur in the pretraining corpus (the world checks
this), so the base model has never seen the format: a bare instruction in it is
exactly the "GPT" baseline of InstructGPT Figure 1.

Example:
    ids, mask = chat_example(tok, "Name a fox.", "Pip.")
    # ids  = [user, ..prompt.., assistant, ..response.., eot]
    # mask = [0,    0 .. 0,     0,         1 .. 1,       1]   loss on response + eot only
"""
from __future__ import annotations


def chat_prompt(tok, prompt: str) -> list[int]:
    """Token ids of a prompt in the chat format, ending with the assistant token."""
    return [tok.user_id] + tok.encode(prompt) + [tok.assistant_id]


def chat_example(tok, prompt: str, response: str) -> tuple[list[int], list[int]]:
    """(ids, response_mask) for a demonstration: the mask is 1 on response tokens and the end token."""
    p = chat_prompt(tok, prompt)
    r = tok.encode(response) + [tok.eot_id]
    return p + r, [0] * len(p) + [1] * len(r)


def fits(ids: list[int], block_size: int) -> bool:
    """Whether a training example fits the model's context (inputs are ids[:-1])."""
    return len(ids) - 1 <= block_size


def is_base(ck: dict) -> bool:
    """Whether a checkpoint is a pretrained base model, which never saw the chat format (its config names a corpus,
    not a base to fine-tune): it gets a prompt as raw text, the "GPT" baseline of InstructGPT Figure 1."""
    return "corpus" in ck["config"] and "base" not in ck["config"]
