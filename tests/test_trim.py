"""The fast paths compute the plain paths' quantities: packed PPO passes, the one-pass RM fit.

Each fast path computes less on padding; the plain path (full width, one forward per prompt)
stays as the reference, and these tests hold the two equal to float rounding.
"""
import dataclasses

import torch

from nanorlhf import masks
from nanorlhf.experience import make_experience, minibatch_loss, score_passes
from nanorlhf.generate import SamplingConfig, generate
from nanorlhf.infra.precision import SHAPE_MULTIPLE
from nanorlhf.model import GPT, GPTConfig, ScalarHeadModel
from nanorlhf.packing import length_groups, packing, response_logprobs, unpack
from nanorlhf.ppo import PPOConfig

MC = GPTConfig(vocab_size=17, block_size=32, n_layer=2, n_head=2, n_embd=16)
STOP, PAD = 16, 0


def models():
    torch.manual_seed(0)
    policy, ref = GPT(MC), GPT(MC)
    return policy, ref, ScalarHeadModel(MC), ScalarHeadModel(MC)


def rollout(policy, n=12):
    """Prompts of 1..6 tokens, responses of 1..10 (some stop early, some are cut off)."""
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(1, STOP, (int(k),), generator=g).tolist() for k in torch.randint(1, 7, (n,), generator=g)]
    return generate(policy, prompts, SamplingConfig(max_new_tokens=10), stop_token=STOP, pad_id=PAD, generator=g)


def test_packing_left_aligns_each_rows_real_tokens():
    """Packed row i holds row i's real tokens from position 0, in order; unpack puts values back in their columns."""
    am = torch.tensor([[0, 0, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0], [0, 1, 1, 0, 0, 0]])
    cols, valid = packing(am, torch.tensor([0, 2]), block_size=3)  # the cap keeps L at the longest row's 3
    assert cols.tolist() == [[2, 3, 4], [1, 2, 0]] and valid.tolist() == [[True] * 3, [True, True, False]]
    x = torch.arange(1.0, 7.0).view(2, 3)
    assert unpack(x, cols, valid, 6).tolist() == [[0, 0, 1, 2, 3, 0], [0, 4, 5, 0, 0, 0]]


def test_packing_rounds_its_width_up_with_the_extra_columns_invalid():
    """Under a larger block_size L is rounded up to SHAPE_MULTIPLE; the added columns are invalid and unpack drops
    them, so the packed rows carry the same real tokens."""
    am = torch.tensor([[0, 0, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0]])
    cols, valid = packing(am, torch.tensor([0, 1]), block_size=128)
    assert cols.shape == (2, SHAPE_MULTIPLE) and valid.sum(1).tolist() == [3, 2]
    assert not valid[:, 3:].any() and (cols[~valid] == 0).all()
    x = torch.arange(1.0, 2 * SHAPE_MULTIPLE + 1).view(2, -1)
    assert unpack(x, cols, valid, 6).tolist() == [[0, 0, 1, 2, 3, 0], [0, 17, 18, 0, 0, 0]]


def test_response_logprobs_equal_full_logprobs_on_response_positions():
    """The unembedding on response positions alone gives masks.token_logprobs there, and 0 elsewhere."""
    policy = models()[0].eval()
    ro = rollout(policy)
    with torch.no_grad():
        fast, _ = response_logprobs(policy, ro.tokens, ro.attention_mask, ro.response_mask, 0.7)
        full = masks.token_logprobs(policy(ro.tokens, attention_mask=ro.attention_mask), ro.tokens, 0.7)
    resp = ro.response_mask.bool()
    assert torch.allclose(fast[resp], full[resp], atol=1e-5) and (fast[~resp] == 0).all()


def test_trimmed_scoring_equals_the_full_width_passes():
    """Log-probs of policy and reference, values and RM scores from packed chunks equal the full-width ones."""
    policy, ref, rm, value = models()
    ro = rollout(policy)
    args = (policy, ref, rm, value, ro)
    fast = score_passes(*args, PPOConfig(), 0.3, chunk=5)
    plain = score_passes(*args, PPOConfig(trim_padding=False), 0.3)
    resp = ro.response_mask.bool()
    for f, p in zip(fast[:3], plain[:3]):
        assert torch.allclose(f[resp], p[resp], atol=1e-5)
    assert torch.allclose(fast[3], plain[3], atol=1e-5)
    assert ro.attention_mask.float().mean() < 0.8                      # the batch does carry padding


def test_trimmed_minibatch_loss_and_gradients_equal_the_plain_ones():
    """One minibatch's loss, statistics and gradients agree packed and full width (advantages from the same exp)."""
    policy, ref, rm, value = models()
    ro = rollout(policy)
    hp = PPOConfig()
    exp = make_experience(policy, ref, rm, value, ro, rm_bias=0.0, beta=0.1, hp=hp)
    # a changed policy, so the ratio is not 1 and the clip is live
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.05 * torch.randn_like(p))
    idx = torch.tensor([0, 3, 4, 7, 9])
    out = {}
    for trim in (True, False):
        policy.zero_grad(), value.zero_grad()
        loss, stats = minibatch_loss(policy, value, exp, idx, dataclasses.replace(hp, trim_padding=trim), None)
        loss.backward()
        out[trim] = (loss.item(), stats, [p.grad.clone() for p in policy.parameters()])
    assert abs(out[True][0] - out[False][0]) < 1e-5
    for k in ("ppo/clipfrac", "ppo/ratio_mean", "objective/entropy", "val/explained_var"):
        assert abs(out[True][1][k] - out[False][1][k]) < 1e-4, k
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(out[True][2], out[False][2]))


def test_length_groups_cover_every_row_once_with_similar_lengths():
    """Minibatches grouped by length hold every episode once; within a group lengths are close."""
    am = (torch.arange(20)[None] < torch.randint(1, 21, (32,))[:, None]).long()
    groups = length_groups(am, 8, torch.Generator().manual_seed(0))
    assert sorted(torch.cat(groups).tolist()) == list(range(32)) and all(len(g) == 8 for g in groups)
    spread = max((am[g].sum(1).max() - am[g].sum(1).min()).item() for g in groups)
    assert spread < (am.sum(1).max() - am.sum(1).min()).item()


def test_length_groups_stay_on_the_masks_device():
    """A CPU generator's noise meets a mask on the model's device: the meta device stands in for a GPU, and
    mixing devices there raises as it does on CUDA."""
    am = torch.ones(16, 4, dtype=torch.long, device="meta")
    groups = length_groups(am, 4, torch.Generator().manual_seed(0))
    assert len(groups) == 4 and all(g.device.type == "meta" for g in groups)


def test_one_pass_rm_fit_equals_the_per_prompt_fit(stages):
    """The RM fit with a step's completions scored together, in length-sorted passes of 5 rows, follows the
    per-prompt fit's losses."""
    import copy
    import os

    from nanorlhf.checkpoint import load_model
    from nanorlhf.reward import RewardConfig, fit_reward_model
    from nanorlhf.world.comparisons import load_comparisons
    rm0, tok, _ = load_model(os.path.join(stages["out"], "rm", "ckpt.pt"), kind="scalar")
    comps = load_comparisons(os.path.join(stages["out"], "rm", "comparisons.jsonl"))[:12]
    losses = {one_pass: fit_reward_model(copy.deepcopy(rm0), tok, comps,
                                         RewardConfig(lr=1e-3, epochs=1, batch_prompts=4, one_pass=one_pass), seed=0,
                                         chunk=5)
              for one_pass in (True, False)}
    assert len(losses[True]) == 3
    assert torch.allclose(torch.tensor(losses[True]), torch.tensor(losses[False]), atol=1e-5)


def test_length_sorted_rm_scores_come_back_in_the_callers_order(stages):
    """score_texts sorts rows by length into passes of `batch` rows; each score returns to its own row: batches of
    3 equal one row at a time, and reversing the input reverses the scores."""
    import os

    from nanorlhf.checkpoint import load_model
    from nanorlhf.reward import score_texts
    rm, tok, _ = load_model(os.path.join(stages["out"], "rm", "ckpt.pt"), kind="scalar")
    prompts = ["Who is Pip?", "Name a fox.", "Who is Pip?", "List two animals that live in the wood.", "Hi."]
    texts = ["Pip is a fox who lives in the old wood by the river.", "No.", "A fox.", "Pip and Bo.", "Hello there."]
    with torch.no_grad():
        alone = torch.cat([score_texts(rm, tok, [p], [t], "cpu") for p, t in zip(prompts, texts)])
        sorted_passes = score_texts(rm, tok, prompts, texts, "cpu", batch=3)
        backwards = score_texts(rm, tok, prompts[::-1], texts[::-1], "cpu", batch=3)
    assert alone.unique().numel() == 5  # distinct scores, so a misplaced one shows
    assert torch.allclose(sorted_passes, alone, atol=1e-5) and torch.allclose(backwards, alone.flip(0), atol=1e-5)


def test_rm_passes_padded_to_the_shape_multiple_score_as_unpadded():
    """pad_rows with block_size rounds a pass's width up to SHAPE_MULTIPLE (never past block_size) with masked
    columns, and the RM reads the same score at each row's true last token as on the unrounded rows."""
    from nanorlhf.reward import pad_rows, score_sequences
    rm = models()[2].eval()
    rows = [([3, 4, 5, 6, 7], 2), ([3, 4, 5], 1)]
    exact, rounded = pad_rows(rows, PAD), pad_rows(rows, PAD, block_size=MC.block_size)
    assert exact[0].shape == (2, 5) and rounded[0].shape == (2, SHAPE_MULTIPLE)
    assert rounded[1][:, 5:].sum() == 0 and rounded[2][:, 5:].sum() == 0
    assert pad_rows([([1] * 30, 1)], PAD, block_size=MC.block_size)[0].shape == (1, MC.block_size)  # 30 -> 32, not 32+
    with torch.no_grad():
        assert torch.allclose(score_sequences(rm, *exact), score_sequences(rm, *rounded), atol=1e-5)
