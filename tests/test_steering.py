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


def test_value_positions_point_at_the_last_token_where_the_twins_differ(stages):
    """evals/steering.value_positions: in each twin the column holds a token of its own value (the twins' tokens
    there differ) and every later token is shared, so a vector read there is read at the value."""
    from nanorlhf.checkpoint import load_model
    from nanorlhf.evals.steering import value_positions
    from nanorlhf.evals.sycophancy import twins
    from nanorlhf.world import build_world
    _, tok, _ = load_model(f"{stages['out']}/sft/ckpt.pt", "cpu")
    wd = build_world("tiny", 0)
    items = [it for it in wd.benchmarks["sycophancy"] if not it["belief"]["holds"]]
    pairs = twins(wd.world, items)
    (ta, ma, ca), (tb, mb, cb) = value_positions(tok, [it["text"] for it in items], [s for s, _ in pairs],
                                                 [c for _, c in pairs], 256)
    for i, (it, (syc, cor)) in enumerate(zip(items, pairs)):
        na, nb = int(ma[i].sum()), int(mb[i].sum())
        assert ta[i, ca[i]] != tb[i, cb[i]]
        assert ta[i, ca[i] + 1:na].tolist() == tb[i, cb[i] + 1:nb].tolist()
        assert tok.decode(ta[i, ca[i]:ca[i] + 1].tolist()).strip() in it["belief"]["stated"]
        assert tok.decode(tb[i, cb[i]:cb[i] + 1].tolist()).strip() in it["belief"]["true"]


def test_multiplier_adds_the_asked_fraction_of_the_residual_norm():
    """multiplier(v, norm, f) * v has length |f| * norm and the sign of f."""
    from nanorlhf.evals.steering import multiplier
    v = torch.tensor([3.0, 4.0])
    for f in (-0.5, 0.25):
        m = multiplier(v, 20.0, f)
        assert abs((m * v).norm().item() - abs(f) * 20.0) < 1e-5 and (m > 0) == (f > 0)


def test_floor_change_holds_only_within_a_small_effect():
    """floor_change: steered - unsteered per item; holds when the paired interval's low end is above -SMALL sd of
    the unsteered scores; a loss of a whole sd is not held, and neither is a gain read with the arguments swapped."""
    from nanorlhf.evals.steering import SMALL, floor_change
    g = torch.Generator().manual_seed(0)
    base = {k: torch.randn(200, generator=g).tolist() for k in ("accuracy", "gold")}
    same = floor_change(base, base)
    assert all(same[k]["held"] and same[k]["diff"] == 0 for k in same)
    assert abs(same["gold"]["margin"] + SMALL * torch.tensor(base["gold"]).std().item()) < 1e-6
    worse = {k: [x - 1.0 for x in v] for k, v in base.items()}
    assert not any(floor_change(base, worse)[k]["held"] for k in base)
    assert all(floor_change(worse, base)[k]["held"] for k in base)


def test_direction_is_believed_minus_true_at_the_value_token(stages):
    """evals/steering.direction: the mean residual at the value token of the believed twins minus that of the true
    twins (recorded by hand), and the residual norm there; swapping the twins negates the vector."""
    from nanorlhf.checkpoint import load_model
    from nanorlhf.evals.steering import direction, value_positions
    from nanorlhf.evals.sycophancy import twins
    from nanorlhf.world import build_world
    model, tok, _ = load_model(f"{stages['out']}/sft/ckpt.pt", "cpu")
    wd = build_world("tiny", 0)
    items = [it for it in wd.benchmarks["sycophancy"] if not it["belief"]["holds"]]
    prompts, pairs = [it["text"] for it in items], twins(wd.world, items)
    v, norm = direction(model.eval(), tok, 1, prompts, pairs)
    (ta, ma, ca), (tb, mb, cb) = value_positions(tok, prompts, [s for s, _ in pairs], [c for _, c in pairs],
                                                 model.cfg.block_size)
    acts = [record(model, 1, t, m, c) for t, m, c in ((ta, ma, ca), (tb, mb, cb))]
    torch.testing.assert_close(v, acts[0].mean(0) - acts[1].mean(0))
    assert abs(norm - torch.cat(acts).norm(dim=1).mean().item()) < 1e-4
    torch.testing.assert_close(direction(model, tok, 1, prompts, [(c, s) for s, c in pairs])[0], -v)
