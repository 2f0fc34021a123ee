"""Where correct pieces meet: the rewards that reach GAE, and the PPO-ptx term's direction.

Unit tests of kl_penalized_rewards, gae and ptx_loss pass whatever their callers feed
them; these tests build the quantities independently of nanorlhf/experience.py and
fail when its wiring is wrong (log-probs swapped, a sign flipped, the score misplaced).
"""
import dataclasses

import pytest
import torch
import torch.nn.functional as F

from nanorlhf.experience import make_experience, minibatch_loss, score_passes
from nanorlhf.generate import Rollout
from nanorlhf.model import GPT, GPTConfig, ScalarHeadModel
from nanorlhf.ppo import PPOConfig

MC = GPTConfig(vocab_size=13, block_size=16, n_layer=1, n_head=1, n_embd=16)
STOP, PAD = 12, 0


def models(seed_policy=0, seed_ref=1):
    """A policy and a reference that differ (other seeds), an RM and a value model."""
    torch.manual_seed(seed_policy)
    policy = GPT(MC)
    torch.manual_seed(seed_ref)
    ref = GPT(MC)
    torch.manual_seed(2)
    return policy, ref, ScalarHeadModel(MC), ScalarHeadModel(MC)


def hand_rollout():
    """Row 0: prompt (2, left-padded to 3), response 5 6 STOP, padding; row 1: prompt 3 tokens, response cut at 4."""
    tokens = torch.tensor([[PAD, 3, 4, 5, 6, STOP, PAD], [7, 8, 9, 1, 2, 3, 4]])
    am = torch.tensor([[0, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1]])
    resp = torch.tensor([[0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1, 1]])
    return Rollout(tokens, am, resp, torch.zeros(2, 7), 3, STOP)


def logprobs_by_hand(model, ro):
    """log pi(token_t | tokens_<t) from the model's logits, position by position.  # (B, T)"""
    with torch.no_grad():
        logits = model(ro.tokens, attention_mask=ro.attention_mask)
    out = torch.zeros(ro.tokens.shape)
    for b in range(ro.tokens.size(0)):
        for t in range(1, ro.tokens.size(1)):
            out[b, t] = F.log_softmax(logits[b, t - 1], -1)[ro.tokens[b, t]]
    return out


def test_rewards_reaching_gae_are_score_minus_beta_kl():
    """With policy != reference, the per-token rewards are -beta * (log pi - log pi_ref) on response tokens plus the
    RM score at the true last token (placed there), and GAE (gamma = lam = 1, no whitening) returns their sum from the first
    response token: score - beta * sum(log pi - log pi_ref). Swapping pi and pi_ref, flipping the sign or reading
    the score elsewhere fails it. The RM reads the cut-off row with STOP appended, the format it was trained on."""
    policy, ref, rm, value = models()
    ro, beta = hand_rollout(), 0.3
    hp = PPOConfig(lam=1.0, gamma=1.0, whiten_advantages=False)
    exp = make_experience(policy, ref, rm, value, ro, rm_bias=0.25, beta=beta, hp=hp)
    kl = (logprobs_by_hand(policy, ro) - logprobs_by_hand(ref, ro)) * ro.response_mask       # (B, T)
    assert kl.abs().sum() > 0.1                                                               # they differ
    with torch.no_grad():
        ended_row = rm(ro.tokens[:1], attention_mask=ro.attention_mask[:1])[0, 5]            # its STOP token
        cut_row = rm(torch.tensor([[7, 8, 9, 1, 2, 3, 4, STOP]]))[0, 7]                      # STOP appended
    last = torch.tensor([5, 6])                                                               # true last tokens
    score = torch.stack([ended_row, cut_row]) - 0.25                                          # (B,)
    expected = -beta * kl
    expected[torch.arange(2), last] += score
    assert torch.allclose(exp["rewards"], expected, atol=1e-5)
    assert torch.allclose(exp["returns"][:, 3], score - beta * kl.sum(1), atol=1e-5)      # what GAE saw
    assert torch.allclose(exp["kl"], kl, atol=1e-5)


def test_rm_reads_a_cut_response_with_the_end_token_appended():
    """A response cut at max_new_tokens is scored as if it ended with STOP, the format of every RM training
    completion (reward.encode_texts), on the trimmed and the plain path alike; a row that fills the block
    drops its first token for it, as encode_texts drops a long prompt's start. An ended row is unchanged."""
    policy, ref, rm, value = models()
    full = torch.arange(1, 17) % 11 + 1                                                       # 16 tokens, no STOP
    tokens = torch.stack([torch.cat([torch.tensor([PAD] * 10), torch.tensor([3, 4, 5, 6, 5, STOP])]), full])
    am = torch.stack([(tokens[0] != PAD).long(), torch.ones(16, dtype=torch.long)])
    resp = torch.zeros(2, 16, dtype=torch.long)
    resp[:, 13:] = 1
    with torch.no_grad():
        want = torch.stack([rm(tokens[:1, 10:])[0, -1], rm(torch.cat([full[1:], torch.tensor([STOP])])[None])[0, -1]])
    for trim in (True, False):
        hp = PPOConfig(trim_padding=trim)
        ro = Rollout(tokens, am, resp, torch.zeros(2, 16), 10, STOP)
        score = score_passes(policy, ref, rm, value, ro, hp, 0.0)[3]
        assert torch.allclose(score, want, atol=1e-5), trim
        no_stop = dataclasses.replace(ro, stop_token=None)
        assert not torch.allclose(score_passes(policy, ref, rm, value, no_stop, hp, 0.0)[3], want, atol=1e-3)


def test_eos_penalty_lowers_only_the_cut_off_reward():
    """The penalty lands on the cut-off row's last token only, inside the reward GAE sees."""
    policy, ref, rm, value = models()
    ro = hand_rollout()
    base = make_experience(policy, ref, rm, value, ro, rm_bias=0.0, beta=0.1, hp=PPOConfig())
    pen = make_experience(policy, ref, rm, value, ro, rm_bias=0.0, beta=0.1, hp=PPOConfig(eos_penalty=2.0))
    diff = pen["rewards"] - base["rewards"]
    assert torch.allclose(diff[1, 6], torch.tensor(-2.0)) and diff.abs().sum().item() == pytest.approx(2.0)


class FixedBatch:
    """A ptx stream that always yields the same pretraining batch."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def next(self):
        return self.x, self.y


def ptx_loss_after_updates(ptx_coef: float, steps: int = 3) -> tuple[float, float]:
    """(pretraining loss on the fixed batch before, after `steps` updates of the PPO-ptx minibatch loss)."""
    policy, ref, rm, value = models()
    policy.train()
    ro = hand_rollout()
    hp = PPOConfig(ptx_coef=ptx_coef)
    exp = make_experience(policy, ref, rm, value, ro, rm_bias=0.0, beta=0.1, hp=hp)
    g = torch.Generator().manual_seed(3)
    x = torch.randint(1, 12, (4, 8), generator=g)
    ptx = FixedBatch(x[:, :-1], x[:, 1:])

    def lm_loss():
        with torch.no_grad():
            return F.cross_entropy(policy(ptx.x).flatten(0, 1), ptx.y.flatten()).item()

    before = lm_loss()
    opt = torch.optim.SGD(list(policy.parameters()) + list(value.parameters()), lr=0.05)
    for _ in range(steps):
        loss, _ = minibatch_loss(policy, value, exp, torch.arange(2), hp, ptx if ptx_coef > 0 else None)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return before, lm_loss()


def test_ptx_term_lowers_the_pretraining_loss():
    """InstructGPT eq. 2's + gamma_ptx * log pi(x): with gamma_ptx > 0 an update lowers the pretraining loss on the
    ptx batch, and more than with gamma_ptx = 0 (a flipped sign raises it instead)."""
    before, with_ptx = ptx_loss_after_updates(1.0)
    _, without = ptx_loss_after_updates(0.0)
    assert with_ptx < before and with_ptx < without - 1e-3


# -----------------------------------------------------------------------------
# the update: what minibatch_loss hands the pure losses (each test fails if one argument at the call site moves)


def values_by_hand(value, ro):
    """V(s_t) read from the value head's output at t - 1, position by position; 0 at t = 0.  # (B, T)"""
    with torch.no_grad():
        head = value(ro.tokens, attention_mask=ro.attention_mask)
    out = torch.zeros(ro.tokens.shape)
    out[:, 1:] = head[:, :-1]
    return out


@pytest.mark.parametrize("trim", [True, False])
def test_an_update_raises_the_logprob_of_positive_advantage_tokens(trim):
    """One gradient step of the minibatch loss moves pi_RL towards the tokens with positive advantage (row 0) and
    away from those with negative advantage (row 1): new and old log-probs in their places in the ratio."""
    policy, ref, rm, value = models()
    ro, hp = hand_rollout(), PPOConfig(whiten_advantages=False, trim_padding=trim, vf_coef=0.0)
    exp = make_experience(policy, ref, rm, value, ro, rm_bias=0.0, beta=0.1, hp=hp)
    exp["advantages"] = torch.tensor([[1.0], [-1.0]]) * ro.response_mask
    before = logprobs_by_hand(policy, ro)
    loss, _ = minibatch_loss(policy, value, exp, torch.arange(2), hp, None)
    loss.backward()
    with torch.no_grad():
        for p in policy.parameters():
            p -= 0.5 * p.grad
    moved = (logprobs_by_hand(policy, ro) - before) * ro.response_mask
    assert moved[0].sum() > 1e-3 and moved[1].sum() < -1e-3


@pytest.mark.parametrize("trim", [True, False])
def test_value_loss_is_clipped_around_the_old_values_against_the_returns(trim):
    """The value loss minibatch_loss reports is 0.5 * max((V - R)^2, (V_clip - R)^2) with V read one position
    back (V(s_t) from the head at t - 1), V_old the experience's values and R its returns; with the value model
    moved past the clip range, unclipped, advantage targets or V read at t all give other numbers."""
    policy, ref, rm, value = models()
    ro = hand_rollout()
    resp = ro.response_mask.bool()
    for clip_value in (True, False):
        hp = PPOConfig(whiten_advantages=False, trim_padding=trim, clip_value=clip_value)
        exp = make_experience(policy, ref, rm, value, ro, rm_bias=0.0, beta=0.1, hp=hp)
        moved = ScalarHeadModel(MC)
        moved.load_state_dict(value.state_dict())
        with torch.no_grad():
            moved.head.bias += 1.0                                  # every value 1 higher: past the clip of 0.2
            moved.head.weight.mul_(1.5)                             # and no longer a constant shift
        v, v_old, r = values_by_hand(moved, ro), exp["values"], exp["returns"]
        v_clip = v_old + (v - v_old).clamp(-hp.clip, hp.clip)
        clipped = 0.5 * torch.maximum((v - r) ** 2, (v_clip - r) ** 2)[resp].mean()
        plain = 0.5 * ((v - r) ** 2)[resp].mean()
        assert abs(clipped - plain) > 0.01
        _, s = minibatch_loss(policy, moved, exp, torch.arange(2), hp, None)
        assert s["val/value_loss"] == pytest.approx((clipped if clip_value else plain).item(), abs=1e-4)


def test_advantages_are_whitened_over_the_response_tokens_only():
    """make_experience whitens GAE's advantages over the batch's response tokens: mean 0 and (unbiased) std 1
    there, 0 elsewhere; whitening over prompt or padding positions too gives another mean and scale."""
    policy, ref, rm, value = models()
    ro = hand_rollout()
    raw = make_experience(policy, ref, rm, value, ro, rm_bias=0.5, beta=0.1, hp=PPOConfig(whiten_advantages=False))
    exp = make_experience(policy, ref, rm, value, ro, rm_bias=0.5, beta=0.1, hp=PPOConfig())
    resp = ro.response_mask.bool()
    a = raw["advantages"][resp]
    assert torch.allclose(exp["advantages"][resp], (a - a.mean()) / torch.sqrt(a.var() + 1e-8), atol=1e-5)
    assert (exp["advantages"][~resp] == 0).all()


def test_gamma_and_lambda_reach_gae_in_their_places():
    """With gamma = 0.9 and lambda = 0.6 the advantages are the brute-force sum_k (gamma lam)^k delta_{t+k}, with
    delta_t = r_t + gamma V_{t+1} - V_t over each row's response tokens (V after the last one: 0)."""
    policy, ref, rm, value = models()
    ro, gamma, lam = hand_rollout(), 0.9, 0.6
    exp = make_experience(policy, ref, rm, value, ro, rm_bias=0.0, beta=0.1,
                          hp=PPOConfig(gamma=gamma, lam=lam, whiten_advantages=False))
    r, v = exp["rewards"], values_by_hand(value, ro)
    for b in range(2):
        cols = ro.response_mask[b].nonzero().squeeze(1).tolist()
        vals = [v[b, t].item() for t in cols] + [0.0]
        deltas = [r[b, t].item() + gamma * vals[i + 1] - vals[i] for i, t in enumerate(cols)]
        for i, t in enumerate(cols):
            want = sum((gamma * lam) ** k * d for k, d in enumerate(deltas[i:]))
            assert exp["advantages"][b, t].item() == pytest.approx(want, abs=1e-5), (b, t)


def test_ptx_term_enters_the_loss_with_its_coefficient_on_next_token_targets():
    """loss = policy loss + vf_coef * value loss + gamma_ptx * LM loss, the LM loss the cross-entropy of each
    pretraining token given the ones before it (targets shifted by one), at gamma_ptx and vf_coef other than 1."""
    policy, ref, rm, value = models()
    ro, hp = hand_rollout(), PPOConfig(ptx_coef=0.3, vf_coef=0.7)
    exp = make_experience(policy, ref, rm, value, ro, rm_bias=0.0, beta=0.1, hp=hp)
    seq = torch.randint(1, 12, (3, 9), generator=torch.Generator().manual_seed(5))
    loss, s = minibatch_loss(policy, value, exp, torch.arange(2), hp, FixedBatch(seq[:, :-1], seq[:, 1:]))
    with torch.no_grad():
        logits = policy(seq[:, :-1])
    lm = sum(-F.log_softmax(logits[b, t], -1)[seq[b, t + 1]] for b in range(3) for t in range(8)) / 24
    assert s["ptx/loss"] == pytest.approx(lm.item(), abs=1e-4)
    assert loss.item() == pytest.approx(s["ppo/policy_loss"] + 0.7 * s["val/value_loss"] + 0.3 * lm.item(), abs=1e-4)


def test_rollouts_sample_at_the_ppo_temperature():
    """sample_episodes draws at hp.temperature: the log-probs it records are those of softmax(logits / T) at
    T = 0.6, and make_experience's recomputed old log-probs (the ratio's denominator) are the same numbers."""
    from nanorlhf.rollout import sample_episodes
    policy, ref, rm, value = models()
    hp = PPOConfig(temperature=0.6, max_new_tokens=6, batch_size=3, minibatch_size=3)
    ro = sample_episodes(policy, [[3, 4], [5, 6, 7], [8]], hp, torch.Generator().manual_seed(0), stop_token=STOP,
                         pad_id=PAD)
    with torch.no_grad():
        logits = policy(ro.tokens, attention_mask=ro.attention_mask)
    want = torch.zeros(ro.tokens.shape)
    for b, t in ro.response_mask.nonzero().tolist():
        want[b, t] = F.log_softmax(logits[b, t - 1] / 0.6, -1)[ro.tokens[b, t]]
    resp = ro.response_mask.bool()
    assert torch.allclose(ro.logprobs[resp], want[resp], atol=1e-4)
    exp = make_experience(policy, ref, rm, value, ro, rm_bias=0.0, beta=0.1, hp=hp)
    assert torch.allclose(exp["logprobs"][resp], want[resp], atol=1e-4)


def test_pretraining_batches_pair_each_token_with_the_next():
    """The batches pretraining and PPO-ptx read (lmdata.LMBatches): y is x shifted by one in the corpus stream,
    so each position's target is the token that follows it."""
    from nanorlhf.lmdata import LMBatches
    x, y = LMBatches(torch.arange(200), block_size=8, batch_size=4, seed=0).next()
    assert x.shape == y.shape == (4, 8)
    assert torch.equal(y, x + 1)
