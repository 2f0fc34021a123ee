"""Supervised fine-tuning on demonstrations (InstructGPT §3.5, "Supervised fine-tuning").

Pure pieces: batching chat examples with right padding, and the loss on
response tokens only. The loop lives in train_sft.py.

Example:
    x, y, loss_mask, attention_mask = collate([chat_example(tok, p, r)], pad_id=tok.pad_id)
    loss = sft_loss(model(x, attention_mask=attention_mask), y, loss_mask)
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def collate(examples: list[tuple[list[int], list[int]]], pad_id: int):
    """Right-pad (ids, response_mask) pairs into next-token batches.

    Returns x (B, T) inputs, y (B, T) targets (x shifted left by one), loss_mask (B, T)
    and attention_mask (B, T). loss_mask[b, t] = 1 iff y[b, t] is a response token
    (or the end token) of example b: the prompt and the padding are never trained on.
    """
    # BEGIN ASSIGNMENT response_mask
    T = max(len(ids) for ids, _ in examples) - 1
    B = len(examples)
    x = torch.full((B, T), pad_id, dtype=torch.long)
    y = torch.full((B, T), pad_id, dtype=torch.long)
    loss_mask = torch.zeros(B, T)
    attention_mask = torch.zeros(B, T, dtype=torch.long)
    for b, (ids, rmask) in enumerate(examples):
        n = len(ids) - 1
        x[b, :n] = torch.tensor(ids[:-1])
        y[b, :n] = torch.tensor(ids[1:])
        loss_mask[b, :n] = torch.tensor(rmask[1:], dtype=torch.float)  # target t+1 is a response token
        attention_mask[b, :n] = 1
    return x, y, loss_mask, attention_mask
    # END ASSIGNMENT response_mask


def sft_loss(logits: torch.Tensor, y: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over response tokens. logits (B, T, V); y, loss_mask (B, T)."""
    nll = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view_as(loss_mask)
    return (nll * loss_mask).sum() / loss_mask.sum().clamp(min=1)
