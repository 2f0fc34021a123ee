"""Steering by contrastive activation addition (nanorlhf/steering.py) on a tiny GPT.

The `steering` assignment's grading tests use the fused attention and no KV cache, so they need no other
assignment; the generation test (the KV-cache path) is not one of them.
"""
import dataclasses

import pytest
import torch

from nanorlhf.generate import SamplingConfig, generate
from nanorlhf.model import GPT, GPTConfig, attention_mask_4d
from nanorlhf.steering import contrastive_vector, record, steer

TINY = GPTConfig(vocab_size=64, block_size=32, n_layer=3, n_head=2, n_embd=32, attn="sdpa")


def tiny_gpt(seed=0):
    torch.manual_seed(seed)
    return GPT(dataclasses.replace(TINY)).eval()


def manual_logits(model, idx, layer, add):
    """The forward pass written out block by block, `add` (B or 1, T, C) added after block `layer`."""
    T = idx.size(1)
    tr = model.transformer
    x = tr.wte(idx) + tr.wpe(torch.arange(T)[None])
    mask = attention_mask_4d(None, 0, T, idx.device)
    for i, block in enumerate(tr.h):
        x = block(x, mask, True)
        if i == layer:
            x = x + add
    return model.lm_head(tr.ln_f(x))


@pytest.mark.parametrize("layer", [0, 2])
def test_hook_adds_exactly_multiplier_times_vector_after_the_layer_from_start(layer):
    """With start=s, the logits equal a manual forward that adds multiplier * v to the residual stream after block
    `layer` at columns >= s only (one start for the batch, then one per row)."""
    model, g = tiny_gpt(), torch.Generator().manual_seed(1)
    idx = torch.randint(0, 64, (2, 9), generator=g)
    v = torch.randn(32, generator=g)
    with torch.no_grad():
        with steer(model, layer, v, multiplier=2.5, start=4):
            got = model(idx)
        on = (torch.arange(9) >= 4).float()[None, :, None]
        torch.testing.assert_close(got, manual_logits(model, idx, layer, 2.5 * on * v), atol=1e-5, rtol=0)
        with steer(model, layer, v, multiplier=-1.0, start=torch.tensor([2, 7])):
            got = model(idx)
        on = (torch.arange(9)[None, :] >= torch.tensor([[2], [7]])).float()[..., None]
        torch.testing.assert_close(got, manual_logits(model, idx, layer, -1.0 * on * v), atol=1e-5, rtol=0)


def test_generation_is_steered_from_the_prompts_last_token():
    """start=None steers what a KV-cache generation computes from the prompt's last token on: the sampled tokens'
    log-probs equal a full manual forward that adds the vector at columns >= P - 1, and the prompt's own columns
    (and a forward without a cache) are left alone."""
    model, g = tiny_gpt(), torch.Generator().manual_seed(2)
    prompts = [torch.randint(0, 64, (5,), generator=g).tolist() for _ in range(2)]
    v = 3 * torch.randn(32, generator=g)
    with steer(model, 1, v, multiplier=1.5):
        ro = generate(model, prompts, SamplingConfig(max_new_tokens=6, greedy=True))
        with torch.no_grad():
            assert torch.equal(model(ro.tokens), tiny_gpt()(ro.tokens))  # no cache: not steered
    P = 5
    on = (torch.arange(ro.tokens.size(1)) >= P - 1).float()[None, :, None]
    with torch.no_grad():
        logits = manual_logits(model, ro.tokens, 1, 1.5 * on * v)
    lp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ro.tokens[:, 1:, None])[..., 0]   # (B, T-1)
    mask = ro.response_mask[:, 1:].bool()
    torch.testing.assert_close(ro.logprobs[:, 1:][mask], lp[mask], atol=1e-4, rtol=0)
    unsteered = generate(model, prompts, SamplingConfig(max_new_tokens=6, greedy=True))
    assert not torch.equal(unsteered.tokens, ro.tokens) or not torch.allclose(unsteered.logprobs, ro.logprobs)


def test_multiplier_zero_gives_identical_logits_and_the_hook_is_removed():
    """Multiplier 0 changes no logit (bit for bit), and after the `with` the model has no hook left."""
    model = tiny_gpt()
    idx = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        before = model(idx)
        with steer(model, 1, torch.randn(32), multiplier=0.0, start=0):
            during = model(idx)
        after = model(idx)
    assert torch.equal(before, during) and torch.equal(before, after)
    assert all(not b._forward_hooks for b in model.transformer.h)


def test_vector_is_the_mean_difference_of_the_recorded_activations():
    """record returns the residual stream after block `layer` at the asked column of each row (checked against the
    manual forward), and contrastive_vector is mean(with) - mean(without), whatever the two counts."""
    model = tiny_gpt()
    g = torch.Generator().manual_seed(4)
    idx = torch.randint(0, 64, (5, 7), generator=g)
    pos = torch.tensor([6, 3, 0, 5, 2])
    acts = record(model, 1, idx, None, pos)
    seen = {}
    h = model.transformer.h[1].register_forward_hook(lambda m, a, out: seen.__setitem__("h", out))
    with torch.no_grad():
        model(idx)
    h.remove()
    torch.testing.assert_close(acts, seen["h"][torch.arange(5), pos])
    v = contrastive_vector(acts[:2], acts[2:])
    torch.testing.assert_close(v, acts[:2].mean(0) - acts[2:].mean(0))
    with pytest.raises(ValueError, match="activations"):
        contrastive_vector(acts, acts[:, :4])
