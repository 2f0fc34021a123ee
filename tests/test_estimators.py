"""The KL estimators and the critic-free loss, checked exactly on experiments/estimator_lab.py's enumerable policy:
every expectation below is a sum over all responses weighted by their probabilities, so no test has a Monte Carlo
threshold. Also pg.aggregate across micro-batches, the group advantages and pg.surrogate's clip fractions by hand."""
import math

import pytest
import torch

from experiments.estimator_lab import Config, Spec, enumerate_responses, expectation, main, make_lab, token_logprobs
from nanorlhf.pg import AGGREGATIONS, aggregate, surrogate
from nanorlhf.ppo import per_token_kl

LABS = [dict(seed=0), dict(seed=1, spread=2.0, distance=1.0), dict(seed=2, words=3, max_len=3), dict(max_len=1)]


@pytest.fixture(params=range(len(LABS)), ids=["base", "far", "3 words", "one token"])
def lab(request):
    return make_lab(**LABS[request.param])


def close(a, b, tol=1e-10):
    return torch.allclose(a, b, atol=tol, rtol=0)


def exact_value(lab, k: str):
    """E_pi[sum_t k_t], summed over every response."""
    lp = token_logprobs(lab.theta.detach(), lab.space)                                   # (N, L)
    return (lab.probs() * per_token_kl(lp, lab.ref, lab.space.mask, k).sum(1)).sum()


def test_the_enumeration_lists_every_response_once_with_lengths_1_to_L(lab):
    """The responses are distinct, of every length 1..L, and their probabilities under pi and pi_old sum to 1:
    a missing or doubled response would make every exact expectation below wrong."""
    tokens, mask = lab.space.tokens, lab.space.mask
    assert len({tuple(t[m].tolist()) for t, m in zip(tokens, mask)}) == len(tokens)
    assert set(mask.sum(1).tolist()) == set(range(1, mask.size(1) + 1))
    assert close(lab.probs().sum(), torch.tensor(1.0, dtype=torch.float64))
    assert close(lab.probs("pi_old").sum(), torch.tensor(1.0, dtype=torch.float64))
    assert len(enumerate_responses(2, 4).tokens) == 31


def test_k1_and_k3_estimate_the_kl_without_bias_and_k2_does_not(lab):
    """E_pi[sum_t k1_t] = E_pi[sum_t k3_t] = KL(pi || pi_ref) exactly (Schulman 2020), while k2 = (log r)^2 / 2 is
    biased; k3 is never negative. A k3 with its ratio inverted (pi / pi_ref) estimates another divergence."""
    kl = lab.kl().detach()
    assert kl > 1e-3
    assert close(exact_value(lab, "k1"), kl) and close(exact_value(lab, "k3"), kl)
    assert abs(exact_value(lab, "k2") - kl) > 1e-5
    lp = token_logprobs(lab.theta.detach(), lab.space)
    assert (per_token_kl(lp, lab.ref, lab.space.mask, "k3") >= 0).all()


def test_k2_in_the_loss_has_the_gradient_of_k1_in_the_reward_on_policy(lab):
    """On-policy, the expected gradient of k2 of the whole response in the loss, (sum_t log r_t)^2 / 2, is that of
    k1 in the reward (REINFORCE) and both are grad KL exactly ("Rethinking KL regularization in RLHF", 2025).
    With one-token responses the per-token k2 loss (pg.pg_loss's) is the same estimator."""
    grad = lab.kl_gradient()
    assert grad.norm() > 1e-3
    assert close(expectation(lab, Spec("reward", "k1")), grad)
    assert close(expectation(lab, Spec("loss_seq", "k2")), grad)
    if lab.space.mask.size(1) == 1:
        assert close(expectation(lab, Spec("loss", "k2")), grad)


def test_per_token_k2_in_the_loss_misses_the_kl_that_later_tokens_add(lab):
    """k2 per token in the loss gives E[sum_t k1_t grad log pi(y_t)]: each token answers for its own KL, not for
    the KL of the tokens it leads to (a partial gradient, Tang & Munos 2025). Adding that credit,
    E[sum_s grad log pi(y_s) sum_{t > s} k1_t], gives grad KL exactly; for L > 1 the credit is not zero."""
    lp = token_logprobs(lab.theta, lab.space)                                            # (N, L)
    k1 = per_token_kl(lp, lab.ref, lab.space.mask, "k1").detach()
    later = k1.flip(1).cumsum(1).flip(1) - k1                                            # sum_{t > s} k1_t
    credit = torch.autograd.grad((lab.probs()[:, None] * lp * later).sum(), lab.theta)[0].flatten()
    assert close(expectation(lab, Spec("loss", "k2")) + credit, lab.kl_gradient())
    assert (credit.norm() > 1e-3) == (lab.space.mask.size(1) > 1)


def test_k1_in_the_loss_has_zero_expected_gradient(lab):
    """The gradient of k1 = log pi - log pi_ref is the score, whose expectation is 0: k1 in the loss does not
    regularise, though each sample's gradient is not 0 ("Rethinking KL regularization in RLHF", 2025)."""
    assert close(expectation(lab, Spec("loss", "k1")), torch.zeros_like(lab.kl_gradient()))
    one = torch.autograd.grad(per_token_kl(token_logprobs(lab.theta, lab.space), lab.ref, lab.space.mask)[0].sum(),
                              lab.theta)[0]
    assert one.norm() > 1e-3


def test_off_policy_the_exact_ratio_recovers_the_on_policy_gradient(lab):
    """Sampled from pi_old, weighting by pi / pi_old of what a term reads (the whole response for k1 in the
    reward and k2 of the response; the tokens through t for a token's k2) gives the on-policy expectation
    exactly; no ratio does not. The token's ratio alone (pg.pg_loss's) is exact for one-token responses only."""
    grad = lab.kl_gradient()
    assert close(expectation(lab, Spec("reward", "k1", "pi_old", "exact")), grad)
    assert close(expectation(lab, Spec("loss_seq", "k2", "pi_old", "exact")), grad)
    on = expectation(lab, Spec("loss", "k2"))
    assert close(expectation(lab, Spec("loss", "k2", "pi_old", "exact")), on)
    assert (expectation(lab, Spec("reward", "k1", "pi_old", "none")) - grad).norm() > 1e-3 * grad.norm()
    token = expectation(lab, Spec("loss", "k2", "pi_old", "token"))
    assert close(token, on) == (lab.space.mask.size(1) == 1)


def ragged(seed=0, B=7, T=5):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([1, 5, 2, 3, 5, 1, 4])                                         # (B,)
    mask = torch.arange(T)[None, :] < lengths[:, None]                                   # (B, T)
    return torch.randn(B, T, generator=g, dtype=torch.float64).requires_grad_(), mask


def test_each_aggregation_weighs_a_token_by_its_response_length_as_documented():
    """d loss / d per-token loss: 1 / (B |o_i|) under seq_mean (GRPO: a short response's tokens weigh more),
    1 / sum_i |o_i| under token_mean (DAPO), 1 / (B L) under constant (Dr. GRPO). On the enumerable policy the
    constant rule times L gives grad KL from k1 in the reward exactly; seq_mean turns its direction."""
    x, mask = ragged()
    lengths, (B, L) = mask.sum(1, keepdim=True).double(), mask.shape
    want = {"seq_mean": 1 / (B * lengths), "token_mean": 1 / lengths.sum(),
            "constant": torch.tensor(1 / (B * L), dtype=torch.float64)}
    for mode in AGGREGATIONS:
        w = torch.autograd.grad(aggregate(x, mask, mode, L), x)[0]
        assert close(w, torch.where(mask, want[mode].expand(B, L), 0.0))
    lab = make_lab()
    grad = lab.kl_gradient()
    assert close(expectation(lab, Spec("reward", "k1", agg="constant")), grad)
    assert torch.cosine_similarity(expectation(lab, Spec("reward", "k1", agg="seq_mean")), grad, dim=0) < 0.99


def test_surrogate_clips_each_side_at_its_own_bound_and_counts_where_the_clip_set_the_loss():
    """PPO's pessimistic clip with DAPO's clip-higher (clip_low 0.2, clip_high 0.28), on hand-made ratios: a rising
    good token past 1.28 is clipped high, two falling bad tokens below 0.8 are clipped low; 1.25 is inside the upper
    clip; a falling good token and a rising bad one are not clipped (the min keeps the worse); the masked token is
    not counted. Where clipped the gradient is 0."""
    ratio = torch.tensor([[1.5, 1.25, 0.75, 0.6, 0.5, 1.5, 1.1, 3.0]], dtype=torch.float64)
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, 1.0, -1.0, 1.0, 1.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 0]], dtype=torch.bool)
    logprobs = ratio.log().requires_grad_()
    loss, stats = surrogate(logprobs, torch.zeros_like(ratio), adv, mask, clip_low=0.2, clip_high=0.28)
    assert close(loss, torch.tensor([[-1.28, -1.25, 0.8, 0.8, -0.5, 1.5, -1.1, 0.0]], dtype=torch.float64))
    assert math.isclose(stats["clipfrac_high"], 1 / 7, abs_tol=1e-6)
    assert math.isclose(stats["clipfrac_low"], 2 / 7, abs_tol=1e-6)
    grad = torch.autograd.grad(loss.sum(), logprobs)[0]
    assert (grad[0, [0, 2, 3, 7]] == 0).all() and (grad[0, [1, 4, 5, 6]] != 0).all()


def test_the_lab_writes_its_table_and_figure_and_its_exact_column_matches_the_theory(tmp_path):
    """The lab end to end (few batches): estimator_lab.md and .png are written, and the exact bias is 0 for the
    estimators the papers call unbiased (k1 and k3 as values; k1 in the reward and k2 of the whole response, on
    policy or with the exact ratio) and at least 1% for every other row but token_mean (not enumerable)."""
    res = main(Config(batches=20, out_dir=str(tmp_path)))
    assert (tmp_path / "estimator_lab.md").exists() and (tmp_path / "estimator_lab.png").exists()
    for r in res["rows"]:
        s = r["spec"]
        unbiased = (s.place == "value" and s.k != "k2") or (
            (s.place, s.k) in {("reward", "k1"), ("loss_seq", "k2")} and s.agg == "constant"
            and (s.sampler == "pi" or s.ratio == "exact"))
        if r["exact"] is not None:
            assert (abs(r["exact"]) < 1e-9) == unbiased, s
            assert unbiased or abs(r["exact"]) > (1e-3 if s.place == "value" else 1e-2), s
