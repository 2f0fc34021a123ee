"""Optimiser and learning-rate schedule shared by every stage.

AdamW with decoupled weight decay (Loshchilov & Hutter 2019) on matrices only
(embeddings included, biases and LayerNorm gains excluded, as in GPT-2/nanoGPT),
and a linear warmup followed by cosine decay (InstructGPT §3.5: SFT uses cosine decay).

Example:
    opt = make_optimizer(model, lr=1e-3, weight_decay=0.1)
    for step in range(max_steps):
        set_lr(opt, cosine_lr(step, max_steps, lr=1e-3, warmup=100, min_lr=1e-4))
"""
from __future__ import annotations

import math

import torch


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float = 0.1,
                   betas: tuple[float, float] = (0.9, 0.95), eps: float = 1e-8) -> torch.optim.AdamW:
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)


def cosine_lr(step: int, max_steps: int, lr: float, warmup: int = 0, min_lr: float = 0.0) -> float:
    """Linear warmup over `warmup` steps, then cosine decay from lr to min_lr at max_steps."""
    if step < warmup:
        return lr * (step + 1) / warmup
    if step >= max_steps:
        return min_lr
    progress = (step - warmup) / max(1, max_steps - warmup)
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    for g in opt.param_groups:
        g["lr"] = lr


def clip_grad(model: torch.nn.Module, max_norm: float) -> float:
    """Clip the global gradient norm; returns the norm before clipping (for logging)."""
    params = [p for p in model.parameters() if p.grad is not None]
    return float(torch.nn.utils.clip_grad_norm_(params, max_norm))
