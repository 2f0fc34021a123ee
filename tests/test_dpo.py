"""The lineage's maths on hand-made numbers: the DPO loss, the best-of-n KL, the feedback model's answer."""
import math

import pytest
import torch

from nanorlhf import dpo
from nanorlhf.model import GPT, GPTConfig
from nanorlhf.reward import encode_texts, rm_ranking_loss
from nanorlhf.tokenizer import Tokenizer
from nanorlhf.world import feedback


@pytest.fixture(scope="module")
def tok():
    return Tokenizer.train("Which response is more harmless? The answer is (A) or (B). Pip the fox. " * 20, 300)


def tiny_gpt(vocab: int, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=vocab, block_size=64, n_layer=1, n_head=2, n_embd=16, dropout=0.0)).eval()


# -----------------------------------------------------------------------------
# DPO


def test_dpo_loss_is_log2_at_the_reference():
    """When pi == pi_ref every implicit reward is 0, so the loss is log 2 and accuracy 0, whatever beta."""
    lp = torch.tensor([-12.3, -4.0, -30.5])
    rej = torch.tensor([-7.1, -9.9, -2.2])
    for beta in (0.01, 0.1, 1.0):
        loss, s = dpo.dpo_loss(lp, rej, lp, rej, beta)
        assert loss.item() == pytest.approx(math.log(2), abs=1e-6)
        assert s["margin"] == 0 and s["accuracy"] == 0


def test_dpo_gradient_raises_chosen_and_lowers_rejected():
    """Raising log pi(y_w) lowers the loss and raising log pi(y_l) raises it (DPO eq. 7's gradient signs)."""
    chosen = torch.tensor([-5.0, -8.0], requires_grad=True)
    rejected = torch.tensor([-6.0, -3.0], requires_grad=True)
    loss, _ = dpo.dpo_loss(chosen, rejected, torch.tensor([-5.5, -7.0]), torch.tensor([-6.0, -4.0]), 0.5)
    loss.backward()
    assert (chosen.grad < 0).all() and (rejected.grad > 0).all()
    with torch.no_grad():
        higher, _ = dpo.dpo_loss(chosen + 0.1, rejected, torch.tensor([-5.5, -7.0]), torch.tensor([-6.0, -4.0]), 0.5)
    assert higher < loss


def test_dpo_loss_matches_the_formula_by_hand():
    """One pair: -log sigmoid(beta * ((-1 - -2) - (-3 - -2.5))) with beta = 0.5 = -log sigmoid(0.75)."""
    loss, s = dpo.dpo_loss(torch.tensor([-1.0]), torch.tensor([-3.0]), torch.tensor([-2.0]), torch.tensor([-2.5]), 0.5)
    assert loss.item() == pytest.approx(-math.log(1 / (1 + math.exp(-0.75))), abs=1e-6)
    assert s["margin"] == pytest.approx(0.75) and s["accuracy"] == 1.0
    assert s["chosen_reward"] == pytest.approx(0.5) and s["rejected_reward"] == pytest.approx(-0.25)


def test_dpo_ranking_loss_is_the_rm_loss_on_implicit_rewards():
    """A K-way ranking expands to its untied pairs exactly as the RM's does: DPO = eq. 1 with r = beta log(pi/pi_ref)."""
    pol, ref, ranks, beta = torch.tensor([-3.0, -1.0, -4.0, -2.0]), torch.tensor([-2.5, -2.0, -3.0, -2.0]), [0, 2, 1, 1], 0.3
    loss, _ = dpo.dpo_ranking_loss(pol, ref, ranks, beta)
    assert loss.item() == pytest.approx(rm_ranking_loss(beta * (pol - ref), ranks).item(), abs=1e-6)
    with pytest.raises(ValueError, match="no untied pair"):
        dpo.dpo_ranking_loss(pol, ref, [0, 0, 0, 0], beta)


def test_response_logprob_sum_counts_exactly_the_response_tokens(tok):
    """log pi(y|x) sums completion + <|endoftext|> tokens only: brute force over positions, padding ignored."""
    model = tiny_gpt(tok.vocab_size)
    t, a, r = encode_texts(tok, ["Pip the fox."] * 2, ["The answer", "(A) or (B). Pip."], 64)
    got = dpo.response_logprob_sum(model, t, a, r)
    logits = model(t, attention_mask=a)
    for i in range(t.size(0)):
        want = sum(torch.log_softmax(logits[i, j - 1], -1)[t[i, j]].item() for j in range(t.size(1)) if r[i, j])
        assert got[i].item() == pytest.approx(want, abs=1e-4)
    n_resp = [len(tok.encode(c)) + 1 for c in ["The answer", "(A) or (B). Pip."]]
    assert r.sum(1).tolist() == n_resp


# -----------------------------------------------------------------------------
# best-of-n


def test_best_of_n_kl_formula():
    """KL(best-of-n || base) = log n - (n - 1)/n (Stiennon et al. 2020; Gao et al. 2022): 0 at n = 1."""
    from nanorlhf.evals import bon
    for n in (1, 2, 4, 16, 64):
        assert float(bon.bon_kl(n)) == pytest.approx(math.log(n) - (n - 1) / n, abs=1e-9)


# -----------------------------------------------------------------------------
# the feedback model


class LetterModel(torch.nn.Module):
    """Mock LM whose next-token logits favour one fixed token everywhere."""

    def __init__(self, vocab: int, favoured: int, block_size: int = 128):
        super().__init__()
        self.cfg = GPTConfig(vocab_size=vocab, block_size=block_size)
        self.vocab, self.favoured = vocab, favoured
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, tokens, attention_mask=None):
        logits = torch.zeros(*tokens.shape, self.vocab)
        logits[..., self.favoured] = 3.0
        return logits


def test_feedback_reads_the_letter_logprobs(tok):
    """A model whose logits favour "A" answers A: log p(A) - log p(B) = 3 at the question's end."""
    a_id, b_id = feedback.letter_ids(tok)
    assert tok.decode([a_id]) == "A" and tok.decode([b_id]) == "B"
    q = feedback.multiple_choice(tok, "Name a fox.", "Pip.", "Pip, you fool.", 128)
    assert tok.decode(q).endswith("The answer is (") and len(q) < 128
    lp = feedback.letter_logprobs(LetterModel(tok.vocab_size, a_id), [q], [a_id, b_id], tok.pad_id)
    assert lp.shape == (1, 2) and (lp[0, 0] - lp[0, 1]).item() == pytest.approx(3.0, abs=1e-5)


def test_feedback_order_swap_removes_position_bias(tok):
    """Averaging both orders: an always-"A" model gives exactly 1/2; hand-made orders average as 1/2 (p_ab + p_ba)."""
    a_id, _ = feedback.letter_ids(tok)
    p = feedback.prefer(LetterModel(tok.vocab_size, a_id), tok, ["Name a fox."] * 2, ["Pip.", "Go away."],
                        ["Pip, you fool.", "Hello."])
    assert torch.allclose(p, torch.full((2,), 0.5))
    lp_ab = torch.log(torch.tensor([[0.8, 0.2]]))     # first shown as (A): P(A) = 0.8
    lp_ba = torch.log(torch.tensor([[0.4, 0.6]]))     # first shown as (B): P(B) = 0.6
    assert feedback.debiased_preference(lp_ab, lp_ba).item() == pytest.approx(0.7)


def test_multiple_choice_fits_the_context_and_keeps_both_responses(tok):
    """Long responses are cut, never the question's tail; each response keeps its first tokens (where insults go)."""
    long = "Pip the fox. " * 40
    q = feedback.multiple_choice(tok, long, "Fine, you fool. " + long, long, 64)
    text = tok.decode(q)
    assert len(q) <= 63 and text.endswith("The answer is (") and "(A) Fine" in text and "(B) Pip" in text


def test_multiple_choice_refuses_a_context_too_small_for_the_question(tok):
    """A block too small for the question's fixed text is a clear ValueError, not a silently wrong slice."""
    with pytest.raises(ValueError, match="block_size"):
        feedback.multiple_choice(tok, "Name a fox.", "Pip.", "Pip, you fool.", 16)


def test_dpo_refuses_an_empty_comparison_list():
    """No usable comparison (all tied, or none) is a ValueError naming the problem, not an IndexError."""
    with pytest.raises(ValueError, match="untied pair"):
        dpo.comparison_loss(None, None, None, [], beta=0.1, device="cpu")


def test_comparison_loss_is_dpo_on_the_policy_and_reference_log_probs_at_beta(tok):
    """comparison_loss over one K = 3 ranking: the mean over its untied pairs of
    -log sigmoid(beta * [(log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l))]), the log-probs summed
    over each completion's response tokens by hand, at beta = 0.3 and with pi != pi_ref: beta ignored, or the
    policy and the reference swapped, give another number."""
    policy, ref = tiny_gpt(tok.vocab_size, seed=0), tiny_gpt(tok.vocab_size, seed=1)
    comps = ["Pip the fox.", "The answer is (A).", "Which response?"]
    row = {"prompt": "Pip the fox", "completions": comps, "ranking": [[1], [0], [2]]}
    t, a, r = encode_texts(tok, [row["prompt"]] * 3, comps, policy.cfg.block_size)

    def logp(model):
        with torch.no_grad():
            logits = model(t, attention_mask=a)
        return torch.tensor([sum(torch.log_softmax(logits[k, j - 1], -1)[t[k, j]].item()
                                 for j in range(1, t.size(1)) if r[k, j]) for k in range(3)])

    lp, ref_lp = logp(policy), logp(ref)
    beta, pairs = 0.3, [(1, 0), (1, 2), (0, 2)]
    want = sum(-torch.nn.functional.logsigmoid(beta * ((lp[w] - ref_lp[w]) - (lp[l] - ref_lp[l])))
               for w, l in pairs) / 3
    loss, _ = dpo.comparison_loss(policy, ref, tok, [row], beta, "cpu")
    assert loss.item() == pytest.approx(want.item(), abs=1e-5)
    assert abs(want.item() - math.log(2)) > 1e-3                                  # the policies do differ
