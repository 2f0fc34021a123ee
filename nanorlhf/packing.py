"""Packing: a batch's real tokens only, left-aligned, through the models (PPO's scoring and update passes).

A rollout row is [left pad | prompt | response | right pad] (generate.py). At these sizes most of a
batch's columns are padding; `packing` gathers each row's real tokens into a narrower (b, L) batch,
`unpack` puts per-token outputs back in their columns, and `response_logprobs` runs the unembedding
only where a response token is predicted. The plain full-width passes are the reference
(tests/test_trim.py: the same log-probs, values and scores to float rounding). `length_groups`
puts rows of similar length in one minibatch, so a packed group carries little padding.

Example:
    cols, valid = packing(attention_mask, rows, block_size)   # (b, L) each
    x = tokens[rows].gather(1, cols)                           # the packed rows
    out = unpack(per_token(x), cols, valid, T)                 # (b, T) again
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from nanorlhf.infra.precision import round_up


def packing(attention_mask, rows, block_size: int):
    """Where each of `rows`' real tokens lands when packed left-aligned: cols (b, L), valid (b, L) bool.

    A rollout row is [left pad | prompt | response | right pad]: its real tokens are contiguous, so
    packed position j of row i is column cols[i, j] = start_i + j. L is the longest row's real length
    (rounded up, below), so a group of rows of similar length carries little padding. Positions come from the attention
    mask (model.py), so a packed row's outputs equal its unpacked ones (to float rounding). L is rounded up
    to precision.SHAPE_MULTIPLE (at most block_size), the extra columns invalid: fewer shapes for bfloat16.
    """
    am = attention_mask[rows].bool()                                        # (b, T)
    start = am.long().argmax(1)                                             # (b,) first real column
    n = am.sum(1)                                                           # (b,) real tokens
    j = torch.arange(round_up(int(n.max()), cap=block_size), device=am.device)  # (L,)
    valid = j[None] < n[:, None]                                            # (b, L)
    cols = torch.where(valid, start[:, None] + j[None], 0)                  # (b, L)
    return cols, valid


def unpack(x, cols, valid, T: int):
    """Packed per-token values (b, L) back to their columns (b, T); 0 off the real tokens."""
    out = torch.zeros(x.size(0), T + 1, dtype=x.dtype, device=x.device)    # column T takes the padding
    return out.scatter(1, torch.where(valid, cols, T), x)[:, :T]


def response_logprobs(model, tokens, attention_mask, response_mask, temperature):
    """masks.token_logprobs(model(tokens), tokens) on the response positions only, 0 elsewhere.  # (B, T)

    The unembedding (the costliest matmul at a 2k vocabulary) runs on the hidden states that predict a
    response token and on nothing else. Also returns those positions' logits (n, V) for the entropy.
    """
    h = model.hidden(tokens, attention_mask)[:, :-1]                       # (B, T-1, C): h[:, t-1] predicts t
    pick = response_mask[:, 1:].bool()                                      # (B, T-1)
    n = int(pick.sum())  # the rows padded to a multiple of 64 (fewer shapes for bfloat16), dropped after
    logits = model.lm_head(F.pad(h[pick], (0, 0, 0, round_up(n, multiple=64) - n)))[:n]  # (n, V)
    logp = F.log_softmax(logits.float() / temperature, dim=-1)
    lp = logp.gather(-1, tokens[:, 1:][pick][:, None]).squeeze(-1)          # (n,)
    out = torch.zeros(tokens.shape, dtype=lp.dtype, device=tokens.device)
    out[:, 1:][pick] = lp
    return out, logits


def length_groups(attention_mask, size: int, generator=None) -> list[torch.Tensor]:
    """Row indices in groups of `size`, sorted by real length (random tie-break), the groups in random order."""
    n = attention_mask.sum(1).float()
    noise = torch.rand(n.shape, generator=generator).to(n.device)           # a CPU generator; n may be on a GPU
    order = torch.argsort(n + 0.5 * noise)                                  # ties broken at random
    groups = list(order.split(size))
    perm = torch.randperm(len(groups), generator=generator).tolist()
    return [groups[i] for i in perm]
