"""Held-out grading tests of the loss assignments (rm_loss, kl_reward, gae, policy_loss, dpo_loss): not in the
handout. Each draws its cases from the grading seed (drawn.py) and compares the student's function with a
reference written here, term by term or sequence by sequence, so a body fitted to the visible tests' inputs fails.

Each case covers what the visible tests leave open: several pairs with margins of both signs, several rankings
with ties, both padding sides with responses of mixed lengths, NaN off the mask, ratios on both sides of the clip
with advantages of both signs.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from drawn import SEED, close, generator, rng
from nanorlhf import dpo, ppo
from nanorlhf.reward import rm_ranking_loss


def drawn_mask(r, B, T, left: bool):
    """response_mask (B, T) bool of a drawn batch: left-padded prompts (every response starts at one column, then
    right padding) or prompts from column 0 (each response right after its prompt); lengths mixed, one row full."""
    mask = torch.zeros(B, T, dtype=torch.bool)
    start = r.randint(1, T // 2)
    for b in range(B):
        if left:
            n = T - start if b == 0 else r.randint(1, T - start)
            mask[b, start:start + n] = True
        else:
            p = r.randint(1, T - 2)
            n = T - p if b == 0 else r.randint(1, T - p)
            mask[b, p:p + n] = True
    return mask


# -----------------------------------------------------------------------------
# rm_loss


def test_rm_loss_on_drawn_rankings_equals_the_reference():
    """Drawn K-way rankings (K = 2..7, ties likely): the loss and its gradient equal the mean over untied pairs of
    -log sigmoid(r_w - r_l); a ranking with every pair tied raises ValueError."""
    r, g = rng(1), generator(1)
    for _ in range(30):
        K = r.randint(2, 7)
        ranks = [r.randint(0, K - 1) for _ in range(K)]
        if len(set(ranks)) == 1:
            ranks[0] += 1
        rewards = (3 * torch.randn(K, generator=g, dtype=torch.float64)).requires_grad_()
        pairs = [(i, j) for i in range(K) for j in range(K) if ranks[i] < ranks[j]]
        want = sum(-F.logsigmoid(rewards[i] - rewards[j]) for i, j in pairs) / len(pairs)
        got = rm_ranking_loss(rewards, torch.tensor(ranks))
        close(got, want, f"rm_loss on ranks {ranks}")
        close(torch.autograd.grad(got, rewards)[0], torch.autograd.grad(want, rewards)[0],
              f"the gradient of rm_loss on ranks {ranks}")
    with pytest.raises(ValueError):
        rm_ranking_loss(torch.randn(4, generator=g), torch.tensor([2, 2, 2, 2]))


# -----------------------------------------------------------------------------
# kl_reward


def reference_kl_reward(score, lp, ref, mask, beta, estimator):
    rewards, kl = torch.zeros_like(lp), torch.zeros_like(lp)
    for b in range(lp.size(0)):
        cols = [t for t in range(lp.size(1)) if mask[b, t]]
        for t in cols:
            d = lp[b, t] - ref[b, t]
            kl[b, t] = d if estimator == "k1" else torch.exp(-d) - 1 + d  # k3: (q/p - 1) - log(q/p)
            rewards[b, t] = -beta * kl[b, t]
        rewards[b, cols[-1]] += score[b]
    return rewards, kl


def test_kl_reward_on_drawn_batches_equals_the_reference():
    """Drawn batches of both padding sides and both estimators, junk log-probs off the response: rewards and kl
    equal a token-by-token reference (-beta kl_t on the response, the score once at each row's last response
    token, 0 elsewhere); an unknown estimator raises ValueError."""
    r, g = rng(2), generator(2)
    for case in range(6):
        B, T = r.randint(3, 5), r.randint(6, 10)
        mask = drawn_mask(r, B, T, left=case % 2 == 0)
        lp = -4 * torch.rand(B, T, generator=g, dtype=torch.float64) - 0.1
        ref = -4 * torch.rand(B, T, generator=g, dtype=torch.float64) - 0.1
        lp = torch.where(mask, lp, 8 * torch.randn(B, T, generator=g, dtype=torch.float64))
        score, beta = torch.randn(B, generator=g, dtype=torch.float64), r.uniform(0.01, 0.5)
        for estimator in ("k1", "k3"):
            got = ppo.kl_penalized_rewards(score, lp, ref, mask, beta, estimator)
            want = reference_kl_reward(score, lp, ref, mask, beta, estimator)
            close(got[0], want[0], f"the rewards ({estimator}, beta {beta:.3f})")
            close(got[1], want[1], f"the kl ({estimator})")
    with pytest.raises(ValueError):
        ppo.kl_penalized_rewards(score, lp, ref, mask, 0.1, "k4")


# -----------------------------------------------------------------------------
# gae


def brute_force_gae(rewards, values, mask, gamma, lam):
    """One sequence at a time, over its response columns only, straight from the GAE definition."""
    adv, ret = torch.zeros_like(values), torch.zeros_like(values)
    for b in range(rewards.shape[0]):
        cols = [t for t in range(rewards.shape[1]) if mask[b, t]]
        for i, t in enumerate(cols):
            total = 0.0
            for k, s in enumerate(cols[i:]):  # A_t = sum_k (gamma*lam)^k delta_{t+k}
                v_next = values[b, cols[i + k + 1]] if i + k + 1 < len(cols) else 0.0
                total += (gamma * lam) ** k * (rewards[b, s] + gamma * v_next - values[b, s])
            adv[b, t] = total
            ret[b, t] = total + values[b, t]
    return adv, ret


@pytest.mark.parametrize("left_pad", [True, False])
def test_gae_equals_brute_force_mixed_lengths(left_pad):
    """GAE equals a per-sequence loop on drawn batches (responses of mixed lengths, the drawn padding side, drawn
    gamma and lambda), with NaN in the rewards and values off the mask: none leaks in, both outputs 0 there."""
    r, g = rng(3 + left_pad), generator(3 + left_pad)
    for gamma, lam in ((1.0, 0.95), (r.uniform(0.5, 1.0), r.uniform(0.5, 1.0)), (1.0, 1.0)):
        B, T = r.randint(3, 5), r.randint(6, 11)
        mask = drawn_mask(r, B, T, left_pad)
        rewards = torch.randn(B, T, generator=g, dtype=torch.float64).masked_fill(~mask, math.nan)
        values = torch.randn(B, T, generator=g, dtype=torch.float64).masked_fill(~mask, math.nan)
        adv, ret = ppo.gae(rewards, values, mask, gamma, lam)
        adv_bf, ret_bf = brute_force_gae(rewards, values, mask, gamma, lam)
        what = f"gae (gamma {gamma:.3f}, lam {lam:.3f}, NaN off the mask)"
        close(adv, adv_bf, "the advantages of " + what)
        close(ret, ret_bf, "the returns of " + what)


# -----------------------------------------------------------------------------
# policy_loss


def drawn_ratios(r, n, clip):
    """(log-ratios, advantages) of n >= 6 response tokens: ratio above 1+clip with A > 0 (clipped) once and with
    A < 0 (not clipped) twice, below 1-clip with A < 0 (clipped) once and with A > 0 once, the rest inside."""
    kinds = [(1, 1), (1, -1), (1, -1), (-1, -1), (-1, 1)] + [(0, r.choice((1, -1))) for _ in range(n - 5)]
    r.shuffle(kinds)
    lr, adv = [], []
    for side, sign in kinds:
        ratio = {1: 1 + clip * r.uniform(1.2, 3), -1: 1 - clip * r.uniform(1.2, 3), 0: 1 + clip * r.uniform(-.8, .8)}
        lr.append(math.log(ratio[side]))
        adv.append(sign * r.uniform(0.1, 2.0))
    return lr, adv


def test_policy_loss_on_drawn_batches_equals_the_reference():
    """Drawn batches with ratios on both sides of the clip and advantages of both signs, a drawn clip, huge values
    on padding: the loss, its gradient and the stats (ratio_mean, clipfrac: the share of tokens where the clipped
    term is the larger loss, approx_kl) equal a reference over the response tokens."""
    r, g = rng(5), generator(5)
    for case in range(4):
        B, T, clip = r.randint(2, 4), r.randint(6, 9), r.uniform(0.1, 0.3)
        mask = drawn_mask(r, B, T, left=case % 2 == 0)
        while mask.sum() < 6:
            mask = drawn_mask(r, B, T, left=case % 2 == 0)
        lr, adv_on = drawn_ratios(r, int(mask.sum()), clip)
        old = -3 * torch.rand(B, T, generator=g, dtype=torch.float64)
        lp = torch.full((B, T), 20.0, dtype=torch.float64)
        adv = torch.full((B, T), 1e4, dtype=torch.float64)
        lp[mask] = old[mask] + torch.tensor(lr, dtype=torch.float64)
        adv[mask] = torch.tensor(adv_on, dtype=torch.float64)
        lp.requires_grad_()
        loss, stats = ppo.policy_loss(lp, old, adv, mask, clip)
        ratio, a = (lp[mask] - old[mask]).exp(), adv[mask]
        unclipped, clipped = -a * ratio, -a * ratio.clamp(1 - clip, 1 + clip)
        want = torch.maximum(unclipped, clipped).mean()
        close(loss, want, f"the policy loss (clip {clip:.3f})")
        close(torch.autograd.grad(loss, lp)[0], torch.autograd.grad(want, lp)[0], "the policy loss's gradient")
        expected = {"ratio_mean": ratio.mean().item(), "clipfrac": (clipped > unclipped).double().mean().item(),
                    "approx_kl": ((ratio - 1) - ratio.log()).mean().item()}
        for k, v in expected.items():
            assert stats[k] == pytest.approx(v, rel=1e-6, abs=1e-9), (
                f"policy_loss stat {k} is {stats[k]:.6f}, the reference {v:.6f} (held-out case, seed {SEED})")


# -----------------------------------------------------------------------------
# dpo_loss


def test_dpo_loss_on_drawn_pairs_equals_the_reference():
    """Drawn batches of 3-8 pairs with margins of both signs and a drawn beta: the loss (the MEAN over pairs of
    -log sigmoid(margin)), its gradients and every stat (a mean over pairs) equal the reference."""
    r, g = rng(6), generator(6)
    for _ in range(5):
        P, beta = r.randint(3, 8), r.uniform(0.05, 0.5)
        margins = [r.uniform(0.5, 3), r.uniform(-3, -0.5)] + [r.uniform(-3, 3) for _ in range(P - 2)]
        ref_c, ref_r, pol_r = (-1 - 29 * torch.rand(P, generator=g, dtype=torch.float64) for _ in range(3))
        pol_c = ref_c + torch.tensor(margins, dtype=torch.float64) / beta + (pol_r - ref_r)
        pol_c, pol_r = pol_c.requires_grad_(), pol_r.requires_grad_()
        loss, stats = dpo.dpo_loss(pol_c, pol_r, ref_c, ref_r, beta)
        chosen, rejected = beta * (pol_c - ref_c), beta * (pol_r - ref_r)
        want = torch.stack([-F.logsigmoid(c - j) for c, j in zip(chosen, rejected)]).mean()
        close(loss, want, f"the DPO loss of {P} pairs (beta {beta:.3f})")
        for x, name in ((pol_c, "chosen"), (pol_r, "rejected")):
            got_grad, want_grad = (torch.autograd.grad(y, x, retain_graph=True)[0] for y in (loss, want))
            close(got_grad, want_grad, f"the DPO loss's gradient in the {name} log-probs")
        m = torch.tensor(margins)
        expected = {"margin": m.mean().item(), "accuracy": (m > 0).float().mean().item(),
                    "chosen_reward": chosen.mean().item(), "rejected_reward": rejected.mean().item()}
        for k, v in expected.items():
            assert stats[k] == pytest.approx(v, rel=1e-5, abs=1e-6), (
                f"dpo_loss stat {k} over {P} pairs is {stats[k]:.6f}, the reference {v:.6f} "
                f"(held-out case, seed {SEED})")
