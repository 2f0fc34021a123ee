"""Tests for nanorlhf/model.py on a tiny GPT (2 layers, width 32, vocab 64)."""

import dataclasses

import pytest
import torch

from nanorlhf.model import (GPT, GPTConfig, KVCache, ScalarHeadModel, count_params, export_gpt2_state_dict,
                            flops_per_token, import_gpt2_state_dict)

TINY = GPTConfig(vocab_size=64, block_size=32, n_layer=2, n_head=2, n_embd=32)


def tiny_gpt(seed=0, **kw):
    torch.manual_seed(seed)
    return GPT(dataclasses.replace(TINY, **kw)).eval()


def padded_batch():
    """Three prompts of lengths 5, 8, 3, left-padded to 8."""
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(1, 64, (3, 8), generator=g)
    mask = torch.ones(3, 8, dtype=torch.long)
    mask[0, :3] = 0
    mask[2, :5] = 0
    return idx, mask

# -----------------------------------------------------------------------------


def test_logits_shape_and_tied_head():
    """forward returns (B, T, V) = lm_head(hidden), and lm_head is the token table itself."""
    model = tiny_gpt()
    idx = torch.randint(0, 64, (2, 7))
    logits = model(idx)
    assert logits.shape == (2, 7, 64)
    assert model.lm_head.weight is model.transformer.wte.weight
    torch.testing.assert_close(logits, model.hidden(idx) @ model.transformer.wte.weight.t())


def test_gpt2_init_scales_residual_projections():
    """GPT-2 init: c_proj weights have std 0.02/sqrt(2*n_layer), other weights 0.02, biases 0."""
    model = GPT(GPTConfig(n_layer=8))
    h0 = model.transformer.h[0]
    assert abs(h0.mlp.c_proj.weight.std().item() - 0.02 / 4) < 5e-4
    assert abs(h0.mlp.c_fc.weight.std().item() - 0.02) < 5e-4
    assert h0.attn.c_attn.bias.abs().max() == 0


@pytest.mark.parametrize("padded", [False, True])
def test_manual_and_sdpa_agree(padded):
    """The fused sdpa path equals the readable manual path within 1e-5 (fp32), with and without padding."""
    manual, sdpa = tiny_gpt(attn="manual"), tiny_gpt(attn="sdpa")
    idx, mask = padded_batch()
    mask = mask if padded else None
    torch.testing.assert_close(sdpa(idx, mask), manual(idx, mask), atol=1e-5, rtol=0)


def test_manual_and_sdpa_agree_with_cache():
    """With a KV cache (prefill, then one token at a time) sdpa equals manual within 1e-5."""
    idx, mask = padded_batch()
    outs = []
    for attn in ("manual", "sdpa"):
        model = tiny_gpt(attn=attn)
        cache = KVCache(model.cfg, 3, 8)
        steps = [model(idx[:, :5], mask[:, :5], kv_cache=cache)]
        steps += [model(idx[:, t:t + 1], mask[:, :t + 1], kv_cache=cache) for t in range(5, 8)]
        outs.append(torch.cat(steps, dim=1))
    torch.testing.assert_close(outs[1], outs[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("attn", ["manual", "sdpa"])
def test_kv_cache_equals_full_forward(attn):
    """Feeding a padded batch chunk by chunk through the cache gives the logits of one full pass."""
    model = tiny_gpt(attn=attn)
    idx, mask = padded_batch()
    full = model(idx, mask)
    cache = KVCache(model.cfg, 3, 8)
    chunks = [model(idx[:, :4], mask[:, :4], kv_cache=cache), model(idx[:, 4:6], mask[:, :6], kv_cache=cache)]
    chunks += [model(idx[:, t:t + 1], mask[:, :t + 1], kv_cache=cache) for t in (6, 7)]
    assert cache.pos == 8
    torch.testing.assert_close(torch.cat(chunks, dim=1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("attn", ["manual", "sdpa"])
def test_left_padding_does_not_change_real_logits(attn):
    """A prompt alone and the same prompt left-padded in a batch give the same logits on its real tokens."""
    model = tiny_gpt(attn=attn)
    idx, mask = padded_batch()
    batch_logits = model(idx, mask)
    for row in range(3):
        real = mask[row].bool()
        alone = model(idx[row:row + 1, real])
        torch.testing.assert_close(batch_logits[row, real], alone[0], atol=1e-5, rtol=0)


def test_fully_padded_rows_are_finite():
    """An all-padding row (and the padded queries of any row) produce no NaN: they attend to themselves."""
    model = tiny_gpt()
    idx, mask = padded_batch()
    mask[1] = 0
    assert torch.isfinite(model(idx, mask)).all()


def test_scalar_head_from_gpt_shares_trunk_outputs():
    """ScalarHeadModel.from_gpt copies the trunk: same hidden states, one scalar per position, no shared storage."""
    gpt = tiny_gpt()
    rm = ScalarHeadModel.from_gpt(gpt).eval()
    idx, mask = padded_batch()
    torch.testing.assert_close(rm.transformer(idx, mask), gpt.hidden(idx, mask), atol=0, rtol=0)
    assert rm(idx, mask).shape == (3, 8)
    with torch.no_grad():
        rm.transformer.wte.weight.add_(1.0)  # a copy: training the RM must not move the policy
    assert not torch.equal(rm.transformer.wte.weight, gpt.transformer.wte.weight)

# -----------------------------------------------------------------------------


def test_count_params_ties_and_sums():
    """The tied lm_head is not counted twice, and embedding + non_embedding = total."""
    model = tiny_gpt()
    c = count_params(model)
    per_layer = 12 * 32 * 32 + 13 * 32  # c_attn, c_proj, c_fc, mlp.c_proj weights+biases, two LayerNorms
    assert c["embedding"] == 64 * 32 + 32 * 32  # wte + wpe
    assert c["non_embedding"] == 2 * per_layer + 2 * 32  # + ln_f
    assert c["embedding"] + c["non_embedding"] == c["total"]
    assert c["total"] == sum(p.numel() for p in set(model.parameters()))


def test_flops_per_token_by_hand():
    """flops_per_token = 6 N_nonemb + 12 L C T + 6 C V, here computed by hand for the tiny config."""
    N = 2 * (12 * 32 * 32 + 13 * 32) + 2 * 32  # = 25472
    assert N == count_params(tiny_gpt())["non_embedding"]
    assert flops_per_token(TINY, seq_len=16) == 6 * 25472 + 12 * 2 * 32 * 16 + 6 * 32 * 64 == 177408
    assert flops_per_token(TINY) == flops_per_token(TINY, seq_len=32)  # defaults to block_size

# -----------------------------------------------------------------------------


def test_gpt2_export_names_and_shapes():
    """Exported names and shapes are Hugging Face GPT-2's (Conv1D weights are (in, out))."""
    sd = export_gpt2_state_dict(tiny_gpt())
    C, V = 32, 64
    expected = {"transformer.wte.weight": (V, C), "transformer.wpe.weight": (32, C),
                "transformer.ln_f.weight": (C,), "transformer.ln_f.bias": (C,), "lm_head.weight": (V, C)}
    for i in range(2):
        h = f"transformer.h.{i}."
        expected.update({h + "ln_1.weight": (C,), h + "ln_1.bias": (C,), h + "ln_2.weight": (C,), h + "ln_2.bias": (C,),
                         h + "attn.c_attn.weight": (C, 3 * C), h + "attn.c_attn.bias": (3 * C,),
                         h + "attn.c_proj.weight": (C, C), h + "attn.c_proj.bias": (C,),
                         h + "mlp.c_fc.weight": (C, 4 * C), h + "mlp.c_fc.bias": (4 * C,),
                         h + "mlp.c_proj.weight": (4 * C, C), h + "mlp.c_proj.bias": (C,)})
    assert {k: tuple(v.shape) for k, v in sd.items()} == expected


def test_gpt2_export_import_round_trip_is_exact():
    """import(export(model)) has bit-identical weights and logits; HF's mask buffers are ignored."""
    model = tiny_gpt()
    sd = export_gpt2_state_dict(model)
    sd["transformer.h.0.attn.bias"] = torch.ones(1, 1, 32, 32)  # present in HF checkpoints
    back = import_gpt2_state_dict(sd, TINY).eval()
    for (name, a), (_, b) in zip(model.state_dict().items(), back.state_dict().items()):
        assert torch.equal(a, b), name
    assert back.lm_head.weight is back.transformer.wte.weight
    idx = torch.randint(0, 64, (2, 9))
    assert torch.equal(back(idx), model(idx))
