"""Tests for nanorlhf/generate.py: cache vs naive loop, logprobs, batch independence, masks."""

import dataclasses

import pytest
import torch
import torch.nn as nn

from nanorlhf.generate import SamplingConfig as S
from nanorlhf.generate import filter_logits, generate, inverse_cdf_sample, response_texts, sequence_logprobs
from nanorlhf.masks import last_token_index
from nanorlhf.model import GPT, GPTConfig

TINY = GPTConfig(vocab_size=64, block_size=48, n_layer=2, n_head=2, n_embd=32)
PROMPTS = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14, 15, 16, 17, 18, 19]]  # mixed lengths


def tiny_gpt(seed=0, **kw):
    torch.manual_seed(seed)
    return GPT(dataclasses.replace(TINY, **kw)).eval()


def seeded(seed):
    return torch.Generator().manual_seed(seed)


def a_stop_token(model, seed, **kw):
    """A stop token that row 0 will sample at step 5 or earlier (same seed, same noise), so rows stop unevenly."""
    free = generate(model, PROMPTS, S(max_new_tokens=20, **kw), generator=seeded(seed))
    return free.tokens[0, free.prompt_len + 5].item()


class CountingModel(nn.Module):
    """A mock policy that always says 'last token + 1' with certainty (logit 100), and counts its calls."""

    def __init__(self):
        super().__init__()
        self.cfg = TINY
        self.dummy = nn.Parameter(torch.zeros(1))  # so generate can find the device
        self.calls = 0

    def forward(self, idx, attention_mask=None, kv_cache=None, last_only=False):
        self.calls += 1
        if kv_cache is not None:
            kv_cache.pos += idx.size(1)
        out = 100.0 * nn.functional.one_hot((idx + 1) % 64, 64).float()  # (B, T, V)
        return out[:, -1:] if last_only else out

# -----------------------------------------------------------------------------


@pytest.mark.parametrize("attn", ["manual", "sdpa"])
@pytest.mark.parametrize("greedy", [True, False])
def test_cache_and_naive_loop_give_identical_tokens(attn, greedy):
    """KV-cache generation equals the full-recompute loop (tokens, masks; logprobs to 1e-5), greedy and seeded."""
    model = tiny_gpt(attn=attn)
    stop = a_stop_token(model, 0, greedy=greedy)
    fast = generate(model, PROMPTS, S(max_new_tokens=20, greedy=greedy, use_cache=True), stop_token=stop,
                    generator=seeded(0))
    slow = generate(model, PROMPTS, S(max_new_tokens=20, greedy=greedy, use_cache=False), stop_token=stop,
                    generator=seeded(0))
    assert fast.response_mask[0].sum() <= 6  # row 0 stopped early
    assert torch.equal(fast.tokens, slow.tokens)
    assert torch.equal(fast.attention_mask, slow.attention_mask)
    assert torch.equal(fast.response_mask, slow.response_mask)
    torch.testing.assert_close(fast.logprobs, slow.logprobs, atol=1e-5, rtol=0)


def test_finished_rows_leave_the_batch_and_change_nothing():
    """compact=True drops stopped rows from the decode passes (the batch shrinks) and gives the same tokens, masks
    and log-probs as decoding every row to the end."""
    model = tiny_gpt()
    stop = a_stop_token(model, 0)
    sizes = []
    hook = model.transformer.h[0].register_forward_hook(lambda mod, args, out: sizes.append(out.size(0)))
    fast = generate(model, PROMPTS, S(max_new_tokens=20, compact=True), stop_token=stop, generator=seeded(0))
    hook.remove()
    full = generate(model, PROMPTS, S(max_new_tokens=20, compact=False), stop_token=stop, generator=seeded(0))
    assert sizes[0] == 3 and min(sizes) < 3  # prefill of 3 rows, then decode passes without the stopped row
    assert full.response_mask[0].sum() < full.response_mask.sum(1).max()  # it did stop first
    for a, b in ((fast.tokens, full.tokens), (fast.attention_mask, full.attention_mask),
                 (fast.response_mask, full.response_mask)):
        assert torch.equal(a, b)
    torch.testing.assert_close(fast.logprobs, full.logprobs, atol=1e-6, rtol=0)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_rollout_logprobs_equal_a_fresh_forward_pass(temperature):
    """Logprobs recorded while sampling equal sequence_logprobs of the finished rows (same temperature), 1e-5."""
    model = tiny_gpt()
    stop = a_stop_token(model, 1, temperature=temperature)
    roll = generate(model, PROMPTS, S(max_new_tokens=20, temperature=temperature), stop_token=stop, generator=seeded(1))
    assert roll.response_mask.sum(1).tolist()[0] <= 6 < roll.response_mask.sum(1).max()  # uneven lengths
    again = sequence_logprobs(model, roll.tokens, roll.attention_mask, temperature=temperature)
    torch.testing.assert_close(again * roll.response_mask, roll.logprobs, atol=1e-5, rtol=0)
    assert (roll.logprobs[roll.response_mask == 0] == 0).all()


def test_sample_independent_of_batch_and_position():
    """A prompt's sample is the same alone, in a batch of 3, and at another position (same row seed)."""
    model = tiny_gpt()
    kw = dict(sampling=S(max_new_tokens=16), stop_token=a_stop_token(model, 0))
    batch = generate(model, PROMPTS, row_seeds=[7, 8, 9], **kw)
    moved = generate(model, PROMPTS[::-1], row_seeds=[9, 8, 7], **kw)
    for i, p in enumerate(PROMPTS):
        alone = generate(model, [p], row_seeds=[7 + i], **kw)
        P = batch.prompt_len
        assert alone.tokens[0, len(p):].tolist() == batch.tokens[i, P:].tolist()
        assert moved.tokens[2 - i, P:].tolist() == batch.tokens[i, P:].tolist()
        torch.testing.assert_close(alone.logprobs[0, len(p):], batch.logprobs[i, P:], atol=1e-5, rtol=0)
    # without row_seeds, row i's noise comes from (generator's base seed, i): row 0 alone = row 0 in a batch
    alone = generate(model, PROMPTS[:1], generator=seeded(3), **kw)
    batch = generate(model, PROMPTS, generator=seeded(3), **kw)
    assert alone.tokens[0].tolist() == batch.tokens[0, -alone.tokens.size(1):].tolist()


def test_seeds_change_samples():
    """Different generator seeds give different samples (the noise is really used)."""
    model = tiny_gpt()
    a = generate(model, PROMPTS, S(max_new_tokens=16), generator=seeded(0))
    b = generate(model, PROMPTS, S(max_new_tokens=16), generator=seeded(1))
    assert not torch.equal(a.tokens, b.tokens)

# -----------------------------------------------------------------------------


@pytest.mark.parametrize("use_cache", [True, False])
def test_masks_token_by_token(use_cache):
    """response_mask is 1 exactly on sampled positions up to and including the stop token; pad after it."""
    # the mock answers last+1: [1,2] -> 3 4 5(stop); [3] -> 4 5(stop); [4,5,6] -> 7 8 9 10 (no stop)
    roll = generate(CountingModel(), [[1, 2], [3], [4, 5, 6]], S(max_new_tokens=4, use_cache=use_cache), stop_token=5,
                    pad_id=0)
    assert roll.prompt_len == 3
    assert roll.tokens.tolist() == [[0, 1, 2, 3, 4, 5, 0],
                                    [0, 0, 3, 4, 5, 0, 0],
                                    [4, 5, 6, 7, 8, 9, 10]]
    assert roll.attention_mask.tolist() == [[0, 1, 1, 1, 1, 1, 0],
                                            [0, 0, 1, 1, 1, 0, 0],
                                            [1, 1, 1, 1, 1, 1, 1]]
    assert roll.response_mask.tolist() == [[0, 0, 0, 1, 1, 1, 0],
                                           [0, 0, 0, 1, 1, 0, 0],
                                           [0, 0, 0, 1, 1, 1, 1]]
    assert (roll.logprobs.abs() < 1e-6).all()  # every choice was certain
    assert last_token_index(roll.response_mask).tolist() == [5, 4, 6]  # where the reward is read


def test_loop_stops_when_all_rows_are_done():
    """Once every row has emitted the stop token, no further forward passes run."""
    model = CountingModel()
    roll = generate(model, [[1, 2], [3]], S(max_new_tokens=10), stop_token=5)
    assert model.calls == 3  # prefill (-> 3 / 4), step (-> 4 / 5), step (-> 5): done
    assert roll.tokens.shape == (2, 2 + 10) and roll.response_mask.sum().item() == 3 + 2


def test_response_texts_drop_the_stop_token():
    """response_texts decodes only response positions and leaves out the stop token."""
    roll = generate(CountingModel(), [[1, 2], [4, 5, 6]], S(max_new_tokens=4), stop_token=5)

    class Tok:
        def decode(self, ids):
            return " ".join(map(str, ids))

    assert response_texts(roll, Tok()) == ["3 4", "7 8 9 10"]

# -----------------------------------------------------------------------------


def test_inverse_cdf_sampling_by_hand():
    """Inverse-CDF picks the token whose CDF interval holds u, and never a zero-probability token."""
    probs = torch.tensor([[0.2, 0.0, 0.8]]).repeat(4, 1)
    u = torch.tensor([0.0, 0.19, 0.2, 0.999])
    assert inverse_cdf_sample(probs, u).tolist() == [0, 0, 2, 2]


def test_top_k_and_top_p_filters():
    """top-k keeps the k largest logits; top-p keeps the smallest head whose mass reaches p."""
    logits = torch.tensor([[0.5, 0.3, 0.2, 0.0]]).log()  # probs 0.5, 0.3, 0.2, 0
    keep = lambda x: torch.isfinite(x)[0].tolist()
    assert keep(filter_logits(logits, top_k=2)) == [True, True, False, False]
    assert keep(filter_logits(logits, top_p=0.6)) == [True, True, False, False]
    assert keep(filter_logits(logits, top_p=0.45)) == [True, False, False, False]
    assert keep(filter_logits(logits, top_p=0.9)) == [True, True, True, False]


def test_top_k_one_samples_the_argmax_with_logprob_zero():
    """With top_k=1 the sampling distribution is a point mass: greedy tokens, logprob 0."""
    model = tiny_gpt()
    greedy = generate(model, PROMPTS, S(max_new_tokens=12, greedy=True))
    topk = generate(model, PROMPTS, S(max_new_tokens=12, top_k=1), generator=seeded(0))
    assert torch.equal(greedy.tokens, topk.tokens)
    assert (topk.logprobs == 0).all()


def test_bench_runs_on_tiny(tmp_path):
    """python -m experiments.bench --preset=tiny runs end to end and writes the JSON keys with finite, positive
    figures, each fast path measured beside its plain reference."""
    import json

    from experiments.bench import BenchConfig, main
    from nanorlhf.infra.config import parse_config
    path = tmp_path / "bench.json"
    out = main(parse_config(BenchConfig, ["--preset=tiny", f"--json={path}"]))
    keys = ("ppo_episodes_per_s", "ppo_speedup_vs_plain", "gen_tokens_per_s", "gen_speedup_vs_no_cache",
            "rm_speedup_vs_plain", "train_tokens_per_s", "train_mfu", "grpo_episodes_per_s", "grpo_speedup_vs_ppo")
    assert json.loads(path.read_text()).keys() >= set(keys) | {"dtype", "cpu"}
    assert all(out[k] > 0 and out[k] == out[k] for k in keys) and out["dtype"] in ("float32", "bfloat16")


def test_speed_probe_measures_without_moving_the_run_s_random_stream():
    """The pipeline's speed probe (a 1m-shape training step) gives a positive tokens/s and leaves torch's global
    RNG where it was: a run with the probe draws the same samples as one without."""
    from nanorlhf.evals.report import speed_probe
    torch.manual_seed(5)
    want = torch.rand(3)
    torch.manual_seed(5)
    tokens_per_s = speed_probe("cpu", "float32")
    assert torch.equal(torch.rand(3), want)
    assert tokens_per_s > 0


def test_length_groups_sample_what_one_batch_samples_and_draw_the_generator_alike():
    """generate_in_length_groups (PPO's rollouts): prompts sorted by length and sampled two at a time, merged back
    in the given order, give the one-batch call's tokens and masks exactly and its log-probs to float rounding,
    at the same common prompt length; both leave the generator in the same state. Groups of one row and one
    group of all rows do too, and greedy decoding (no noise drawn) as well."""
    from nanorlhf.generate import generate_in_length_groups
    model = tiny_gpt()
    prompts = PROMPTS + [[20, 21, 22], [23] * 9, [24]]
    stop = a_stop_token(model, 3)
    for size in (1, 2, len(prompts)):
        for greedy in (False, True):
            g1, g2 = seeded(3), seeded(3)
            s = S(max_new_tokens=12, greedy=greedy)
            one = generate(model, prompts, s, stop_token=stop, generator=g1)
            grouped = generate_in_length_groups(model, prompts, s, group_size=size, stop_token=stop, generator=g2)
            assert grouped.prompt_len == one.prompt_len
            for k in ("tokens", "attention_mask", "response_mask"):
                assert torch.equal(getattr(grouped, k), getattr(one, k)), (size, greedy, k)
            assert torch.allclose(grouped.logprobs, one.logprobs, atol=1e-5)
            assert torch.equal(torch.rand(3, generator=g1), torch.rand(3, generator=g2))
            if not greedy:  # some rows stopped early and some did not: compaction ran inside the groups
                assert (one.response_mask.sum(1) < 12).any() and (one.response_mask.sum(1) == 12).any()


def test_ppo_samples_the_same_episodes_in_length_groups_as_in_one_batch():
    """rollout.sample_episodes: group_by_length (groups of minibatch_size) changes how the batch is decoded,
    not what it samples; the whole batch at once is the plain path's."""
    from nanorlhf.ppo import PPOConfig
    from nanorlhf.rollout import sample_episodes
    model, prompts = tiny_gpt(), PROMPTS + [[20, 21, 22], [23] * 9]
    runs = [sample_episodes(model, prompts, PPOConfig(batch_size=5, minibatch_size=2, max_new_tokens=10,
                                                      group_by_length=g), seeded(4), stop_token=7)
            for g in (True, False)]
    assert torch.equal(runs[0].tokens, runs[1].tokens) and torch.equal(runs[0].response_mask, runs[1].response_mask)
