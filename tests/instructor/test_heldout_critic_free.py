"""Held-out grading tests of the critic-free assignments (group_advantages, aggregate): not in the handout. Cases
drawn from the grading seed (drawn.py), each compared with a reference written here sample by sample or token by
token: groups of 2 to 8 with ties and all-equal groups, every estimator; ragged batches of both padding sides with
junk (NaN included) off the mask, every aggregation, with and without the whole batch's totals, and gradients.
"""
import pytest
import torch

from drawn import close, generator, rng
from nanorlhf.pg import AGGREGATIONS, ESTIMATORS, aggregate, group_advantages


def reference_advantages(rewards: torch.Tensor, estimator: str, eps: float = 1e-6) -> torch.Tensor:
    """One response at a time, from its group's other members."""
    P, G = rewards.shape
    out = torch.zeros_like(rewards)
    for p in range(P):
        r = [rewards[p, i].item() for i in range(G)]
        mean = sum(r) / G
        std = (sum((x - mean) ** 2 for x in r) / (G - 1)) ** 0.5
        for i in range(G):
            if estimator == "grpo":
                out[p, i] = (r[i] - mean) / (std + eps)
            elif estimator == "rloo":
                out[p, i] = r[i] - (sum(r) - r[i]) / (G - 1)
            else:
                out[p, i] = r[i] - mean
    if estimator == "reinforce_baseline":
        flat = out.flatten()
        n = len(flat)
        m = sum(flat.tolist()) / n
        s = (sum((x - m) ** 2 for x in flat.tolist()) / (n - 1)) ** 0.5
        out = (out - m) / (s + eps)
    return out


def test_group_advantages_on_drawn_rewards_equals_the_reference():
    """Drawn groups (G 2..8, rewards with ties, one group all equal) under each estimator equal the reference, and
    an unknown estimator raises ValueError."""
    r, g = rng(11), generator(11)
    for case in range(6):
        P, G = r.randint(2, 6), r.randint(2, 8)
        rewards = torch.randint(0, 3, (P, G), generator=g).double() + torch.rand(P, G, generator=g).double() * (
            case % 2)
        rewards[r.randrange(P)] = float(r.randint(-2, 2))                 # an all-equal group
        for est in ESTIMATORS:
            close(group_advantages(rewards, est), reference_advantages(rewards, est),
                  f"the advantages ({est}, {P} groups of {G})", atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError):
        group_advantages(torch.ones(2, 3), "ppo")


def reference_aggregate(x, mask, mode, L, n_responses=None, n_tokens=None):
    """Token by token, under the documented rule."""
    B = x.size(0)
    total = torch.zeros((), dtype=x.dtype)
    n_tok = sum(int(mask[b].sum()) for b in range(B)) if n_tokens is None else n_tokens
    for b in range(B):
        n_b = int(mask[b].sum())
        for t in range(x.size(1)):
            if mask[b, t]:
                weight = {"seq_mean": 1 / (max(n_b, 1) * (n_responses or B)), "token_mean": 1 / n_tok,
                          "constant": 1 / ((n_responses or B) * L)}[mode]
                total = total + weight * x[b, t]
    return total


def test_aggregate_on_drawn_batches_equals_the_reference():
    """Drawn ragged batches (both padding sides, one row full, junk and NaN off the mask) under each aggregation,
    alone and as micro-batches with the whole batch's totals: the loss and its gradient equal the reference's."""
    r, g = rng(12), generator(12)
    for case in range(4):
        B, T = r.randint(3, 6), r.randint(4, 8)
        mask = torch.zeros(B, T, dtype=torch.bool)
        for b in range(B):
            n = T if b == 0 else r.randint(1, T)
            start = T - n if case % 2 else 0
            mask[b, start:start + n] = True
        x = torch.randn(B, T, generator=g, dtype=torch.float64)
        x = torch.where(mask, x, torch.full_like(x, float("nan"))).requires_grad_()
        for mode in AGGREGATIONS:
            got = aggregate(x, mask, mode, T)
            want = reference_aggregate(x, mask, mode, T)
            close(got, want, f"the loss ({mode})")
            close(torch.autograd.grad(got, x)[0], torch.nan_to_num(torch.autograd.grad(want, x)[0]),
                  f"the gradient ({mode})")
            idx = torch.arange(B)[: r.randint(1, B)]
            part = aggregate(x[idx], mask[idx], mode, T, n_responses=B, n_tokens=int(mask.sum()))
            close(part, reference_aggregate(x[idx], mask[idx], mode, T, B, int(mask.sum())),
                  f"a micro-batch's share ({mode})")
