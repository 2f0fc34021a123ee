"""How fast are the fast paths here? Each against its plain in-project reference, interleaved, in one process.

    python -m experiments.bench --preset=1m --json=out/bench.json       # about 2 minutes on 2 CPU cores
    taskset -c 1 env OMP_NUM_THREADS=1 python -m experiments.bench --preset=1m --json=out/bench_1core.json
    python -m experiments.bench --preset=tiny                            # seconds

The bench pins nothing itself: the second line is how to measure one core alone (two torch
processes on the same cores slow each other down many times over). Pairs, timed A, B, A, B, ...
and each side's median kept, so a machine whose speed drifts moves both alike:

  training step   --dtype autocast (bfloat16 where the CPU has it)   vs  float32
  generation      the KV cache (bfloat16 where native)               vs  the whole prefix every step
                  the same cache                                     vs  a float32 cache
  PPO iteration   prompts sampled in length groups, trimmed passes,  vs  one sampling batch, full-width
                  length-grouped minibatches                             passes, random minibatches
  RM fit step     length-sorted passes of the step's completions     vs  one forward pass per prompt

The PPO iteration is the pipeline's: 128 episodes, 2 PPO epochs x 4 minibatches, policy, reference,
RM and value of the model's size, prompts and responses of the world's lengths (prompts 4-80 tokens,
about 25 on average, left-padded; responses 1-48, about 24). MFU is achieved training FLOP/s (on real
tokens: model.flops_per_token) over the measured matmul peak of the dtype in use (both peaks printed).
"""
from __future__ import annotations

import dataclasses
import json
import statistics
import time
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from nanorlhf.generate import Rollout, SamplingConfig, generate
from nanorlhf.infra.cli import run
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import write_text
from nanorlhf.infra.metrics import measure_matmul_peak
from nanorlhf.infra.optim import make_optimizer
from nanorlhf.infra.precision import autocast, cache_dtype, cpu_name, fast_bfloat16, resolve_dtype
from nanorlhf.model import GPT, GPTConfig, ScalarHeadModel, count_params, flops_per_token
from nanorlhf.recipe import Recipe


@dataclass
class BenchConfig:
    n_layer: int = 4
    "transformer blocks"
    n_head: int = 4
    "attention heads"
    n_embd: int = 128
    "residual width"
    block_size: int = 128
    "context length of the model (the pipeline's)"
    vocab_size: int = 2048
    "vocabulary size"
    attn: str = "manual"
    "attention path: manual or sdpa"
    dtype: str = "auto"
    "the fast paths' autocast: bfloat16, float32, or auto (bfloat16 where the device runs it natively)"
    CHOICES: ClassVar[dict] = {"dtype": ("auto", "float32", "bfloat16"), "attn": ("manual", "sdpa")}
    train_batch: int = 16
    "training batch size (sequences)"
    train_len: int = 128
    "training sequence length"
    gen_batch: int = 64
    "generation batch size (prompts)"
    prompt_len: int = 32
    "prompt length for generation"
    new_tokens: int = 64
    "tokens sampled per prompt"
    ppo_batch: int = Recipe.ppo_batch
    "episodes per PPO iteration (the pipeline's)"
    ppo_new_tokens: int = 48
    "longest response of the PPO iteration"
    reps: int = 3
    "timed repetitions of each side of each pair (after one warm-up)"
    json: str = ""
    "write the figures to this JSON file"
    device: str = "auto"
    "cpu, cuda or auto"
    PRESETS: ClassVar[dict] = {
        "tiny": dict(n_layer=2, n_head=2, n_embd=32, block_size=64, vocab_size=64, train_len=32, train_batch=4,
                     gen_batch=8, prompt_len=8, new_tokens=8, ppo_batch=8, ppo_new_tokens=8, reps=1),
        "1m": {},
    }


def _sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def interleaved(a, b, reps: int, device: str) -> tuple[float, float]:
    """Median seconds of a() and of b(), timed alternately after one warm-up call of each."""
    a(), b()
    times = ([], [])
    for _ in range(reps):
        for f, out in ((a, times[0]), (b, times[1])):
            _sync(device)
            t = time.perf_counter()
            f()
            _sync(device)
            out.append(time.perf_counter() - t)
    return statistics.median(times[0]), statistics.median(times[1])

# -----------------------------------------------------------------------------
# the four pairs


def bench_train(cfg: GPTConfig, b: BenchConfig, dtype: str, device: str) -> dict:
    """Training tokens/s (forward, backward, AdamW) under dtype against float32."""
    model = GPT(cfg).to(device).train()
    opt = make_optimizer(model, lr=1e-6)
    x = torch.randint(cfg.vocab_size, (b.train_batch, b.train_len + 1), generator=torch.Generator().manual_seed(0))
    x = x.to(device)

    def step(dt):
        with autocast(dt, device):
            loss = F.cross_entropy(model(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    fast, plain = interleaved(lambda: step(dtype), lambda: step("float32"), b.reps, device)
    tokens = b.train_batch * b.train_len
    return {"tokens_per_s": tokens / fast, "plain_tokens_per_s": tokens / plain,
            "flops_per_s": tokens * flops_per_token(cfg, b.train_len) / fast}


def model_config(b: BenchConfig) -> GPTConfig:
    """The benched model's shape, from the bench's flags (no dropout: the fast paths are timed as they run)."""
    return GPTConfig(**{f.name: getattr(b, f.name) for f in dataclasses.fields(GPTConfig) if f.name != "dropout"})


def bench_generate(cfg: GPTConfig, b: BenchConfig, dtype: str, device: str) -> dict:
    """New tokens/s with the KV cache (in precision.cache_dtype) against the no-cache loop, and that cache against a
    float32 one (no stop token: every row runs to the end)."""
    torch.manual_seed(0)
    model = GPT(cfg).to(device).eval()
    prompts = torch.randint(cfg.vocab_size, (b.gen_batch, b.prompt_len), generator=torch.Generator().manual_seed(0))
    kv = cache_dtype(dtype, device)

    def run(cache, kv_dtype=kv):
        sampling = SamplingConfig(max_new_tokens=b.new_tokens, use_cache=cache, cache_dtype=kv_dtype)
        generate(model, prompts.tolist(), sampling, generator=torch.Generator().manual_seed(0))

    fast, plain = interleaved(lambda: run(True), lambda: run(False), b.reps, device)
    again, f32 = interleaved(lambda: run(True), lambda: run(True, "float32"), b.reps, device)
    n = b.gen_batch * b.new_tokens
    return {"tokens_per_s": n / fast, "no_cache_tokens_per_s": n / plain, "speedup_vs_no_cache": plain / fast,
            "cache_dtype": kv, "float32_cache_tokens_per_s": n / f32,
            "speedup_vs_float32_cache": f32 / again}


def world_lengths(n: int, longest_prompt: int, longest_response: int, seed: int = 0):
    """Prompt and response lengths shaped like the world's: most prompts short, a few long; responses spread."""
    g = torch.Generator().manual_seed(seed)
    prompt = (torch.exp(torch.randn(n, generator=g) * 0.6) * 20).round().clamp(4, longest_prompt).long()
    response = torch.randint(1, longest_response + 1, (n,), generator=g)
    return prompt.tolist(), response.tolist()


def cut_responses(ro: Rollout, lengths: list[int], stop: int, pad: int) -> Rollout:
    """Row i's response ends with the stop token at its lengths[i]-th token; everything after is padding."""
    tokens, am, resp = ro.tokens.clone(), ro.attention_mask.clone(), ro.response_mask.clone()
    P = ro.prompt_len
    for i, n in enumerate(lengths):
        tokens[i, P + n - 1], tokens[i, P + n:] = stop, pad
        am[i, P + n:], resp[i, P + n:] = 0, 0
    return Rollout(tokens, am, resp, ro.logprobs * resp, P, stop)


def bench_ppo(cfg: GPTConfig, b: BenchConfig, dtype: str, device: str) -> dict:
    """Episodes/s of the pipeline's PPO iteration, trimmed and length-grouped against full width and random."""
    from nanorlhf.experience import make_experience, minibatch_loss
    from nanorlhf.packing import length_groups
    from nanorlhf.ppo import PPOConfig
    from nanorlhf.rollout import sample_episodes
    torch.manual_seed(0)
    policy, ref = GPT(cfg).to(device), GPT(cfg).to(device).eval()
    rm, value = ScalarHeadModel(cfg).to(device).eval(), ScalarHeadModel(cfg).to(device)
    opt = make_optimizer(torch.nn.ModuleList([policy, value]), lr=1e-6)
    plen, rlen = world_lengths(b.ppo_batch, cfg.block_size - b.ppo_new_tokens, b.ppo_new_tokens)
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(1, cfg.vocab_size - 1, (n,), generator=g).tolist() for n in plen]
    stop = cfg.vocab_size - 1
    times = {trim: {"generate": [], "score": [], "update": []} for trim in (True, False)}
    real_share = []

    def iteration(trim: bool):
        hp = PPOConfig(trim_padding=trim, group_by_length=trim, max_new_tokens=b.ppo_new_tokens)
        gen = torch.Generator().manual_seed(0)
        t0 = time.perf_counter()
        ro = cut_responses(sample_episodes(policy, prompts, hp, gen), rlen, stop, 0)  # float32 cache
        t1 = time.perf_counter()
        with autocast(dtype, device):
            exp = make_experience(policy, ref, rm, value, ro, rm_bias=0.0, beta=hp.beta, hp=hp)
        _sync(device)
        t2 = time.perf_counter()
        for _ in range(hp.ppo_epochs):
            groups = (length_groups(ro.attention_mask, hp.minibatch_size, gen) if hp.group_by_length
                      else torch.randperm(len(prompts), generator=gen).split(hp.minibatch_size))
            for idx in groups:
                with autocast(dtype, device):
                    loss, _ = minibatch_loss(policy, value, exp, idx, hp, None)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        _sync(device)
        t3 = time.perf_counter()
        for k, dt in zip(("generate", "score", "update"), (t1 - t0, t2 - t1, t3 - t2)):
            times[trim][k].append(dt)
        real_share.append(ro.attention_mask.float().mean().item())

    fast, plain = interleaved(lambda: iteration(True), lambda: iteration(False), b.reps, device)
    split = {f"{k}_s": statistics.median(v[1:]) for k, v in times[True].items()}
    return {"episodes_per_s": b.ppo_batch / fast, "plain_episodes_per_s": b.ppo_batch / plain,
            "speedup_vs_plain": plain / fast, "real_token_share": real_share[0], **split}


def bench_grpo(cfg: GPTConfig, b: BenchConfig, dtype: str, device: str) -> dict:
    """Episodes/s of a critic-free iteration (G = 8 a prompt, the RM's reward, no value model to score or update)
    against the PPO iteration of the same episodes, both on the fast paths, interleaved."""
    from nanorlhf.experience import make_experience, make_group_experience, minibatch_loss, pg_minibatch_loss
    from nanorlhf.generate import SamplingConfig, generate_in_length_groups
    from nanorlhf.packing import length_groups
    from nanorlhf.pg import PGConfig
    from nanorlhf.ppo import PPOConfig
    from nanorlhf.rollout import sample_episodes
    torch.manual_seed(0)
    policy, ref = GPT(cfg).to(device), GPT(cfg).to(device).eval()
    rm, value = ScalarHeadModel(cfg).to(device).eval(), ScalarHeadModel(cfg).to(device)
    opt = make_optimizer(torch.nn.ModuleList([policy, value]), lr=1e-6)
    G = 8
    plen, rlen = world_lengths(b.ppo_batch, cfg.block_size - b.ppo_new_tokens, b.ppo_new_tokens)
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(1, cfg.vocab_size - 1, (n,), generator=g).tolist() for n in plen]
    grouped = [p for p in prompts[:b.ppo_batch // G] for _ in range(G)]     # the same episodes, G a prompt
    stop = cfg.vocab_size - 1
    mb = min(32, b.ppo_batch)
    hp = PGConfig(group_size=G, prompts_per_iteration=b.ppo_batch // G, max_new_tokens=b.ppo_new_tokens,
                  minibatch_size=mb)
    php = PPOConfig(max_new_tokens=b.ppo_new_tokens, batch_size=b.ppo_batch, minibatch_size=mb)

    def update(loss_of, groups):
        for idx in groups:
            with autocast(dtype, device):
                loss, _ = loss_of(idx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    def grpo():
        gen = torch.Generator().manual_seed(0)
        ro = generate_in_length_groups(policy, grouped, SamplingConfig(max_new_tokens=b.ppo_new_tokens),
                                       group_size=hp.minibatch_size, generator=gen)
        ro = cut_responses(ro, rlen, stop, 0)
        with autocast(dtype, device):
            exp = make_group_experience(policy, ref, rm, ro, None, rm_bias=0.0, hp=hp)
        update(lambda idx: pg_minibatch_loss(policy, exp, idx, hp), length_groups(ro.attention_mask, mb, gen))
        _sync(device)

    def ppo():
        gen = torch.Generator().manual_seed(0)
        ro = cut_responses(sample_episodes(policy, grouped, php, gen), rlen, stop, 0)
        with autocast(dtype, device):
            exp = make_experience(policy, ref, rm, value, ro, rm_bias=0.0, beta=php.beta, hp=php)
        for _ in range(php.ppo_epochs):
            update(lambda idx: minibatch_loss(policy, value, exp, idx, php, None),
                   length_groups(ro.attention_mask, php.minibatch_size, gen))
        _sync(device)

    fast, plain = interleaved(grpo, ppo, b.reps, device)
    return {"episodes_per_s": b.ppo_batch / fast, "ppo_episodes_per_s": b.ppo_batch / plain, "speedup_vs_ppo": plain / fast}


class _WordTokenizer:
    """A stand-in tokenizer for the RM bench: one token per word, ids from the word's hash."""
    eot_id, user_id, assistant_id, pad_id = 0, 1, 2, 3

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def encode(self, text: str) -> list[int]:
        return [4 + sum(map(ord, w)) % (self.vocab_size - 4) for w in text.split()]


def bench_rm(cfg: GPTConfig, b: BenchConfig, dtype: str, device: str) -> dict:
    """RM fit steps/s (8 prompts, K = 4..9 each), length-sorted passes of 16 rows under dtype, against per prompt
    in float32."""
    from nanorlhf.reward import RewardConfig, fit_reward_model
    g = torch.Generator().manual_seed(2)
    plen, rlen = world_lengths(64, 40, 48, seed=3)
    words = lambda n: " ".join(f"w{int(x)}" for x in torch.randint(500, (n,), generator=g))
    comps = [{"prompt": words(p), "completions": [words(int(n)) for n in torch.randint(1, 48, (int(k),), generator=g)],
              "ranking": [[j] for j in range(int(k))]}
             for p, k in zip(plen[:16], torch.randint(4, 10, (16,), generator=g))]
    rm, tok = ScalarHeadModel(cfg).to(device), _WordTokenizer(cfg.vocab_size)

    def fit(one_pass: bool, dt: str):
        with autocast(dt, device):
            hp = RewardConfig(lr=1e-6, epochs=1, batch_prompts=8, one_pass=one_pass)
            fit_reward_model(rm, tok, comps, hp, seed=0)

    fast, plain = interleaved(lambda: fit(True, dtype), lambda: fit(False, "float32"), b.reps, device)
    steps = len(comps) // 8
    return {"steps_per_s": steps / fast, "plain_steps_per_s": steps / plain, "speedup_vs_plain": plain / fast}

# -----------------------------------------------------------------------------


def main(b: BenchConfig) -> dict:
    device = resolve_device(b.device)
    dtype = resolve_dtype(b.dtype, device)
    cfg = model_config(b)
    n = count_params(GPT(cfg))
    cpu = cpu_name()
    print(f"model: {n['total'] / 1e6:.2f}M params, attn={cfg.attn}, device={device} ({cpu}), "
          f"threads={torch.get_num_threads()}, fast paths in {dtype} (native bfloat16: {fast_bfloat16(device)})")
    peaks = {dt: measure_matmul_peak(device, dtype=dt) for dt in ("float32", "bfloat16")}
    print("matmul peak (measured): " + ", ".join(f"{k} {v / 1e9:.0f} GFLOP/s" for k, v in peaks.items()))
    train = bench_train(cfg, b, dtype, device)
    mfu = train["flops_per_s"] / peaks[dtype]
    print(f"train {b.train_batch}x{b.train_len}: {dtype} {train['tokens_per_s']:,.0f} tokens/s (MFU {mfu:.1%} of the "
          f"{dtype} peak), float32 {train['plain_tokens_per_s']:,.0f}")
    gen = bench_generate(cfg, b, dtype, device)
    print(f"generate batch {b.gen_batch}, prompt {b.prompt_len}, {b.new_tokens} new: KV cache ({gen['cache_dtype']}) "
          f"{gen['tokens_per_s']:,.0f} tokens/s, no cache {gen['no_cache_tokens_per_s']:,.0f} "
          f"({gen['speedup_vs_no_cache']:.1f}x), float32 cache {gen['float32_cache_tokens_per_s']:,.0f} "
          f"({gen['speedup_vs_float32_cache']:.2f}x)")
    ppo = bench_ppo(cfg, b, dtype, device)
    print(f"PPO iteration, {b.ppo_batch} episodes ({ppo['real_token_share']:.0%} of positions real): trimmed "
          f"{ppo['episodes_per_s']:.1f} episodes/s (generate {ppo['generate_s']:.2f}s, score {ppo['score_s']:.2f}s, "
          f"update {ppo['update_s']:.2f}s), full width {ppo['plain_episodes_per_s']:.1f} ({ppo['speedup_vs_plain']:.2f}x)")
    grpo = bench_grpo(cfg, b, dtype, device)
    print(f"critic-free iteration (GRPO, G = 8), the same {b.ppo_batch} episodes: {grpo['episodes_per_s']:.1f} "
          f"episodes/s against PPO's {grpo['ppo_episodes_per_s']:.1f} ({grpo['speedup_vs_ppo']:.2f}x)")
    rm = bench_rm(cfg, b, dtype, device)
    print(f"RM fit, 8 prompts a step: sorted passes {rm['steps_per_s']:.2f} steps/s, per prompt in float32 "
          f"{rm['plain_steps_per_s']:.2f} ({rm['speedup_vs_plain']:.2f}x)")
    out = {"ppo_episodes_per_s": ppo["episodes_per_s"], "ppo_speedup_vs_plain": ppo["speedup_vs_plain"],
           "gen_tokens_per_s": gen["tokens_per_s"], "gen_speedup_vs_no_cache": gen["speedup_vs_no_cache"],
           "rm_speedup_vs_plain": rm["speedup_vs_plain"], "train_tokens_per_s": train["tokens_per_s"],
           "train_mfu": mfu, "dtype": dtype, "cpu": cpu, "threads": torch.get_num_threads(),
           "grpo_episodes_per_s": grpo["episodes_per_s"], "grpo_speedup_vs_ppo": grpo["speedup_vs_ppo"],
           "peak_flops": peaks, "train": train, "generate": gen, "ppo": ppo, "grpo": grpo, "rm": rm}
    if b.json:
        write_text(b.json, json.dumps(out, indent=1))
        print(f"-> {b.json}")
    return out


if __name__ == "__main__":
    run(main, BenchConfig, __doc__)
