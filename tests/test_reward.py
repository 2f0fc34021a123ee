"""Reward-model loss (InstructGPT eq. 1) on plain tensors: no model needed."""

import math

import pytest
import torch
import torch.nn.functional as F

from nanorlhf.rankings import ranks_to_pairs
from nanorlhf.reward import normalize_bias, pairwise_accuracy, rm_batch_loss, rm_ranking_loss


def test_equal_rewards_give_log2():
    """With equal rewards the pairwise loss is log 2, for any K and ranking."""
    for k in (2, 4, 9):
        rewards = torch.full((k,), 0.7, dtype=torch.float64)
        ranks = torch.randperm(k, generator=torch.Generator().manual_seed(k))
        assert rm_ranking_loss(rewards, ranks).item() == pytest.approx(math.log(2), abs=1e-15)
    assert rm_ranking_loss(torch.zeros(5), torch.arange(5)).item() == pytest.approx(math.log(2), abs=1e-7)


def test_k_way_loss_is_mean_of_pairwise_losses():
    """The K-way loss equals the mean over untied pairs of the 2-completion loss -log sigma(r_w - r_l)."""
    g = torch.Generator().manual_seed(0)
    for ranks in ([0, 1, 2, 3], [3, 0, 2, 1, 4, 5], [0, 2, 1, 1, 0]):
        rewards = torch.randn(len(ranks), generator=g, dtype=torch.float64)
        pairs = ranks_to_pairs(ranks)
        two_way = [rm_ranking_loss(rewards[[w, l]], torch.tensor([0, 1])) for w, l in pairs]
        by_hand = [-math.log(1 / (1 + math.exp(-(rewards[w] - rewards[l]).item()))) for w, l in pairs]
        loss = rm_ranking_loss(rewards, torch.tensor(ranks))
        assert loss.item() == pytest.approx(torch.stack(two_way).mean().item(), rel=1e-12)
        assert loss.item() == pytest.approx(sum(by_hand) / len(by_hand), rel=1e-12)


def test_tied_pairs_are_dropped():
    """A tied pair adds no term, and the normaliser counts untied pairs only (2 here, not C(3, 2) = 3)."""
    r = torch.tensor([1.0, 0.5, -0.5], dtype=torch.float64)
    tied = rm_ranking_loss(r, torch.tensor([0, 1, 1]))  # (1, 2) tied
    expected = -(F.logsigmoid(r[0] - r[1]) + F.logsigmoid(r[0] - r[2])) / 2
    assert tied.item() == pytest.approx(expected.item(), rel=1e-12)
    # breaking the tie adds the third term and the third count
    untied = rm_ranking_loss(r, torch.tensor([0, 1, 2]))
    assert untied.item() == pytest.approx((2 * expected - F.logsigmoid(r[1] - r[2])).item() / 3, rel=1e-12)


def test_all_tied_raises():
    """A ranking with no untied pair has nothing to learn from and is refused loudly (a ValueError, in any words)."""
    with pytest.raises(ValueError):
        rm_ranking_loss(torch.randn(3), torch.tensor([1, 1, 1]))


def test_gradient_sign():
    """Raising the winner's reward lowers the loss; raising the loser's raises it."""
    rewards = torch.tensor([0.3, -0.2, 0.9], requires_grad=True)
    ranks = torch.tensor([0, 1, 2])  # 0 beats 1 beats 2
    rm_ranking_loss(rewards, ranks).backward()
    assert rewards.grad[0] < 0  # best: only ever a winner
    assert rewards.grad[2] > 0  # worst: only ever a loser
    # and a finite step along -grad lowers it
    with torch.no_grad():
        before = rm_ranking_loss(rewards, ranks)
        after = rm_ranking_loss(rewards - 0.1 * rewards.grad, ranks)
    assert after < before


def test_batch_loss_averages_over_prompts_not_pairs():
    """rm_batch_loss weighs each prompt equally (one batch element per prompt), whatever its K."""
    r1, k1 = torch.tensor([2.0, 0.0]), torch.tensor([0, 1])  # 1 pair
    r2, k2 = torch.tensor([0.0, 1.0, 2.0, 3.0]), torch.tensor([0, 1, 2, 3])  # 6 pairs
    expected = (rm_ranking_loss(r1, k1) + rm_ranking_loss(r2, k2)) / 2
    assert rm_batch_loss([r1, r2], [k1, k2]).item() == pytest.approx(expected.item())


def test_pairwise_accuracy_hand_made():
    """pairwise_accuracy is the fraction of untied pairs ordered right, ties in ranks skipped."""
    ranks = [0, 2, 1, 1]  # pairs (0,1) (0,2) (0,3) (2,1) (3,1)
    rewards = torch.tensor([1.0, 0.0, 2.0, -1.0])
    # (0,1): 1>0 yes; (0,2): 1>2 no; (0,3): 1>-1 yes; (2,1): 2>0 yes; (3,1): -1>0 no
    assert pairwise_accuracy(rewards, ranks) == pytest.approx(3 / 5)
    assert pairwise_accuracy(torch.tensor([3.0, 2.0, 1.0]), [0, 1, 2]) == 1.0
    assert pairwise_accuracy(torch.tensor([1.0, 1.0]), [0, 1]) == 0.0  # equal scores are not "right"


def test_normalize_bias_centres_demonstrations():
    """InstructGPT §3.5: after subtracting the bias, demonstrations score 0 on average; the RM loss is unchanged."""
    demo_scores = torch.tensor([0.5, 2.0, -1.0, 3.5])
    b = normalize_bias(demo_scores)
    assert b == pytest.approx(1.25)
    assert (demo_scores - b).mean().item() == pytest.approx(0.0, abs=1e-7)
    rewards, ranks = torch.tensor([0.4, -0.3, 1.2]), torch.tensor([1, 2, 0])
    assert rm_ranking_loss(rewards - b, ranks).item() == pytest.approx(rm_ranking_loss(rewards, ranks).item())


def test_weighted_batch_loss_is_the_weighted_mean_of_prompt_losses():
    """rm_batch_loss with weights is sum(w * loss) / sum(w) (a person's labels can count more)."""
    from nanorlhf.reward import rm_batch_loss, rm_ranking_loss
    r1, r2 = torch.tensor([1.0, 0.0, -1.0]), torch.tensor([0.2, 0.5])
    k1, k2 = [0, 1, 2], [0, 1]
    l1, l2 = rm_ranking_loss(r1, k1), rm_ranking_loss(r2, k2)
    assert torch.allclose(rm_batch_loss([r1, r2], [k1, k2], [1.0, 3.0]), (l1 + 3 * l2) / 4)
    assert torch.allclose(rm_batch_loss([r1, r2], [k1, k2]), (l1 + l2) / 2)


def test_one_pass_fit_loss_is_each_prompts_own_ranking_loss():
    """The RM fit's first loss (before its step) is the mean over prompts of eq. 1 on that prompt's own K scores
    and ranking, with K = 3 and 4 in one batch: pairs never cross prompts, whichever path scores them."""
    from nanorlhf.model import GPTConfig, ScalarHeadModel
    from nanorlhf.rankings import ranking_to_ranks
    from nanorlhf.reward import RewardConfig, fit_reward_model, score_texts
    from nanorlhf.tokenizer import Tokenizer
    tok = Tokenizer.train("Pip the fox ate a red apple at Cinder Meadow. " * 20, 300)
    torch.manual_seed(0)
    rm = ScalarHeadModel(GPTConfig(vocab_size=tok.vocab_size, block_size=48, n_layer=1, n_head=2, n_embd=16))
    cmp = [{"prompt": "Pip the fox", "completions": ["ate", "a red apple", "Cinder"], "ranking": [[2], [0], [1]]},
           {"prompt": "Cinder Meadow", "completions": ["Pip", "the fox ate", "red", "apple at"],
            "ranking": [[1], [3], [0, 2]]}]
    with torch.no_grad():
        want = sum(rm_ranking_loss(score_texts(rm, tok, [c["prompt"]] * len(c["completions"]), c["completions"],
                                               "cpu"), ranking_to_ranks(c["ranking"])) for c in cmp) / 2
    for one_pass in (True, False):
        rm_copy = ScalarHeadModel(rm.cfg)
        rm_copy.load_state_dict(rm.state_dict())
        losses = fit_reward_model(rm_copy, tok, cmp, RewardConfig(lr=1e-9, batch_prompts=2, one_pass=one_pass), seed=0)
        assert losses[0] == pytest.approx(want.item(), abs=1e-5), one_pass
