"""
GPT-2's architecture, small. One file, read top to bottom:

1. GPTConfig, KVCache
2. CausalSelfAttention, MLP, Block (pre-LayerNorm, as GPT-2)
3. Transformer (the trunk), GPT (trunk + tied unembedding),
   ScalarHeadModel (trunk + Linear(n_embd, 1): reward model and value function)
4. count_params, flops_per_token
5. export/import in Hugging Face GPT-2 names

InstructGPT (Ouyang et al. 2022) fine-tunes GPT-3, itself a GPT-2-style decoder.
Padding: every forward takes an optional attention_mask (B, T_total), 1 on real
tokens and 0 on padding, so that left-padded batches give the same logits on
their real tokens as each prompt alone (tests/test_model.py checks this).
"""

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn as nn
import torch.nn.functional as F

from nanorlhf.infra.config import check_values

# -----------------------------------------------------------------------------


@dataclass
class GPTConfig:
    vocab_size: int = 2048
    """number of token ids (the tokenizer's vocabulary)"""
    block_size: int = 128
    """longest sequence the position table covers"""
    n_layer: int = 4
    """number of transformer blocks"""
    n_head: int = 4
    """attention heads per block; n_embd must divide by it"""
    n_embd: int = 128
    """width of the residual stream"""
    dropout: float = 0.0
    """residual/attention/embedding dropout (InstructGPT SFT uses 0.2)"""
    attn: str = "manual"
    """'manual' (readable masked softmax) or 'sdpa' (F.scaled_dot_product_attention)"""

    # values checked when a config is built (nanorlhf/infra/config.py check_values): from flags or a checkpoint
    POSITIVE: ClassVar[tuple] = ("vocab_size", "n_layer", "n_head", "n_embd")
    RANGES: ClassVar[dict] = {"block_size": "[1, 8192]", "dropout": "[0, 1)"}  # 8192: 4x GPT-3's context
    RULES: ClassVar[tuple] = ((lambda c: c.n_embd % c.n_head == 0, "--n_head={n_head} must divide --n_embd={n_embd}"),)

    def __post_init__(self):
        check_values(self)


class KVCache:
    """Keys and values of the positions seen so far, pre-allocated for max_len.

    kv is (n_layer, 2, B, nh, max_len, hs); `pos` is how many positions are filled.
    Each layer writes its new keys/values at [pos, pos+T) and reads [0, pos+T);
    GPT.hidden moves `pos` on by T once all layers have run.
    """

    def __init__(self, cfg, batch_size, max_len, device=None, dtype=torch.float32):
        hs = cfg.n_embd // cfg.n_head
        shape = (cfg.n_layer, 2, batch_size, cfg.n_head, max_len, hs)
        self.kv = torch.zeros(shape, device=device, dtype=dtype)
        self.pos = 0

    def update(self, layer, k, v):
        """Store this layer's new k, v (B, nh, T, hs) at [pos, pos+T); return all keys and values so far."""
        # BEGIN ASSIGNMENT kv_cache
        T = k.size(2)
        assert self.pos + T <= self.kv.size(4), "KV cache is full"
        self.kv[layer, 0, :, :, self.pos:self.pos + T] = k
        self.kv[layer, 1, :, :, self.pos:self.pos + T] = v
        end = self.pos + T
        return self.kv[layer, 0, :, :, :end], self.kv[layer, 1, :, :, :end]  # (B, nh, end, hs)
        # END ASSIGNMENT kv_cache

    def keep_rows(self, keep):
        """Drop the batch rows where `keep` (B,) bool is False; copies only the filled positions."""
        L, two, _, nh, max_len, hs = self.kv.shape
        kv = torch.empty((L, two, int(keep.sum()), nh, max_len, hs), device=self.kv.device, dtype=self.kv.dtype)
        kv[:, :, :, :, :self.pos] = self.kv[:, :, keep, :, :self.pos]
        self.kv = kv

# -----------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):

    def __init__(self, cfg, layer_idx):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        assert cfg.attn in ("manual", "sdpa"), cfg.attn
        self.cfg, self.layer_idx = cfg, layer_idx
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)  # q, k, v for all heads in one matmul
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.resid_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x, mask, causal_only, kv_cache=None):
        # mask: (B or 1, 1, T, T_total) bool, True where query t may attend key s
        B, T, C = x.size()
        nh, hs = self.cfg.n_head, C // self.cfg.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)                                 # 3 x (B, T, C)
        q, k, v = [t.view(B, T, nh, hs).transpose(1, 2) for t in (q, k, v)]      # (B, nh, T, hs)
        if kv_cache is not None:
            k, v = kv_cache.update(self.layer_idx, k, v)                         # (B, nh, T_total, hs)
            q = q.to(k.dtype)  # a bfloat16 cache: attention reads half the bytes (decoding is bound by them)
        # sampling with the KV cache (itself a fast path, tested against the naive loop) always takes the fused
        # kernel: decode steps of a few rows are bound by op overhead, which the fused kernel cuts
        if self.cfg.attn == "manual" and kv_cache is None:
            # BEGIN ASSIGNMENT attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))              # (B, nh, T, T)
            att = att.masked_fill(~mask, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v                                                          # (B, nh, T, hs)
            # END ASSIGNMENT attention
        else:  # fused kernel; is_causal only when the mask is exactly causal
            p = self.cfg.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None if causal_only else mask,
                                               dropout_p=p, is_causal=causal_only)
        y = y.to(x.dtype).transpose(1, 2).contiguous().view(B, T, C)             # (B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):

    def __init__(self, cfg):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        # DEVIATION: GPT-2 uses GELU's tanh approximation; the exact (erf) GELU here, as nanoGPT's, since on CPUs
        # the tanh kernel runs 3-5x slower (it was 19% of a PPO update); the two differ by under 1e-3 (HF: "gelu")
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):

    def __init__(self, cfg, layer_idx):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg, layer_idx)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x, mask, causal_only, kv_cache=None):
        x = x + self.attn(self.ln_1(x), mask, causal_only, kv_cache)  # GPT-2: pre-LayerNorm residual blocks
        x = x + self.mlp(self.ln_2(x))
        return x

# -----------------------------------------------------------------------------


def attention_mask_4d(attention_mask, past, T, device):
    """Boolean mask (B or 1, 1, T, past+T): causal, minus padded keys.

    A padded query would then see no key at all and its softmax would be 0/0 = NaN,
    so every query may always attend to itself; real queries never look at padding.
    """
    q_pos = torch.arange(past, past + T, device=device)[:, None]  # (T, 1) absolute positions
    k_pos = torch.arange(past + T, device=device)[None, :]        # (1, T_total)
    mask = k_pos <= q_pos                                         # (T, T_total) causal
    if attention_mask is not None:
        real_key = attention_mask.bool()[:, None, :]              # (B, 1, T_total)
        mask = (mask & real_key) | (k_pos == q_pos)               # (B, T, T_total)
        return mask[:, None]                                      # (B, 1, T, T_total)
    return mask[None, None]                                       # (1, 1, T, T_total)


class Transformer(nn.Module):
    """The trunk shared by GPT and ScalarHeadModel: embeddings, blocks, final LayerNorm."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)  # GPT-2: learned positions
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList([Block(cfg, i) for i in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)

    def forward(self, idx, attention_mask=None, kv_cache=None):
        B, T = idx.size()
        past = kv_cache.pos if kv_cache is not None else 0
        assert past + T <= self.cfg.block_size, f"sequence {past + T} > block_size {self.cfg.block_size}"
        if attention_mask is None:
            pos = torch.arange(past, past + T, device=idx.device)[None]        # (1, T)
        else:
            assert attention_mask.shape == (B, past + T), "attention_mask covers the cache and the chunk"
            # a left-padded prompt starts at position 0, as it would alone
            pos = (attention_mask.long().cumsum(1) - 1).clamp(min=0)[:, past:]  # (B, T)
        causal_only = attention_mask is None and kv_cache is None
        mask = attention_mask_4d(attention_mask, past, T, idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))                            # (B, T, C)
        for block in self.h:
            x = block(x, mask, causal_only, kv_cache)
        if kv_cache is not None:
            kv_cache.pos += T
        return self.ln_f(x)                                                     # (B, T, C)


def _init_weights(model, n_layer):
    # GPT-2 init: N(0, 0.02) everywhere, residual projections scaled by 1/sqrt(2 * n_layer)
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            nn.init.zeros_(p)
        elif "ln_" in name:
            nn.init.ones_(p)
        elif name.endswith("c_proj.weight"):
            nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))
        else:
            nn.init.normal_(p, mean=0.0, std=0.02)


class GPT(nn.Module):

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.transformer = Transformer(cfg)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # GPT-2 ties the unembedding to wte
        _init_weights(self, cfg.n_layer)

    def hidden(self, idx, attention_mask=None, kv_cache=None):
        return self.transformer(idx, attention_mask, kv_cache)  # (B, T, C)

    def forward(self, idx, attention_mask=None, kv_cache=None, last_only=False):
        h = self.hidden(idx, attention_mask, kv_cache)                   # (B, T, C)
        return self.lm_head(h[:, -1:] if last_only else h)               # (B, T, V), or (B, 1, V) when last_only


class ScalarHeadModel(nn.Module):
    """GPT trunk with Linear(n_embd, 1) in place of the unembedding: one scalar per position.

    InstructGPT §3.5: the reward model is the SFT model with the final unembedding
    layer removed, outputting a scalar; the PPO value function starts from the RM.
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.transformer = Transformer(cfg)
        self.head = nn.Linear(cfg.n_embd, 1)
        _init_weights(self, cfg.n_layer)
        # lm-human-preferences: scalar head ~ N(0, 1/sqrt(n_embd + 1)), bias 0
        nn.init.normal_(self.head.weight, std=1 / math.sqrt(cfg.n_embd + 1))

    @classmethod
    def from_gpt(cls, gpt: GPT):
        model = cls(gpt.cfg)
        model.transformer.load_state_dict(gpt.transformer.state_dict())  # copies, shares nothing
        return model

    def forward(self, idx, attention_mask=None):
        # the head in float32 even under bfloat16 autocast: rewards and values feed differences, GAE and the
        # losses, and a bfloat16 output (8 bits of mantissa) ties close completions (measured: RM accuracy -0.8 pt)
        h = self.transformer(idx, attention_mask)
        with torch.autocast(h.device.type, enabled=False):
            return self.head(h.float()).squeeze(-1)  # (B, T)

# -----------------------------------------------------------------------------


def count_params(model):
    """Parameter counts; embeddings are the token + position tables (tied lm_head counted once)."""
    total = sum(p.numel() for p in model.parameters())  # .parameters() yields a tied tensor once
    t = model.transformer
    embedding = t.wte.weight.numel() + t.wpe.weight.numel()
    return dict(total=total, embedding=embedding, non_embedding=total - embedding)


def flops_per_token(cfg, seq_len=None, unembedding=True):
    """Training FLOPs per token (forward + backward), as in PaLM appendix B / nanoGPT estimate_mfu:

        6 * N  +  12 * n_layer * n_embd * T  +  6 * n_embd * vocab_size

    N = non-embedding parameters = n_layer * (12 C^2 + 13 C) + 2 C (each weight does a
    multiply-add (2 FLOPs) forward and twice that backward, hence 6); the attention
    scores q.k and the weighted sum att.v add 2 * 2 * T * C per layer forward (x3 with
    backward: 12 L C T, counting the full T x T square as PaLM does); the tied lm_head
    is a matmul too (6 C V) although its weight is counted as an embedding; unembedding=False
    leaves it out (the trunk alone: a scalar-head model, or positions whose logits are not computed).
    """
    T = seq_len or cfg.block_size
    L, C = cfg.n_layer, cfg.n_embd
    n_nonembedding = L * (12 * C * C + 13 * C) + 2 * C
    return 6 * n_nonembedding + 12 * L * C * T + (6 * C * cfg.vocab_size if unembedding else 0)

# -----------------------------------------------------------------------------
# Hugging Face GPT-2 names. HF stores Conv1D weights as (in, out); nn.Linear is (out, in).

_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def export_gpt2_state_dict(model: GPT):
    return conv1d_layout(model.state_dict())  # names already match, e.g. transformer.h.0.ln_1.weight


def conv1d_layout(sd: dict) -> dict:
    """Copies of a state dict's tensors, the Conv1D weights transposed to HF's (in, out)."""
    return {name: p.detach().t().contiguous() if name.endswith(_CONV1D) else p.detach().clone()
            for name, p in sd.items()}


def import_gpt2_state_dict(sd, cfg):
    model = GPT(cfg)
    ours = {}
    for name, p in sd.items():
        if name.endswith((".attn.bias", ".attn.masked_bias")):  # HF's causal-mask buffers, not weights
            continue
        ours[name] = p.t() if name.endswith(_CONV1D) else p
    ours.setdefault("lm_head.weight", ours["transformer.wte.weight"])
    model.load_state_dict(ours, strict=True)
    return model
