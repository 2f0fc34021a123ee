"""bfloat16 autocast, the fast path of the training passes, and the bfloat16 KV cache of sampling
(nanorlhf/infra/precision.py), against float32."""
import pytest
import torch
import torch.nn.functional as F

from nanorlhf.generate import SamplingConfig, generate, sequence_logprobs
from nanorlhf.infra.precision import autocast, cache_dtype, resolve_dtype
from nanorlhf.model import GPT, GPTConfig, ScalarHeadModel

CFG = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)


def test_bfloat16_logits_are_close_to_float32():
    """Under bfloat16 autocast the logits stay within bfloat16 rounding of the float32 ones."""
    torch.manual_seed(0)
    model, x = GPT(CFG).eval(), torch.randint(0, 64, (2, 16))
    with torch.no_grad():
        ref = model(x)
        with autocast("bfloat16"):
            fast = model(x).float()
    assert (fast - ref).abs().max() < 0.05 * ref.abs().max()
    with autocast("float32"), torch.no_grad():
        assert torch.equal(model(x), ref)                    # float32 is the plain path, bit for bit


def test_one_context_across_optimizer_steps_sees_the_new_weights():
    """A context held over optimiser steps must not reuse stale bfloat16 copies of the weights (autocast's cast
    cache lives until the outermost context exits; precision.autocast turns it off): after the steps, the
    training forward in the held context is the float32 forward of the new weights, not of the old ones."""
    torch.manual_seed(0)
    model, x = GPT(CFG), torch.randint(0, 64, (4, 16))
    with torch.no_grad():
        before = model(x)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    with autocast("bfloat16"):
        for _ in range(3):
            loss = F.cross_entropy(model(x).flatten(0, 1).float(), x.flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
        held = model(x).float()                         # with grad: the forward a training step makes
    with torch.no_grad():
        now = model(x)
    assert (now - before).abs().max() > 1.0             # the steps moved the logits a lot ...
    assert (held - now).abs().max() < 0.1 * (now - before).abs().max()   # ... and the held context saw it


def test_scalar_head_returns_float32_under_autocast():
    """Rewards and values come out in float32 whatever the autocast, for the differences, GAE and losses."""
    rm = ScalarHeadModel(CFG)
    with autocast("bfloat16"):
        assert rm(torch.randint(0, 64, (2, 8))).dtype == torch.float32


def test_scalar_head_is_computed_in_float32_under_autocast():
    """The head itself runs in float32 on the bfloat16 trunk's output: a bfloat16 head would round every reward to
    8 bits of mantissa, and close completions would tie (scored as wrong by the RM's accuracy)."""
    torch.manual_seed(0)
    rm, x = ScalarHeadModel(CFG).eval(), torch.randint(0, 64, (4, 8))
    with torch.no_grad(), autocast("bfloat16"):
        h, r = rm.transformer(x), rm(x)
    assert torch.equal(r, F.linear(h.float(), rm.head.weight, rm.head.bias).squeeze(-1))
    assert not torch.equal(r, r.bfloat16().float())   # not all on the bfloat16 grid


def test_unknown_dtype_is_refused():
    """A typo in --dtype fails loudly instead of silently running float32."""
    with pytest.raises(ValueError, match="bfloat16"):
        autocast("fp16")


def test_bfloat16_cache_logprobs_are_within_a_stated_tolerance():
    """Sampling with a bfloat16 KV cache records log-probs within 0.05 nats of a float32 full pass on the tokens it
    chose (a float32 cache: within 1e-5), on a model whose logits are far from uniform; the cache is really bfloat16."""
    torch.manual_seed(0)
    model = GPT(CFG).eval()
    with torch.no_grad():
        model.transformer.wte.weight.mul_(4)  # peaked distributions: log-probs from about -6 to -1.5
    prompts = [[5, 6, 7], [9], [1, 2, 3, 4, 5, 6]]
    gaps = {}
    for dt in ("float32", "bfloat16"):
        sampling = SamplingConfig(max_new_tokens=10, cache_dtype=dt)
        ro = generate(model, prompts, sampling, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            ref = sequence_logprobs(model, ro.tokens, ro.attention_mask) * ro.response_mask
        gaps[dt] = (ro.logprobs - ref).abs().max().item()
        assert ro.logprobs[ro.response_mask.bool()].max() > -2  # far from uniform (log 1/64 = -4.2)
    assert gaps["float32"] < 1e-5
    assert 1e-5 < gaps["bfloat16"] < 0.05


def test_cache_dtype_is_bfloat16_only_where_native(monkeypatch):
    """The rollouts' cache is bfloat16 only under dtype bfloat16 on hardware that runs it natively."""
    import nanorlhf.infra.precision as precision
    for native in (True, False):
        monkeypatch.setattr(precision, "fast_bfloat16", lambda device="cpu": native)
        assert cache_dtype("float32") == "float32"
        assert cache_dtype("bfloat16") == ("bfloat16" if native else "float32")


def test_auto_dtype_is_bfloat16_only_where_native(monkeypatch):
    """--dtype=auto resolves to bfloat16 only on hardware that runs it natively (emulated, it is ~7x slower than
    float32); a named dtype passes through and any other name is refused."""
    import nanorlhf.infra.precision as precision
    for native in (True, False):
        monkeypatch.setattr(precision, "fast_bfloat16", lambda device="cpu": native)
        assert resolve_dtype("auto") == ("bfloat16" if native else "float32")
        assert (resolve_dtype("float32"), resolve_dtype("bfloat16")) == ("float32", "bfloat16")
    with pytest.raises(ValueError, match="dtype"):
        resolve_dtype("float16")
