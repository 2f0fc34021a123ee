"""Numeric precision of the training passes: float32 (the plain path) or bfloat16 autocast (the fast one).

Under bfloat16 autocast the matrix multiplies run in bfloat16 while the weights,
the optimiser state, LayerNorm, softmax, log-softmax and the losses stay in float32
(torch's autocast op lists); on a CPU with AVX512-BF16 a training step of the 1m
model runs faster (`python -m experiments.bench` measures by how much: docs/results.md, speed).
Sampling's matmuls lose (a decode step's few rows are bound by overhead, and the casts
add to it), so they stay float32; only its KV cache may be bfloat16 (`cache_dtype`).
`fast_bfloat16` detects native bfloat16 rather than assume it, and `resolve_dtype` turns
--dtype=auto into bfloat16 or float32 with it; `cpu_name` names the processor beside every timing
(`device_name`: the GPU on cuda).

Example:
    with autocast("bfloat16", "cpu"):
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    loss.backward()
"""
from __future__ import annotations

import contextlib

import torch

DTYPES = ("float32", "bfloat16")
# oneDNN, which runs torch's bfloat16 matmuls on a CPU, compiles a kernel for every new matrix shape (about 6 ms
# on one core, against about 1 ms to run the 1m model's largest) and keeps the last 1,024: passes whose length
# moves a token at a time compile again and again. Padding a varying dimension up to a multiple keeps the shapes
# few; float32's kernels are not compiled per shape and lose a little to the padding.
SHAPE_MULTIPLE = 16


def round_up(n: int, cap: int | None = None, multiple: int = SHAPE_MULTIPLE) -> int:
    """n rounded up to a multiple of `multiple`, but never past cap (a model's block_size) unless n is."""
    m = -(-n // multiple) * multiple
    return m if cap is None else max(n, min(m, cap))


def resolve_dtype(name: str, device: str = "cpu") -> str:
    """float32 or bfloat16 as asked; "auto" is bfloat16 where it runs natively (fast_bfloat16), float32 elsewhere.

    Without native bfloat16 (a CPU with AVX2 only, say) autocast emulates it: a training step of the 1m model
    then runs far slower than in float32, so "auto" is what the pipeline passes.
    """
    if name == "auto":
        return "bfloat16" if fast_bfloat16(device) else "float32"
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of auto, {', '.join(DTYPES)}, got {name!r}")
    return name


def autocast(dtype: str, device: str = "cpu"):
    """A context for forward passes: nothing for float32, torch.autocast for bfloat16."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if dtype == "float32":
        return contextlib.nullcontext()
    # cache_enabled=False: autocast's cache of bfloat16 weight copies lives until the outermost context exits,
    # so a context held across optimiser steps would feed every later forward the weights of the first one
    return torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, cache_enabled=False)


def cache_dtype(dtype: str, device: str = "cpu") -> str:
    """The KV cache's dtype for sampling under `dtype`: bfloat16 only where it runs natively, else float32.

    Decoding reads every cached key and value at every step: a bfloat16 cache halves those bytes, which
    sped sampling up on an Intel Xeon with AMX but slowed it down on an AMD EPYC with AVX512-BF16, where
    the attention's tiny per-head products cost as much as its bytes (`python -m experiments.bench` sets
    the two caches side by side). PPO's rollouts, whose answers are short, gain little from it, so
    train_ppo.py keeps them float32 unless --rollout_cache=bfloat16. The matmuls stay float32: at
    a decode step's few rows bfloat16 gains nothing.
    """
    return "bfloat16" if dtype == "bfloat16" and fast_bfloat16(device) else "float32"


def cpu_name() -> str:
    """The processor's model name (Linux /proc/cpuinfo; platform.processor() elsewhere)."""
    import platform
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: str = "cpu") -> str:
    """What runs the stages: the GPU's name on cuda, else the processor's."""
    return torch.cuda.get_device_name(device) if device.startswith("cuda") else cpu_name()


def fast_bfloat16(device: str = "cpu") -> bool:
    """Whether bfloat16 matmuls run natively here: a GPU that supports them, or a CPU with AVX512-BF16 or AMX.

    Detected, not assumed: CPUs of one cloud machine type differ, and without these instructions
    bfloat16 is emulated and slower than float32.
    """
    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.get_device_capability(device) >= (8, 0)  # Ampere and later
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags
