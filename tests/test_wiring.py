"""Where correct pieces meet: the rewards that reach GAE, and the PPO-ptx term's direction.

Unit tests of kl_penalized_rewards, gae and ptx_loss pass whatever their callers feed
them; these tests build the quantities independently of nanorlhf/experience.py and
fail when its wiring is wrong (log-probs swapped, a sign flipped, the score misplaced).
"""
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
        score = score_passes(policy, ref, rm, value, tokens, am, resp, hp, 0.0, stop_token=STOP)[3]
        assert torch.allclose(score, want, atol=1e-5), trim
        assert not torch.allclose(score_passes(policy, ref, rm, value, tokens, am, resp, hp, 0.0)[3], want, atol=1e-3)


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
