"""Steering at inference: contrastive activation addition (Rimsky et al. 2023, "Steering Llama 2 via CAA").

A behaviour (sycophancy, closed-domain hallucination) has a direction in the residual
stream: the mean difference of the activations, after one block, between answers that
show it and answers that do not, read at the answer's last token. Adding a multiple of
that vector to the residual stream at inference, at every position after the prompt,
dials the behaviour up (multiplier > 0) or down (< 0) with no training. The persona-vectors
work (2025) builds such directions for traits; here the world's gold flags say exactly
which answers show the trait.

    acts = record(model, layer, tokens, attention_mask, positions)     # (B, C): after block `layer`
    v = contrastive_vector(acts_with, acts_without)                   # (C,): mean difference
    with steer(model, layer, v, multiplier=-4.0):                     # generated positions get -4 v
        answers = chat_answers(model, tok, prompts, 32)

Forward hooks on the plain model (nanorlhf/model.py) and nothing else: the model is unchanged
outside the `with`, and multiplier 0 gives identical logits (tested).
"""
from __future__ import annotations

from contextlib import contextmanager

import torch


def blocks(model):
    """The residual blocks of a GPT or ScalarHeadModel, in order."""
    return model.transformer.h


@torch.no_grad()
def record(model, layer: int, tokens, attention_mask, positions) -> torch.Tensor:
    """The residual stream after block `layer` at one column per row: positions (B,) long.  # (B, C)"""
    seen = {}
    handle = blocks(model)[layer].register_forward_hook(lambda mod, args, out: seen.__setitem__("h", out))
    try:
        model(tokens, attention_mask=attention_mask)
    finally:
        handle.remove()
    h = seen["h"]                                                           # (B, T, C)
    return h[torch.arange(h.size(0), device=h.device), positions].float()   # (B, C)


def contrastive_vector(with_trait: torch.Tensor, without_trait: torch.Tensor) -> torch.Tensor:
    """CAA's steering vector: mean activation of the answers with the trait minus those without.  # (C,)

    with_trait (N, C) and without_trait (M, C), recorded at the same layer; the pairs need not be aligned.
    """
    if with_trait.ndim != 2 or without_trait.ndim != 2 or with_trait.size(1) != without_trait.size(1):
        raise ValueError(f"need (N, C) and (M, C) activations, got {tuple(with_trait.shape)} and "
                         f"{tuple(without_trait.shape)}")
    return with_trait.mean(dim=0) - without_trait.mean(dim=0)


@contextmanager
def steer(model, layer: int, vector: torch.Tensor, multiplier: float, start=None):
    """Within the block: block `layer`'s output gets multiplier * vector at the steered positions.

    start: a column, or one per row (B,): columns >= start are steered, in any forward pass. None: the positions
    a KV-cache generation produces from the prompt on: in the prefill, its last column (whose output picks the
    first new token), then every decode step; a forward pass without a cache is left alone. A per-row start is
    for whole forward passes: generate() drops finished rows from its batch, so steer its decoding with None.
    """
    # BEGIN ASSIGNMENT steering
    def add(mod, args, out):                                               # out (B, T, C)
        kv_cache = args[3] if len(args) > 3 else None                      # Block.forward(x, mask, causal, cache)
        past, T = (kv_cache.pos if kv_cache is not None else 0), out.size(1)
        if start is None and kv_cache is None:
            return out
        first = (past + T - 1 if past == 0 else past) if start is None else start
        columns = torch.arange(past, past + T, device=out.device)                   # (T,) absolute positions
        first = torch.as_tensor(first, device=out.device).reshape(-1, 1)            # (B or 1, 1)
        on = (columns[None, :] >= first).float()[..., None]                         # (B or 1, T, 1)
        return out + (multiplier * on * vector.to(out.device)).to(out.dtype)  # a hook's return replaces the output

    handle = blocks(model)[layer].register_forward_hook(add)
    # END ASSIGNMENT steering
    try:
        yield model
    finally:
        handle.remove()
