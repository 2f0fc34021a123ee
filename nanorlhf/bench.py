"""
How fast is the model here? Training tokens/s and MFU, generation tokens/s with and
without the KV cache, and peak memory.

    python -m nanorlhf.bench --preset=1m            # ~1M params, about 1-2 minutes on 2 CPU cores
    python -m nanorlhf.bench --preset=tiny          # seconds

It also times one PPO iteration (issue: episodes/s at batch 64, 32-token prompts,
48-token responses, one epoch over one minibatch) and says where the time goes.

MFU = achieved training FLOP/s / measured fp32 matmul FLOP/s of this device
(nanorlhf.metrics.measure_matmul_peak), with FLOPs per token from
model.flops_per_token (6N + 12 L C T + 6 C V, PaLM appendix B). The denominator is
a measured peak, not the datasheet one, so it says how much of what torch.matmul
can do here the whole training step (AdamW included) gets.
"""

import dataclasses
import resource
import sys
import time
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from nanorlhf.config import parse_config
from nanorlhf.generate import generate
from nanorlhf.metrics import measure_matmul_peak
from nanorlhf.model import GPT, GPTConfig, count_params, flops_per_token
from nanorlhf.optim import make_optimizer

# -----------------------------------------------------------------------------


@dataclass
class BenchConfig:
    n_layer: int = 4
    "transformer blocks"
    n_head: int = 4
    "attention heads"
    n_embd: int = 128
    "residual width"
    block_size: int = 256
    "context length of the model"
    vocab_size: int = 2048
    "vocabulary size"
    attn: str = "manual"
    "attention path: manual or sdpa"
    train_batch: int = 16
    "training batch size (sequences)"
    train_len: int = 128
    "training sequence length"
    train_steps: int = 10
    "timed training steps (after 3 warm-up steps)"
    gen_batch: int = 64
    "generation batch size (prompts)"
    prompt_len: int = 32
    "prompt length for generation"
    new_tokens: int = 128
    "tokens sampled per prompt"
    ppo_new_tokens: int = 48
    "response length of the PPO benchmark"
    device: str = "auto"
    "cpu, cuda or auto"
    PRESETS: ClassVar[dict] = {
        "tiny": dict(n_layer=2, n_head=2, n_embd=32, block_size=64, vocab_size=64, train_len=32,
                     train_steps=3, gen_batch=8, prompt_len=8, new_tokens=16, ppo_new_tokens=8),
        "1m": {},
    }


def _sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def peak_memory_mb(device):
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10  # KiB on Linux; whole process

# -----------------------------------------------------------------------------


def bench_train(cfg: GPTConfig, batch, seq_len, steps=10, device="cpu"):
    """Training tokens/s of forward + backward + AdamW on random tokens; returns (tokens/s, FLOP/s)."""
    model = GPT(cfg).to(device).train()
    opt = make_optimizer(model, lr=1e-4)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(cfg.vocab_size, (batch, seq_len + 1), generator=g).to(device)

    def step():
        logits = model(x[:, :-1])                                                   # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    _sync(device)
    t = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    dt = (time.perf_counter() - t) / steps
    tps = batch * seq_len / dt
    return tps, tps * flops_per_token(cfg, seq_len)


def bench_generate(cfg: GPTConfig, batch, prompt_len, new_tokens, device="cpu"):
    """Sampled tokens/s with and without the KV cache (no stop token: every row runs to the end)."""
    torch.manual_seed(0)
    model = GPT(cfg).to(device).eval()
    g = torch.Generator().manual_seed(0)
    prompts = torch.randint(cfg.vocab_size, (batch, prompt_len), generator=g).tolist()
    out = {}
    for use_cache in (True, False):
        _sync(device)
        t = time.perf_counter()
        generate(model, prompts, new_tokens, generator=torch.Generator().manual_seed(0), use_cache=use_cache)
        _sync(device)
        out["cache" if use_cache else "naive"] = batch * new_tokens / (time.perf_counter() - t)
    out["speedup"] = out["cache"] / out["naive"]
    return out

# -----------------------------------------------------------------------------


def main(bench: BenchConfig):
    device = bench.device if bench.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    cfg = GPTConfig(**{f.name: getattr(bench, f.name) for f in dataclasses.fields(GPTConfig)
                       if f.name not in ("dropout",)})
    n = count_params(GPT(cfg))
    print(f"model: {n['total'] / 1e6:.2f}M params ({n['non_embedding'] / 1e6:.2f}M non-embedding), "
          f"attn={cfg.attn}, device={device}, threads={torch.get_num_threads()}")
    peak = measure_matmul_peak(device)
    print(f"matmul peak (fp32, measured): {peak / 1e9:.1f} GFLOP/s")
    tps, flops = bench_train(cfg, bench.train_batch, bench.train_len, bench.train_steps, device)
    print(f"train {bench.train_batch}x{bench.train_len}: {tps:,.0f} tokens/s, "
          f"{flops / 1e9:.1f} GFLOP/s, MFU {flops / peak:.1%}")
    gen = bench_generate(cfg, bench.gen_batch, bench.prompt_len, bench.new_tokens, device)
    print(f"generate batch {bench.gen_batch}, prompt {bench.prompt_len}, {bench.new_tokens} new: "
          f"KV cache {gen['cache']:,.0f} tokens/s, naive {gen['naive']:,.0f} tokens/s, "
          f"speed-up {gen['speedup']:.1f}x")
    ppo = bench_ppo(cfg, bench.gen_batch, bench.prompt_len, bench.ppo_new_tokens, device)
    print(f"PPO iteration, batch {bench.gen_batch}, prompt {bench.prompt_len}, {bench.ppo_new_tokens} new tokens, "
          f"policy + reference + RM + value of this size: {ppo['episodes_per_s']:.1f} episodes/s "
          f"(generate {ppo['generate_s']:.2f}s, score {ppo['score_s']:.2f}s, update {ppo['update_s']:.2f}s)")
    print(f"peak memory: {peak_memory_mb(device):,.0f} MiB")
    return dict(train_tokens_per_s=tps, mfu=flops / peak, **{f"gen_{k}": v for k, v in gen.items()},
                **{f"ppo_{k}": v for k, v in ppo.items()})


def bench_ppo(cfg: GPTConfig, batch: int = 64, prompt_len: int = 32, new_tokens: int = 48, device="cpu") -> dict:
    """Episodes/s of one PPO iteration (policy, reference, RM and value all of size cfg): rollout with the
    KV cache, scoring (4 forward passes), GAE, one PPO epoch over one minibatch of the whole batch."""
    from nanorlhf.experience import make_experience, minibatch_loss
    from nanorlhf.model import ScalarHeadModel
    from nanorlhf.ppo import PPOConfig
    torch.manual_seed(0)
    policy, ref = GPT(cfg).to(device), GPT(cfg).to(device)
    rm, value = ScalarHeadModel(cfg).to(device).eval(), ScalarHeadModel(cfg).to(device)
    opt = make_optimizer(torch.nn.ModuleList([policy, value]), lr=1e-5)
    hp = PPOConfig()
    prompts = torch.randint(cfg.vocab_size, (batch, prompt_len), generator=torch.Generator().manual_seed(0)).tolist()
    times = {"generate": 0.0, "score": 0.0, "update": 0.0}
    for it in range(3):  # the first iteration warms up; the last two are timed
        t0 = time.perf_counter()
        ro = generate(policy, prompts, new_tokens, generator=torch.Generator().manual_seed(it))
        t1 = time.perf_counter()
        exp = make_experience(policy, ref, rm, value, ro, rm_bias=0.0, beta=hp.beta, hp=hp)
        t2 = time.perf_counter()
        loss, _ = minibatch_loss(policy, value, exp, torch.arange(batch), hp, None)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        _sync(device)
        t3 = time.perf_counter()
        if it:
            for k, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2)):
                times[k] += dt / 2
    total = sum(times.values())
    return {"episodes_per_s": batch / total, **{f"{k}_s": v for k, v in times.items()}}


if __name__ == "__main__":
    main(parse_config(BenchConfig, sys.argv[1:]))
