"""The critic-free estimators and the loss aggregation on hand-made tensors (nanorlhf/pg.py): the properties a
group baseline and a micro-batched loss must have whatever the policy (the estimator lab, tests/test_estimators.py,
measures what they estimate on an enumerable policy)."""
import pytest
import torch

from nanorlhf.pg import AGGREGATIONS, ESTIMATORS, aggregate, equal_group_share, group_advantages


def close(a, b, tol=1e-10):
    return torch.allclose(a, b, atol=tol, rtol=0)


def ragged(seed=0, B=7, T=5):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([1, 5, 2, 3, 5, 1, 4])                                         # (B,)
    mask = torch.arange(T)[None, :] < lengths[:, None]                                   # (B, T)
    return torch.randn(B, T, generator=g, dtype=torch.float64).requires_grad_(), mask


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_the_loss_is_the_same_however_a_ragged_batch_is_split_into_micro_batches(mode):
    """Micro-batches of ragged responses, each aggregated with the whole batch's totals (n_responses, n_tokens),
    add up to the whole batch's loss and gradient, for every split; left out, the totals are the tensor's own
    (the old behaviour), and the mean of the micro-batches' own losses is not the batch's."""
    x, mask = ragged()
    L, B, n_tok = 5, len(x), int(mask.sum())
    whole = aggregate(x, mask, mode, L)
    g_whole = torch.autograd.grad(whole, x)[0]
    assert close(whole, aggregate(x, mask, mode, L, n_responses=B, n_tokens=n_tok))
    for split in ([7], [3, 4], [1, 1, 5], [2, 2, 2, 1], [6, 1]):
        parts = torch.split(torch.randperm(B, generator=torch.Generator().manual_seed(len(split))), split)
        acc = sum(aggregate(x[i], mask[i], mode, L, n_responses=B, n_tokens=n_tok) for i in parts)
        assert close(acc, whole) and close(torch.autograd.grad(acc, x)[0], g_whole)
    naive = sum(aggregate(x[i], mask[i], mode, L) for i in (torch.arange(6), torch.tensor([6]))) / 2
    assert not close(naive, whole, 1e-6)


def test_a_group_with_equal_rewards_gives_zero_advantage():
    """Every estimator gives each response of an all-equal group advantage 0 (it teaches nothing), whatever the
    other groups hold; a group with unequal rewards gets some advantage, and equal_group_share counts the former."""
    rewards = torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.5], [3.0, 3.0, 3.0, 3.0]])
    for est in ESTIMATORS:
        A = group_advantages(rewards, est)
        assert torch.allclose(A[[0, 1, 3]], torch.zeros(3, 4), atol=1e-6), est
        assert A[2].abs().max() > 0.1, est
    assert equal_group_share(rewards) == 0.75


def test_rloo_with_two_samples_uses_the_other_sample_as_the_baseline():
    """RLOO (Ahmadian et al. 2024): with G = 2, A_1 = r_1 - r_2 and A_2 = r_2 - r_1; with any G, A_i is r_i minus
    the mean of the group's other rewards."""
    r = torch.randn(5, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    A = group_advantages(r, "rloo")
    assert close(A[:, 0], r[:, 0] - r[:, 1]) and close(A[:, 1], r[:, 1] - r[:, 0])
    r = torch.randn(3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    others = torch.stack([torch.cat([r[:, :i], r[:, i + 1:]], 1).mean(1) for i in range(4)], 1)
    assert close(group_advantages(r, "rloo"), r - others)
