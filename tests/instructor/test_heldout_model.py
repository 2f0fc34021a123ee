"""Held-out grading tests of the model-side assignments (bpe_merge, attention, kv_cache, response_mask, steering):
not in the handout. Cases are drawn from the grading seed (drawn.py) and compared with references written here:
dropout in training mode under a fixed seed, drawn padding and chunkings, drawn steering starts, and start=None
through a KV-cache generation (on a cache of this file's own, so the kv_cache assignment is not needed).
"""
import dataclasses
import math
from collections import Counter

import torch
import torch.nn.functional as F

from drawn import SEED, close, generator, rng
from nanorlhf.model import GPT, CausalSelfAttention, GPTConfig, KVCache, attention_mask_4d
from nanorlhf.sft import collate
from nanorlhf.steering import steer
from nanorlhf.tokenizer import _merge_word, gpt2_pretokenizer, make_corpus, train_bpe

TINY = GPTConfig(vocab_size=64, block_size=32, n_layer=3, n_head=2, n_embd=32, attn="sdpa")


def tiny_gpt(seed=0, **kw):
    torch.manual_seed(seed)
    return GPT(dataclasses.replace(TINY, **kw)).eval()


# -----------------------------------------------------------------------------
# bpe_merge


def test_bpe_merge_on_drawn_words_equals_the_reference():
    """Drawn words over a 3-token alphabet (runs and repeats likely) and drawn pairs, equal pairs included: the
    merge equals a left-to-right, non-overlapping scan, returns a new list and leaves the word unchanged."""
    r = rng(10)
    for _ in range(300):
        word = [r.randint(0, 2) for _ in range(r.randint(0, 12))]
        pair, before = (r.randint(0, 2), r.randint(0, 2)), list(word)
        want, i = [], 0
        while i < len(word):
            if tuple(word[i:i + 2]) == pair:
                want, i = want + [300], i + 2
            else:
                want, i = want + [word[i]], i + 1
        got = _merge_word(word, pair, 300)
        assert got == want and word == before, (
            f"_merge_word({before}, {pair}, 300) gave {got}, the reference {want} (held-out case, seed {SEED})")


def naive_bpe(text, n_merges):
    """Reference trainer: recount every pair over every word at each merge."""
    freqs = Counter(gpt2_pretokenizer().findall(text))
    words = {tuple(w.encode()): f for w, f in freqs.items()}
    vocab = [bytes([b]) for b in range(256)]
    ids = {b: i for i, b in enumerate(vocab)}
    while len(vocab) < 256 + n_merges:
        counts = Counter()
        for w, f in words.items():
            for p in zip(w, w[1:]):
                counts[p] += f
        if not counts:
            break
        pair = min(counts, key=lambda p: (-counts[p], p))  # max count, then smallest ids
        merged = vocab[pair[0]] + vocab[pair[1]]
        if merged not in ids:
            ids[merged] = len(vocab)
            vocab.append(merged)
        new = {}
        for w, f in words.items():
            out, i = [], 0
            while i < len(w):
                if w[i:i + 2] == pair:
                    out.append(ids[merged])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] = new.get(tuple(out), 0) + f
        words = new
    return ids


def test_incremental_trainer_matches_naive_reference():
    """Incremental counts + lazy heap, with the student's merge step, pick exactly the merges a full recount picks."""
    text = "The quick brown fox jumps over the lazy dog, 1,234 times.\n" * 20 + make_corpus(20_000, n_made_up=300,
                                                                                          seed=1)
    assert train_bpe(text, 300) == naive_bpe(text, 300)


# -----------------------------------------------------------------------------
# attention


def hand_attention(q, k, v, mask):
    """softmax(q k^T / sqrt(hs)) v for one head, with plain Python floats: lists (T, hs), mask[t][s] bool."""
    out = []
    for t, qt in enumerate(q):
        scores = [sum(a * b for a, b in zip(qt, ks)) / math.sqrt(len(qt)) for ks in k]
        weights = [math.exp(sc) if mask[t][s] else 0.0 for s, sc in enumerate(scores)]
        total = sum(weights)
        out.append([sum(w * vs[i] for w, vs in zip(weights, v)) / total for i in range(len(v[0]))])
    return out


def no_fused_kernel(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the manual path must not call scaled_dot_product_attention")
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", refuse)


def test_manual_attention_equals_hand_computation(monkeypatch):
    """The manual path against softmax(q k^T / sqrt(hs)) v written out with floats, 2 heads, a left-padded row
    (its padded query sees only itself), the fused kernel unavailable: scale, mask, softmax axis and heads pinned."""
    no_fused_kernel(monkeypatch)
    cfg = dataclasses.replace(TINY, n_embd=4, n_head=2, attn="manual", dropout=0.0)
    attn = CausalSelfAttention(cfg, 0).eval()
    with torch.no_grad():  # q = x, k = x scaled per channel, v = x + 1; c_proj the identity
        attn.c_attn.weight.copy_(torch.cat([torch.eye(4), torch.diag(torch.tensor([1.0, -1.0, 2.0, 0.5])),
                                            torch.eye(4)]))
        attn.c_attn.bias.copy_(torch.cat([torch.zeros(8), torch.ones(4)]))
        attn.c_proj.weight.copy_(torch.eye(4))
        attn.c_proj.bias.zero_()
    x = torch.tensor([[[0.5, -1.0, 2.0, 0.0], [1.0, 0.5, -0.5, 1.5], [-1.5, 2.0, 0.5, -1.0]]] * 2)
    x[1] = x[1].flip(0)
    # row 1 is left-padded: key 0 is padding, and its padded query sees only itself
    mask = torch.tensor([[[1, 0, 0], [1, 1, 0], [1, 1, 1]], [[1, 0, 0], [0, 1, 0], [0, 1, 1]]]).bool()
    with torch.no_grad():
        y = attn(x, mask.unsqueeze(1), causal_only=False)                     # (2, 3, 4)
    scale_k = [1.0, -1.0, 2.0, 0.5]
    for b in range(2):
        for h in range(2):
            cols = slice(2 * h, 2 * h + 2)
            q = x[b, :, cols].tolist()
            k = [[xi * s for xi, s in zip(row, scale_k[cols])] for row in q]
            v = [[xi + 1.0 for xi in row] for row in q]
            expected = torch.tensor(hand_attention(q, k, v, mask[b].tolist()))
            close(y[b, :, cols], expected, f"attention of row {b}, head {h}", atol=1e-5, rtol=0)


def drawn_padding_mask(r, B, T):
    """(B, 1, T, T) bool: causal, keys before each row's drawn left padding hidden, every query sees itself."""
    return attention_mask_4d(torch.tensor([[0] * (p := r.randint(0, T - 1)) + [1] * (T - p) for _ in range(B)]),
                             0, T, "cpu")


def test_attention_on_drawn_inputs_equals_hand_computation(monkeypatch):
    """Drawn weights, inputs, head sizes and left padding: each head's output equals the float computation (on
    q, k, v from c_attn), then c_proj; the fused kernel unavailable."""
    no_fused_kernel(monkeypatch)
    r, g = rng(11), generator(11)
    for _ in range(3):
        hs, B, T = r.randint(2, 3), r.randint(2, 3), r.randint(3, 6)
        attn = CausalSelfAttention(dataclasses.replace(TINY, n_embd=2 * hs, attn="manual", dropout=0.0), 0).eval()
        with torch.no_grad():
            for p in attn.parameters():
                p.copy_(torch.randn(p.shape, generator=g))
            x, mask = torch.randn(B, T, 2 * hs, generator=g), drawn_padding_mask(r, B, T)
            y = attn(x, mask, causal_only=False)
            q, k, v = attn.c_attn(x).split(2 * hs, dim=2)
            heads = torch.tensor([[hand_attention(q[b, :, h * hs:(h + 1) * hs].tolist(),
                                                  k[b, :, h * hs:(h + 1) * hs].tolist(),
                                                  v[b, :, h * hs:(h + 1) * hs].tolist(), mask[b, 0].tolist())
                                   for h in range(2)] for b in range(B)])        # (B, nh, T, hs)
            want = attn.c_proj(heads.transpose(1, 2).reshape(B, T, 2 * hs))
        close(y, want, f"attention on drawn inputs (hs {hs}, T {T})", atol=1e-4, rtol=1e-4)


def test_attention_dropout_acts_on_the_weights_in_training(monkeypatch):
    """In training mode with a drawn dropout rate, under one fixed seed, the output equals the reference that drops
    attention weights (after the softmax) and then the projected output, as GPT-2 does; it differs from eval."""
    no_fused_kernel(monkeypatch)
    r, g = rng(12), generator(12)
    p, B, T = r.uniform(0.2, 0.5), 2, r.randint(4, 7)
    torch.manual_seed(SEED)
    attn = CausalSelfAttention(dataclasses.replace(TINY, attn="manual", dropout=p), 0).train()
    x, mask = torch.randn(B, T, 32, generator=g), drawn_padding_mask(r, B, T)
    torch.manual_seed(SEED)
    got = attn(x, mask, causal_only=False)
    torch.manual_seed(SEED)
    q, k, v = (t.view(B, T, 2, 16).transpose(1, 2) for t in attn.c_attn(x).split(32, dim=2))
    att = F.softmax((q @ k.transpose(-2, -1) / math.sqrt(16)).masked_fill(~mask, float("-inf")), dim=-1)
    y = F.dropout(att, p, training=True) @ v
    want = F.dropout(attn.c_proj(y.transpose(1, 2).contiguous().view(B, T, 32)), p, training=True)
    close(got, want, f"attention in training mode (dropout {p:.2f})", atol=1e-5, rtol=1e-5)
    assert not torch.allclose(got, attn.eval()(x, mask, causal_only=False))


# -----------------------------------------------------------------------------
# kv_cache


def test_kv_cache_update_at_drawn_positions():
    """At a drawn pos and chunk length, update stores k and v at [pos, pos+T) of its layer only, returns the keys
    and values of [0, pos+T) (old and new) and leaves pos to the model."""
    r, g = rng(13), generator(13)
    for _ in range(5):
        cfg = dataclasses.replace(TINY, n_layer=2, n_embd=8, n_head=2)
        cache = KVCache(cfg, 2, 12)
        cache.kv = torch.randn(cache.kv.shape, generator=g)
        before, pos, layer = cache.kv.clone(), r.randint(0, 8), r.randint(0, 1)
        cache.pos, T = pos, r.randint(1, 12 - pos)
        k, v = torch.randn(2, 2, T, 4, generator=g), torch.randn(2, 2, T, 4, generator=g)
        got_k, got_v = cache.update(layer, k, v)
        close(got_k, torch.cat([before[layer, 0, :, :, :pos], k], dim=2), f"the keys returned at pos {pos}")
        close(got_v, torch.cat([before[layer, 1, :, :, :pos], v], dim=2), f"the values returned at pos {pos}")
        want = before.clone()
        want[layer, 0, :, :, pos:pos + T], want[layer, 1, :, :, pos:pos + T] = k, v
        close(cache.kv, want, f"the cache after an update at pos {pos} of layer {layer}")
        assert cache.pos == pos, f"update moved pos from {pos} to {cache.pos} (held-out case, seed {SEED})"


def test_kv_cache_drawn_chunks_equal_one_full_pass():
    """A drawn left-padded batch fed through the cache in drawn chunks gives the logits of one full pass."""
    r, g = rng(14), generator(14)
    model = tiny_gpt()
    for _ in range(3):
        B, T = 3, r.randint(8, 12)
        idx = torch.randint(1, 64, (B, T), generator=g)
        mask = torch.tensor([[0] * (p := r.randint(0, T - 2)) + [1] * (T - p) for _ in range(B)])
        cuts = sorted(set(r.sample(range(1, T), r.randint(1, 4)))) + [T]
        cache, chunks, start = KVCache(model.cfg, B, T), [], 0
        with torch.no_grad():
            for end in cuts:
                chunks.append(model(idx[:, start:end], mask[:, :end], kv_cache=cache))
                start = end
            close(torch.cat(chunks, dim=1), model(idx, mask), f"cached logits in chunks ending at {cuts}", atol=1e-5,
                  rtol=0)


# -----------------------------------------------------------------------------
# response_mask


def test_collate_on_drawn_examples_equals_the_reference():
    """Drawn examples (lengths, prompt lengths, pad_id): x, y, loss_mask and attention_mask equal the reference
    exactly, padding included (pad_id in both x and y), with their dtypes."""
    r = rng(15)
    for _ in range(20):
        examples = []
        for _ in range(r.randint(1, 5)):
            n = r.randint(2, 12)
            p = r.randint(1, n - 1)
            examples.append(([r.randint(0, 99) for _ in range(n)], [0] * p + [1] * (n - p)))
        pad = r.randint(100, 200)
        T = max(len(ids) for ids, _ in examples) - 1
        want = [[ids[:-1] + [pad] * (T + 1 - len(ids)) for ids, _ in examples],
                [ids[1:] + [pad] * (T + 1 - len(ids)) for ids, _ in examples],
                [m[1:] + [0] * (T + 1 - len(m)) for _, m in examples],
                [[1] * (len(ids) - 1) + [0] * (T + 1 - len(ids)) for ids, _ in examples]]
        got = collate(examples, pad)
        for name, g_, w, dtype in zip(("x", "y", "loss_mask", "attention_mask"), got, want,
                                      (torch.long, torch.long, torch.float32, torch.long)):
            assert g_.dtype == dtype and g_.tolist() == w, (
                f"collate's {name} is {g_.tolist()} ({g_.dtype}), the reference {w} ({dtype}) for pad_id {pad} "
                f"(held-out case, seed {SEED})")


# -----------------------------------------------------------------------------
# steering


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


def test_drawn_starts_steer_exactly_their_columns():
    """Drawn layers, multipliers and starts (one int, 0 and past the end included, or one per row): the logits
    equal the manual forward that adds multiplier * v after block `layer` at columns >= start only."""
    r, g = rng(16), generator(16)
    model = tiny_gpt()
    for _ in range(4):
        B, T, layer, m = 3, r.randint(4, 9), r.randint(0, 2), r.choice((-1, 1)) * r.uniform(0.5, 3)
        idx, v = torch.randint(0, 64, (B, T), generator=g), torch.randn(32, generator=g)
        for start in (r.choice((0, T, r.randint(1, T - 1))), torch.tensor([r.randint(0, T) for _ in range(B)])):
            on = (torch.arange(T)[None, :] >= torch.as_tensor(start).reshape(-1, 1)).float()[..., None]
            with torch.no_grad():
                with steer(model, layer, v, multiplier=m, start=start):
                    got = model(idx)
                close(got, manual_logits(model, idx, layer, m * on * v), f"steered logits (layer {layer}, start "
                      f"{start.tolist() if torch.is_tensor(start) else start})", atol=1e-5, rtol=0)


class ReferenceCache(KVCache):
    """The cache of these tests: KVCache with its update written here, so they need no kv_cache assignment."""

    def update(self, layer, k, v):
        end = self.pos + k.size(2)
        self.kv[layer, 0, :, :, self.pos:end], self.kv[layer, 1, :, :, self.pos:end] = k, v
        return self.kv[layer, 0, :, :, :end], self.kv[layer, 1, :, :, :end]


def test_start_none_steers_a_cached_generation_from_the_prompts_last_token():
    """start=None: a greedy KV-cache generation (prefill, then one token a step) gives the logits of a full manual
    forward that steers columns >= P - 1 (the prompt's last column on), for a drawn prompt length, layer and
    multiplier; a forward pass without a cache is left alone."""
    r, g = rng(17), generator(17)
    model = tiny_gpt()
    B, P, steps, layer = 2, r.randint(3, 6), 4, r.randint(0, 1)
    m, v = r.choice((-1, 1)) * r.uniform(1, 3), 3 * torch.randn(32, generator=g)
    prompt = torch.randint(0, 64, (B, P), generator=g)
    with torch.no_grad(), steer(model, layer, v, multiplier=m):
        close(model(prompt), tiny_gpt()(prompt), "a forward pass without a cache under start=None")
        cache = ReferenceCache(model.cfg, B, P + steps)
        logits, tokens = [model(prompt, kv_cache=cache)], prompt
        for _ in range(steps):
            nxt = logits[-1][:, -1].argmax(-1, keepdim=True)                         # (B, 1)
            tokens = torch.cat([tokens, nxt], dim=1)
            logits.append(model(nxt, kv_cache=cache))
    on = (torch.arange(P + steps) >= P - 1).float()[None, :, None]
    with torch.no_grad():
        want = manual_logits(model, tokens, layer, m * on * v)
    close(torch.cat(logits, dim=1), want, f"a cached generation steered with start=None (prompt length {P}, "
          f"layer {layer})", atol=1e-4, rtol=0)
