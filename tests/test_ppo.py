"""PPO pure functions: masks, alignment, KL-shaped reward, GAE, losses, controllers."""

import math

import pytest
import torch
import torch.nn.functional as F

from nanorlhf import masks, ppo


def make_mask(prompt_lens, resp_lens, T, left_pad_to=None):
    """response_mask (B, T). left_pad_to=P: prompts left-padded so every response starts at column P;
    otherwise each prompt starts at column 0 and the response follows it directly."""
    mask = torch.zeros(len(resp_lens), T, dtype=torch.bool)
    for b, (p, n) in enumerate(zip(prompt_lens, resp_lens)):
        start = left_pad_to if left_pad_to is not None else p
        mask[b, start : start + n] = True
    return mask


# -----------------------------------------------------------------------------
# masked statistics


def test_masked_stats_equal_torch_on_valid_subset():
    """Masked sum/mean/var/whiten equal torch's result on x[mask], random masks."""
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        x = torch.randn(4, 7, generator=g, dtype=torch.float64)
        mask = torch.rand(4, 7, generator=g) < 0.6
        mask[0, 0] = mask[1, 1] = True  # at least 2 valid entries
        v = x[mask]
        assert masks.masked_sum(x, mask).item() == pytest.approx(v.sum().item(), rel=1e-12)
        assert masks.masked_mean(x, mask).item() == pytest.approx(v.mean().item(), rel=1e-12)
        assert masks.masked_var(x, mask).item() == pytest.approx(v.var().item(), rel=1e-12)
        assert masks.masked_var(x, mask, unbiased=False).item() == pytest.approx(v.var(unbiased=False).item(), rel=1e-12)
        w = masks.masked_whiten(x, mask)
        torch.testing.assert_close(w[mask], (v - v.mean()) / torch.sqrt(v.var() + 1e-8))
        assert (w[~mask] == 0).all()
        w_keep = masks.masked_whiten(x, mask, shift_mean=False)
        torch.testing.assert_close(w_keep[mask], (v - v.mean()) / torch.sqrt(v.var() + 1e-8) + v.mean())
        # per-row along dim=1
        rows = mask.any(dim=1)
        per_row = masks.masked_mean(x, mask, dim=1)
        for b in range(4):
            if rows[b]:
                assert per_row[b].item() == pytest.approx(x[b][mask[b]].mean().item(), rel=1e-12)
                assert masks.masked_sum(x, mask, dim=1)[b].item() == pytest.approx(x[b][mask[b]].sum().item(), rel=1e-12)


def test_masked_stats_ignore_nan_off_mask():
    """Garbage (NaN, inf) on masked-out positions never leaks into masked statistics."""
    x = torch.tensor([[1.0, float("nan"), 3.0], [float("inf"), 5.0, 6.0]])
    mask = torch.tensor([[1, 0, 1], [0, 1, 1]])
    assert masks.masked_mean(x, mask).item() == pytest.approx(15 / 4)
    assert torch.isfinite(masks.masked_whiten(x, mask)).all()


# -----------------------------------------------------------------------------
# alignment: position t holds the quantity for the token at position t


def test_token_logprobs_alignment_token_by_token():
    """logprobs[:, t] is log p(tokens[:, t]) read from logits[:, t-1]; column 0 is 0."""
    g = torch.Generator().manual_seed(1)
    B, T, V = 2, 5, 11
    logits = torch.randn(B, T, V, generator=g)
    tokens = torch.randint(V, (B, T), generator=g)
    for temp in (1.0, 0.7):
        lp = masks.token_logprobs(logits, tokens, temperature=temp)
        assert lp.shape == (B, T)
        for b in range(B):
            assert lp[b, 0] == 0
            for t in range(1, T):
                expected = torch.log_softmax(logits[b, t - 1] / temp, dim=-1)[tokens[b, t]]
                assert lp[b, t].item() == pytest.approx(expected.item(), abs=1e-6)


def test_align_values_token_by_token():
    """values[:, t] = V(s_t) is the head output at hidden position t-1 (before token t is emitted)."""
    head = torch.arange(10.0).view(2, 5) + 1
    v = masks.align_values(head)
    assert v[:, 0].tolist() == [0, 0]
    for t in range(1, 5):
        assert torch.equal(v[:, t], head[:, t - 1])


def test_last_token_index_any_padding_side():
    """The last response token is found from the mask, for left-padded prompts and right-padded responses."""
    mask = torch.tensor([
        [0, 0, 1, 1, 1, 0],  # left-padded prompt, response of 3, then right padding
        [0, 0, 1, 1, 1, 1],  # response runs to the end
        [0, 1, 0, 0, 0, 0],  # one-token response
    ])
    assert masks.last_token_index(mask).tolist() == [4, 5, 1]
    with pytest.raises(ValueError):
        masks.last_token_index(torch.zeros(1, 3))


# -----------------------------------------------------------------------------
# KL-shaped reward


def test_kl_penalized_rewards_token_by_token():
    """InstructGPT §3.5: -beta*kl on every response token, RM score added at the LAST response token only."""
    mask = torch.tensor([[0, 0, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0]])
    logprobs = torch.tensor([[9.0, 9, -1.0, -2.0, -0.5, 9], [9, -1.0, -3.0, 9, 9, 9]])
    ref = torch.tensor([[7.0, 7, -1.5, -1.0, -0.5, 7], [7, -2.0, -1.0, 7, 7, 7]])
    score = torch.tensor([3.0, -1.0])
    rewards, kl = ppo.kl_penalized_rewards(score, logprobs, ref, mask, beta=0.1)
    assert kl.tolist() == [[0, 0, 0.5, -1.0, 0, 0], [0, 1.0, -2.0, 0, 0, 0]]
    expected = [[0, 0, -0.05, 0.1, 3.0, 0], [0, -0.1, 0.2 - 1.0, 0, 0, 0]]
    torch.testing.assert_close(rewards, torch.tensor(expected))


def test_kl_penalized_rewards_use_the_chosen_estimator():
    """estimator="k3" puts (q/p - 1) - log(q/p) with q/p = pi_SFT/pi_RL into the reward, token by token."""
    mask = torch.tensor([[0, 1, 1, 0]])
    logprobs, ref = torch.tensor([[5.0, -1.0, -2.0, 5.0]]), torch.tensor([[0.0, -1.5, -1.0, 0.0]])
    rewards, kl = ppo.kl_penalized_rewards(torch.tensor([2.0]), logprobs, ref, mask, beta=0.5, estimator="k3")
    k3 = [math.exp(-0.5) - 1 + 0.5, math.exp(1.0) - 1 - 1.0]                  # log-ratios 0.5 and -1.0
    torch.testing.assert_close(kl, torch.tensor([[0.0, k3[0], k3[1], 0.0]]))
    torch.testing.assert_close(rewards, torch.tensor([[0.0, -0.5 * k3[0], -0.5 * k3[1] + 2.0, 0.0]]))


def test_logged_kl_equals_kl_in_reward():
    """kl_estimate is exactly the KL that went into the reward, and 0 when pi_RL = pi_SFT."""
    g = torch.Generator().manual_seed(2)
    mask = make_mask([3, 2, 4], [4, 1, 3], T=9)
    logprobs, ref = -torch.rand(3, 9, generator=g), -torch.rand(3, 9, generator=g)
    score = torch.randn(3, generator=g)
    beta = 0.02
    rewards, kl = ppo.kl_penalized_rewards(score, logprobs, ref, mask, beta)
    logged = ppo.kl_estimate(logprobs, ref, mask)
    assert torch.equal(logged, kl.sum(dim=-1))
    torch.testing.assert_close(rewards.sum(dim=-1) - score, -beta * logged)
    assert (ppo.kl_estimate(logprobs, logprobs, mask) == 0).all()


# -----------------------------------------------------------------------------
# GAE


def test_gae_hand_computed():
    """With gamma = lam = 1, A_t = (sum of rewards from t on) - V_t and the return is the Monte-Carlo return."""
    mask = torch.tensor([[0, 1, 1, 1, 0]])
    rewards = torch.tensor([[0.0, -0.1, -0.2, 2.0, 0.0]])
    values = torch.tensor([[0.0, 1.0, 1.5, 0.5, 0.0]])
    adv, ret = ppo.gae(rewards, values, mask, gamma=1.0, lam=1.0)
    torch.testing.assert_close(ret, torch.tensor([[0.0, 1.7, 1.8, 2.0, 0.0]]))
    torch.testing.assert_close(adv, torch.tensor([[0.0, 0.7, 0.3, 1.5, 0.0]]))


def test_gae_ignores_values_and_rewards_off_mask():
    """Whatever sits on prompt and padding positions (here 1e6) does not change the advantages."""
    mask = make_mask([2, 3], [3, 2], T=7)
    g = torch.Generator().manual_seed(4)
    rewards, values = torch.randn(2, 7, generator=g), torch.randn(2, 7, generator=g)
    junk_r, junk_v = rewards.masked_fill(~mask, 1e6), values.masked_fill(~mask, 1e6)
    a1, r1 = ppo.gae(rewards, values, mask)
    a2, r2 = ppo.gae(junk_r, junk_v, mask)
    torch.testing.assert_close(a1, a2)
    torch.testing.assert_close(r1, r2)


# -----------------------------------------------------------------------------
# losses


def test_policy_loss_identity_at_start():
    """With unchanged logprobs (lr = 0), ratio = 1, approx_kl = 0, clipfrac = 0."""
    g = torch.Generator().manual_seed(5)
    mask = make_mask([2, 3], [4, 2], T=8)
    logprobs, adv = -torch.rand(2, 8, generator=g), torch.randn(2, 8, generator=g)
    loss, stats = ppo.policy_loss(logprobs, logprobs.clone(), adv, mask)
    assert stats == {"ratio_mean": 1.0, "clipfrac": 0.0, "approx_kl": 0.0}
    assert loss.item() == pytest.approx(-masks.masked_mean(adv, mask).item())


def test_policy_loss_clips():
    """PPO eq. 7: a ratio beyond 1 + clip with positive advantage is clipped (counted, no gradient)."""
    mask = torch.tensor([[0, 1, 1]])
    old = torch.zeros(1, 3)
    new = torch.tensor([[0.0, math.log(1.5), math.log(1.1)]], requires_grad=True)
    adv = torch.tensor([[0.0, 1.0, 1.0]])
    loss, stats = ppo.policy_loss(new, old, adv, mask, clip=0.2)
    assert stats["clipfrac"] == pytest.approx(0.5)
    assert stats["ratio_mean"] == pytest.approx(1.3)
    # k3 estimator: mean of (r - 1) - log r over response tokens
    assert stats["approx_kl"] == pytest.approx(((0.5 - math.log(1.5)) + (0.1 - math.log(1.1))) / 2)
    assert loss.item() == pytest.approx(-(1.2 + 1.1) / 2)
    loss.backward()
    assert new.grad[0, 1] == 0 and new.grad[0, 2] < 0


def test_policy_loss_both_signs_of_advantage():
    """PPO eq. 7 on all four cases, negated: A > 0 is clipped above 1 + clip, A < 0 below 1 - clip, and only those
    two lose their gradient; the padding (huge ratios and advantages there) counts in no mean."""
    mask = torch.tensor([[0, 1, 1, 1, 1, 0]])
    ratios = [math.exp(3.0), 1.5, 0.5, 1.5, 0.5, math.exp(3.0)]
    old = torch.zeros(1, 6)
    new = torch.tensor([[math.log(r) for r in ratios]], requires_grad=True)
    adv = torch.tensor([[100.0, 1.0, 1.0, -1.0, -1.0, -100.0]])
    loss, stats = ppo.policy_loss(new, old, adv, mask, clip=0.2)
    # per token max(-A r, -A clip(r)): -1.2 (clipped), -0.5, +1.5, +0.8 (clipped)
    assert loss.item() == pytest.approx((-1.2 - 0.5 + 1.5 + 0.8) / 4)
    assert stats["clipfrac"] == pytest.approx(0.5)
    assert stats["ratio_mean"] == pytest.approx(1.0)
    assert stats["approx_kl"] == pytest.approx(sum((r - 1) - math.log(r) for r in ratios[1:5]) / 4)
    loss.backward()
    g = new.grad[0]
    assert g[1] == 0 and g[4] == 0 and g[0] == 0 and g[5] == 0
    assert g[2] == pytest.approx(-1.0 * 0.5 / 4) and g[3] == pytest.approx(1.0 * 1.5 / 4)  # d(-A r)/d log r = -A r


def test_value_loss_clipped_and_unclipped():
    """value_loss is 0.5 * max(unclipped, clipped) squared error; equal to 0.5 * MSE when V = V_old."""
    mask = torch.tensor([[0, 1, 1]])
    returns = torch.tensor([[0.0, 1.0, 2.0]])
    v = torch.tensor([[9.0, 0.5, 2.5]])
    loss, stats = ppo.value_loss(v, v.clone(), returns, mask)
    assert loss.item() == pytest.approx(0.5 * 0.25) and stats["value_clipfrac"] == 0.0
    # V moved 1.0 away from V_old toward nothing useful: clipped error is bigger and is taken
    old = torch.tensor([[0.0, 1.0, 2.0]])
    new = torch.tensor([[0.0, 2.0, 2.1]])
    loss, stats = ppo.value_loss(new, old, returns, mask, clip=0.2)
    # token 1: unclipped (2-1)^2 = 1, clipped (1.2-1)^2 = 0.04 -> 1; token 2: both 0.01
    assert loss.item() == pytest.approx(0.5 * (1.0 + 0.01) / 2)
    old2 = torch.tensor([[0.0, 3.0, 2.0]])  # V moved from 3 to 2: clipped V = 2.8, error 1.8^2 > 1
    loss, stats = ppo.value_loss(new, old2, returns, mask, clip=0.2)
    assert stats["value_clipfrac"] == pytest.approx(0.5)
    assert loss.item() == pytest.approx(0.5 * (1.8**2 + 0.01) / 2)


def test_explained_variance():
    """Explained variance is 1 for a perfect value function and 0 for the constant mean."""
    mask = torch.tensor([[0, 1, 1, 1]])
    returns = torch.tensor([[5.0, 1.0, 2.0, 3.0]])
    assert ppo.explained_variance(returns.clone(), returns, mask) == pytest.approx(1.0)
    assert ppo.explained_variance(torch.full_like(returns, 2.0), returns, mask) == pytest.approx(0.0)


def test_entropy_from_logits():
    """Uniform logits give entropy log V; masked positions (here peaked) do not count."""
    logits = torch.zeros(1, 3, 8)
    logits[0, 0, 0] = 100.0  # near-zero entropy, masked out
    assert ppo.entropy_from_logits(logits, torch.tensor([[0, 1, 1]])).item() == pytest.approx(math.log(8))


def test_ptx_loss_is_masked_cross_entropy():
    """PPO-ptx term: mean next-token cross-entropy over the masked targets only."""
    g = torch.Generator().manual_seed(6)
    logits, targets = torch.randn(2, 4, 5, generator=g), torch.randint(5, (2, 4), generator=g)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    expected = F.cross_entropy(logits[mask], targets[mask])
    assert ppo.ptx_loss(logits, targets, mask).item() == pytest.approx(expected.item(), rel=1e-6)


# -----------------------------------------------------------------------------
# KL controllers


def test_kl_controllers():
    """Adaptive beta rises when KL > target and falls when below (error clipped to 0.2); fixed beta stays."""
    fixed = ppo.FixedKLController(0.02)
    fixed.update(100.0, 64)
    assert fixed.value == 0.02
    up = ppo.AdaptiveKLController(0.1, target=6.0, horizon=10000)
    up.update(current_kl=12.0, n_steps=100)  # error clipped from 1.0 to 0.2
    assert up.value == pytest.approx(0.1 * (1 + 0.2 * 100 / 10000))
    down = ppo.AdaptiveKLController(0.1, target=6.0, horizon=10000)
    down.update(current_kl=5.4, n_steps=100)  # error -0.1
    assert down.value == pytest.approx(0.1 * (1 - 0.1 * 100 / 10000))
    assert down.value < 0.1 < up.value


def test_tiny_policy_identities():
    """At the start, with a reference copy of the policy: KL(policy || ref) = 0 and PPO stats are identities."""
    torch.manual_seed(7)
    V, B, T = 13, 3, 8
    policy = torch.nn.Sequential(torch.nn.Embedding(V, 16), torch.nn.Linear(16, V))
    ref = torch.nn.Sequential(torch.nn.Embedding(V, 16), torch.nn.Linear(16, V))
    ref.load_state_dict(policy.state_dict())
    tokens = torch.randint(V, (B, T))
    mask = make_mask([3, 3, 3], [5, 2, 4], T)
    with torch.no_grad():
        old_lp = masks.token_logprobs(policy(tokens), tokens)
        ref_lp = masks.token_logprobs(ref(tokens), tokens)
    assert (ppo.kl_estimate(old_lp, ref_lp, mask) == 0).all()
    new_lp = masks.token_logprobs(policy(tokens), tokens)
    _, stats = ppo.policy_loss(new_lp, old_lp, torch.randn(B, T), mask)
    assert stats == {"ratio_mean": 1.0, "clipfrac": 0.0, "approx_kl": 0.0}


# -----------------------------------------------------------------------------
# the ablation switches (docs/details.md)


def test_k1_and_k3_estimate_the_same_kl():
    """Both per-token estimators average to KL(p || q) on samples from p; k3 is never negative, 0 where p = q;
    k2 is k1^2 / 2, biased; an unknown estimator is refused."""
    g = torch.Generator().manual_seed(0)
    p, q = torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.2, 0.3, 0.5])
    true_kl = (p * (p / q).log()).sum()
    y = torch.multinomial(p, 200_000, replacement=True, generator=g)[None]       # (1, N)
    lp, lq, mask = p.log()[y], q.log()[y], torch.ones_like(y, dtype=torch.bool)
    k1 = ppo.per_token_kl(lp, lq, mask, "k1")
    k3 = ppo.per_token_kl(lp, lq, mask, "k3")
    assert abs(k1.mean() - true_kl) < 0.01 and abs(k3.mean() - true_kl) < 0.01
    assert (k3 >= 0).all() and (k1 < 0).any()
    assert (ppo.per_token_kl(lp, lp, mask, "k3") == 0).all()
    k2 = ppo.per_token_kl(lp, lq, mask, "k2")
    assert torch.allclose(k2, 0.5 * (lp - lq) ** 2) and k2.mean() > true_kl      # k2 is biased (upward here)
    with pytest.raises(ValueError, match="k1.*k2.*k3"):
        ppo.per_token_kl(lp, lq, mask, "k4")


def test_kl_loss_zero_at_reference_and_pulls_back():
    """The KL-as-loss term (k3) is 0 when pi = pi_ref; a step against its gradient moves log-probs towards the
    reference from above and from below (k1's gradient would be +1/n on both sides)."""
    mask = make_mask([1, 1], [3, 2], 5)
    ref = torch.log_softmax(torch.randn(2, 5), -1)
    assert ppo.kl_loss(ref.clone(), ref, mask) == 0
    for shift, sign in ((0.5, 1), (-0.5, -1)):
        lp = (ref + shift).requires_grad_(True)
        ppo.kl_loss(lp, ref, mask).backward()
        assert (sign * lp.grad[mask] > 0).all() and (lp.grad[~mask] == 0).all()


def test_value_loss_without_clip_is_plain_mse():
    """clip=None gives 0.5 * mean((V - R)^2) over the mask, whatever the old values."""
    mask = make_mask([1, 2], [3, 2], 6)
    v, old, ret = torch.randn(2, 6), torch.randn(2, 6), torch.randn(2, 6)
    loss, stats = ppo.value_loss(v, old, ret, mask, clip=None)
    assert torch.allclose(loss, 0.5 * ((v - ret) ** 2)[mask].mean()) and stats["value_clipfrac"] == 0.0


def _experience(**switches):
    """make_experience on a hand-made rollout (row 0 ends with the stop token, row 1 was cut off), and the RM's
    outputs on it with the stop token appended to row 1."""
    from nanorlhf.experience import make_experience
    from nanorlhf.generate import Rollout
    from nanorlhf.model import GPT, GPTConfig, ScalarHeadModel
    torch.manual_seed(0)
    mc = GPTConfig(vocab_size=11, block_size=16, n_layer=1, n_head=1, n_embd=8)
    policy, rm = GPT(mc), ScalarHeadModel(mc)
    stop, pad = 10, 0
    tokens = torch.tensor([[3, 4, 5, stop, pad, pad], [3, 4, 5, 6, 7, 8]])
    am = (torch.arange(6) < torch.tensor([[4], [6]])).long()
    resp = am.clone()
    resp[:, :2] = 0                                                         # prompts are 2 tokens
    ro = Rollout(tokens, am, resp, torch.zeros(2, 6), 2, stop)
    hp = ppo.PPOConfig(**switches)
    with torch.no_grad():  # the RM reads the cut-off row with the stop token appended (its trained format)
        grown = torch.cat([tokens, torch.tensor([[pad], [stop]])], 1), torch.cat([am, torch.tensor([[0], [1]])], 1)
        rm_out = rm(grown[0], attention_mask=grown[1])                         # (B, T+1)
    return make_experience(policy, policy, rm, rm, ro, rm_bias=0.0, beta=0.1, hp=hp), rm_out


def test_eos_penalty_and_reward_column_switches():
    """eos_penalty lowers only the cut-off row's score; reward_at_last_token=False reads the final column;
    whiten_advantages=False leaves the advantages unnormalised."""
    base, rm_out = _experience()
    assert torch.allclose(base["score"], torch.stack([rm_out[0, 3], rm_out[1, 6]]))
    pen, _ = _experience(eos_penalty=1.0)
    assert torch.allclose(pen["score"], base["score"] - torch.tensor([0.0, 1.0]))
    col, _ = _experience(reward_at_last_token=False)
    assert torch.allclose(col["score"], rm_out[:, -1]) and not torch.allclose(col["score"], base["score"])
    raw, _ = _experience(whiten_advantages=False)
    assert not torch.allclose(raw["advantages"], base["advantages"])
