"""
Batched sampling with a KV cache, and the log-prob helpers PPO needs.

Layout of a Rollout (B rows, prompts left-padded to a common length P):

    tokens          pad pad p0  p1  p2 | s0  s1  EOS pad pad     (B, P+N)
    attention_mask   0   0   1   1   1 |  1   1   1   0   0
    response_mask    0   0   0   0   0 |  1   1   1   0   0      the positions the policy chose
    logprobs         0   0   0   0   0 | lp  lp  lp   0   0

Left padding puts every prompt's last token in column P-1, so one forward pass
predicts the next token of every row at once. The model computes positions from
the attention mask, so padding never changes a row's result.

Randomness (DEVIATION from torch.multinomial with one shared generator): each row
gets its own uniform noise u of shape (N,), drawn from a Generator seeded by
(base seed, row index) or by `row_seeds`, and step t picks the token whose CDF
interval holds u[t] (inverse-CDF sampling: the same distribution as multinomial).
A row's sample then depends only on its prompt, the model and its seed: not on
the batch size, the other rows, or the cache (tests/test_generate.py checks all
three).
"""

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from nanorlhf.infra.config import check_values
from nanorlhf.masks import token_logprobs
from nanorlhf.model import GPT, KVCache

# -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SamplingConfig:
    """How a response is drawn: its distribution, its length, and the decoding engine (the same samples either way)."""
    max_new_tokens: int = 48
    """longest response in tokens"""
    temperature: float = 1.0
    """softmax temperature of the sampling distribution"""
    top_k: int = 0
    """keep only the k most likely tokens (0: all)"""
    top_p: float = 1.0
    """keep the fewest most likely tokens whose probability reaches top_p (1: all)"""
    greedy: bool = False
    """the most likely token at every step instead of a sample (its log-prob still read at the temperature)"""
    use_cache: bool = True
    """the KV cache; False recomputes the whole prefix at every step (the naive loop the cache is tested against)"""
    cache_dtype: str = "float32"
    """the KV cache's dtype, float32 or bfloat16 (infra/precision.py cache_dtype picks it for a device)"""
    compact: bool = True
    """finished rows leave the batch and its cache (a row's sample does not depend on the others: tested)"""

    POSITIVE: ClassVar[tuple] = ("max_new_tokens", "temperature")
    NONNEGATIVE: ClassVar[tuple] = ("top_k",)
    RANGES: ClassVar[dict] = {"top_p": "(0, 1]"}
    CHOICES: ClassVar[dict] = {"cache_dtype": ("float32", "bfloat16")}

    def __post_init__(self):
        check_values(self)


MIN_PROMPT = 8  # tokens a chat prompt needs at least: the turn markers and a few words


def check_room(max_new_tokens: int, block_size: int) -> None:
    """Refuse a response length that leaves no room for a prompt in the model's context (before any sampling)."""
    if max_new_tokens > block_size - MIN_PROMPT:
        from nanorlhf.infra.config import ConfigError
        raise ConfigError(f"--max_new_tokens={max_new_tokens} leaves no room for a prompt in the model's context of "
                          f"{block_size} tokens (at most {block_size - MIN_PROMPT})")


@dataclass
class Rollout:
    tokens: torch.Tensor          # (B, P+N) long: left-padded prompts, then sampled tokens; pad_id after the stop token
    attention_mask: torch.Tensor  # (B, P+N) 1 on real prompt tokens and sampled tokens up to and including the stop token
    response_mask: torch.Tensor   # (B, P+N) 1 exactly on the sampled positions up to and including the stop token
    logprobs: torch.Tensor        # (B, P+N) float: log-prob of each sampled token under the sampling distribution; 0 elsewhere
    prompt_len: int               # P
    stop_token: int | None = None  # the stop token used, so response_texts can drop it


def left_pad(prompts, pad_id):
    """Left-pad token lists to a common length: tokens (B, P) long, mask (B, P) long."""
    assert all(len(p) > 0 for p in prompts), "empty prompt"
    P = max(len(p) for p in prompts)
    tokens = torch.full((len(prompts), P), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), P), dtype=torch.long)
    for i, p in enumerate(prompts):
        tokens[i, P - len(p):] = torch.tensor(p, dtype=torch.long)
        mask[i, P - len(p):] = 1
    return tokens, mask


def default_row_seeds(B, generator=None):
    """One seed per row, (base seed, row index), the base drawn from `generator`: what generate uses by default."""
    dev = generator.device if generator is not None else None
    base = int(torch.randint(2**31 - 1, (1,), generator=generator, device=dev))
    return [base * 1_000_003 + i for i in range(B)]


def row_noise(B, N, generator=None, row_seeds=None):
    """Uniform noise (B, N): row i comes from its own Generator, so it does not depend on B."""
    if row_seeds is None:
        row_seeds = default_row_seeds(B, generator)
    assert len(row_seeds) == B
    return torch.stack([torch.rand(N, generator=torch.Generator().manual_seed(int(s))) for s in row_seeds])


def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
    """The sampling distribution's logits (B, V): temperature, then top-k, then top-p (nucleus)."""
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        # Holtzman et al. 2019: keep the smallest set of most likely tokens whose mass reaches top_p
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = F.softmax(sorted_logits, dim=-1)
        drop = probs.cumsum(-1) - probs > top_p  # mass before this token already reaches top_p
        drop = drop.scatter(-1, order, drop)     # back to vocabulary order
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def inverse_cdf_sample(probs, u):
    """Index i with cdf[i-1] <= u * total < cdf[i], per row: probs (B, V), u (B,) -> (B,)."""
    cdf = probs.cumsum(-1)                                              # (B, V)
    idx = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True)
    return idx.squeeze(-1).clamp(max=probs.size(-1) - 1)               # never a zero-probability token

# -----------------------------------------------------------------------------


@torch.no_grad()
def generate(model: GPT, prompts: list[list[int]], sampling: SamplingConfig = SamplingConfig(), *, stop_token=None,
             pad_id=0, generator: torch.Generator | None = None, row_seeds=None, on_token=None) -> Rollout:
    """Sample up to sampling.max_new_tokens per prompt, each row ending at stop_token (kept in the response).

    greedy takes the argmax and records its log-prob under softmax(logits / temperature).
    row_seeds (one int per prompt) fixes each row's randomness whatever its batch; else a base
    seed is drawn from `generator` (default_row_seeds).
    Without the cache (use_cache=False) the whole prefix is recomputed at every step: the naive
    loop, kept as the reference the cache is tested against. on_token, if given, is called after each step with
    the (B,) tokens just written (pad for finished rows): sample.py streams an answer with it. With the cache, rows
    that have emitted the stop
    token leave the batch and its cache (compact) once a quarter of the rows still decoding have
    finished, so the forward passes stop computing on finished rows.
    """
    s = sampling
    temperature, greedy, use_cache = s.temperature, s.greedy, s.use_cache
    top_k, top_p = s.top_k or None, (s.top_p if s.top_p < 1 else None)
    device = next(model.parameters()).device
    prompt_tokens, prompt_mask = left_pad(prompts, pad_id)
    B, P = prompt_tokens.shape
    N = s.max_new_tokens
    assert P + N <= model.cfg.block_size, f"prompt {P} + {N} new tokens > block_size"
    tokens = torch.full((B, P + N), pad_id, dtype=torch.long, device=device)
    attention_mask = torch.zeros((B, P + N), dtype=torch.long, device=device)
    tokens[:, :P], attention_mask[:, :P] = prompt_tokens, prompt_mask
    response_mask = torch.zeros_like(attention_mask)
    logprobs = torch.zeros((B, P + N), device=device)
    noise = None if greedy else row_noise(B, N, generator, row_seeds).to(device)  # (B, N)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    rows = torch.arange(B, device=device)  # the rows still in the batch (finished ones leave it: compact)

    was_training = model.training
    model.eval()
    cache = KVCache(model.cfg, B, P + N, device=device, dtype=getattr(torch, s.cache_dtype)) if use_cache else None
    # prefill; the unembedding runs only where the next token is read (last_only)
    logits = model(tokens[:, :P], attention_mask[:, :P], kv_cache=cache, last_only=True)[:, -1]  # (B, V)
    for t in range(N):
        # 1. the sampling distribution, and a draw from it, for the rows in the batch (b = len(rows))
        logits = filter_logits(logits.float(), temperature, top_k, top_p)
        logp = F.log_softmax(logits, dim=-1)                                  # (b, V)
        nxt = logits.argmax(-1) if greedy else inverse_cdf_sample(logp.exp(), noise[rows, t])  # (b,)
        # 2. write it down; rows already done get pad and mask 0
        col = P + t
        alive = ~done[rows]                                                   # (b,)
        tokens[rows, col] = torch.where(alive, nxt, pad_id)
        attention_mask[rows, col] = alive.long()
        response_mask[rows, col] = alive.long()
        logprobs[rows, col] = torch.where(alive, logp.gather(-1, nxt[:, None]).squeeze(-1), 0.0)
        if stop_token is not None:
            done[rows] = ~alive | (nxt == stop_token)  # the stop token itself is part of the response
        if on_token is not None:
            on_token(tokens[:, col])
        if done.all() or t == N - 1:
            break
        # 3. next-token logits: one new position with the cache, the whole prefix without
        if use_cache:
            keep = ~done[rows]
            if s.compact and int(keep.sum()) <= 0.75 * len(rows):
                rows = rows[keep]
                cache.keep_rows(keep)
            logits = model(tokens[rows, col:col + 1], attention_mask[rows, :col + 1], kv_cache=cache)[:, -1]
        else:
            logits = model(tokens[:, :col + 1], attention_mask[:, :col + 1], last_only=True)[:, -1]
    model.train(was_training)
    return Rollout(tokens, attention_mask, response_mask, logprobs, P, stop_token)


def generate_in_length_groups(model: GPT, prompts: list[list[int]], sampling: SamplingConfig, *, group_size: int,
                              generator: torch.Generator | None = None, row_seeds=None, stop_token=None,
                              pad_id=0) -> Rollout:
    """generate() on the prompts sorted by length, `group_size` at a time, merged back in the given order.

    Left padding pads every prompt to the batch's longest, and each decode step attends over those columns
    too; prompts of similar length sampled together carry little of it. Each row's noise comes from its own
    seed, drawn as one generate() call would draw it, so the rows sample what that call samples (tested) up to
    float rounding: a matmul over fewer rows may round its last bit otherwise, and a draw that falls on a token's
    CDF boundary then picks its neighbour (in the pipeline's PPO runs, enough to move win rates within their
    noise). The rollout's prompt length P is the longest group's; the other groups' rows are left-padded to it.
    """
    B = len(prompts)
    greedy = sampling.greedy
    if not greedy and row_seeds is None:
        row_seeds = default_row_seeds(B, generator)  # the one draw a single call would make
    order = sorted(range(B), key=lambda i: len(prompts[i]))
    parts = [order[j:j + group_size] for j in range(0, B, group_size)]
    rolls = [generate(model, [prompts[i] for i in idx], sampling, stop_token=stop_token, pad_id=pad_id,
                      row_seeds=None if greedy else [row_seeds[i] for i in idx]) for idx in parts]
    P, N = max(r.prompt_len for r in rolls), sampling.max_new_tokens
    ref = rolls[0].tokens
    tokens = torch.full((B, P + N), pad_id, dtype=torch.long, device=ref.device)
    attention_mask, response_mask = torch.zeros_like(tokens), torch.zeros_like(tokens)
    logprobs = torch.zeros((B, P + N), device=ref.device)
    for idx, r in zip(parts, rolls):
        rows, shift = torch.tensor(idx, device=ref.device), P - r.prompt_len  # the group's columns move right
        for out, part in ((tokens, r.tokens), (attention_mask, r.attention_mask),
                          (response_mask, r.response_mask), (logprobs, r.logprobs)):
            out[rows, shift:] = part
    return Rollout(tokens, attention_mask, response_mask, logprobs, P, rolls[0].stop_token)

# -----------------------------------------------------------------------------


def sequence_logprobs(model, tokens, attention_mask, temperature=1.0):
    """log p(token_t | tokens_<t) at every position t (0 at t=0), one forward pass: (B, T).

    Not masked: multiply by a response_mask to keep the positions the policy chose.
    Matches Rollout.logprobs when sampling used the same temperature and no top-k/top-p.
    The alignment itself lives in masks.token_logprobs (one place for the shift).
    """
    return token_logprobs(model(tokens, attention_mask), tokens, temperature)  # (B, T)


def response_texts(rollout, tokenizer):
    """Decode each row's response positions, without the stop token."""
    texts = []
    for toks, resp in zip(rollout.tokens.tolist(), rollout.response_mask.tolist()):
        ids = [t for t, r in zip(toks, resp) if r]
        if ids and rollout.stop_token is not None and ids[-1] == rollout.stop_token:
            ids = ids[:-1]
        texts.append(tokenizer.decode(ids))
    return texts
