"""Direct Preference Optimisation (Rafailov et al. 2023): the policy fit to the comparisons directly.

No reward model and no RL loop: the SFT model is fine-tuned on the same K-way
rankings the RM was trained on (out/<scale>/rm/comparisons.jsonl), each expanded
to its untied pairs, against a frozen copy of itself (pi_ref = pi_SFT):

  1. load      policy and frozen reference, both the SFT checkpoint (dropout off, so the
               first loss is exactly log 2)
  2. batch     B prompts, each with all its K completions (one batch element, as for the RM)
  3. loss      -log sigmoid(beta * [(log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l))])
               with sequence log-probs summed over response tokens (nanorlhf/dpo.py)
  4. log       loss, implicit reward margin and pairwise accuracy (dpo/*) to metrics.jsonl
  5. validate  implicit-reward accuracy on held-out comparisons (val_comparisons.jsonl)
  6. save      a policy checkpoint load_model reads, like SFT's and PPO's

    python train_dpo.py --preset=tiny                                # seconds
    python train_dpo.py --preset=small --beta=0.1                   # ~190 steps, a few minutes on 2 cores
    python train_dpo.py --preset=small --beta=0.3 --out_dir=out/small/dpo_b0.3

beta plays the part of PPO's KL coefficient: small beta lets the policy move far from pi_SFT.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from dataclasses import dataclass
from typing import ClassVar

import torch

from nanorlhf import dpo
from nanorlhf.checkpoint import load_model, save_checkpoint, seed_everything
from nanorlhf.infra.cli import run
from nanorlhf.infra.config import config_dict, config_json, print_config
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import file_sha256, write_text
from nanorlhf.infra.guard import NonFiniteGuard
from nanorlhf.infra.jsonl import label_counts
from nanorlhf.infra.metrics import MetricsLog, Progress, plot_curves, stage_title
from nanorlhf.infra.optim import clip_grad, cosine_lr, make_optimizer, set_lr
from nanorlhf.infra.schemas import DataError
from nanorlhf.interop.pairs import read_pairs
from nanorlhf.model import count_params
from nanorlhf.rankings import usable
from nanorlhf.recipe import stage_preset
from nanorlhf.world.comparisons import load_comparisons


@dataclass
class Config:
    sft: str = "out/small/sft_1m/ckpt.pt"
    """SFT checkpoint: the initial policy and the frozen reference pi_ref"""
    comparisons: str = "out/small/rm/comparisons.jsonl"
    """K-way rankings to fit (the RM's training comparisons)"""
    pairs: str = ""
    """or fit preference pairs instead: TRL, TRL conversational or Anthropic HH rows (nanorlhf/interop/pairs.py)"""
    val_comparisons: str = "out/small/rm/val_comparisons.jsonl"
    """held-out comparisons for the implicit-reward accuracy ('' to skip)"""
    out_dir: str = "out/small/dpo_1m"
    """where the checkpoint, metrics and plots go"""
    beta: float = 0.1
    """DPO temperature: the strength of the implicit KL constraint to pi_ref"""
    lr: float = 1e-4
    """peak learning rate (cosine decay to lr/10)"""
    epochs: int = 1
    """passes over the comparisons"""
    max_steps: int = 0
    """stop after this many steps (0 = all epochs)"""
    batch_prompts: int = 8
    """prompts (each with all its K completions) per gradient step"""
    grad_clip: float = 1.0
    """global gradient-norm clip"""
    val_prompts: int = 100
    """held-out comparisons used for validation accuracy"""
    log_every: int = 10
    """steps between metric lines"""
    seed: int = 0
    """seed for batch order"""
    device: str = "cpu"
    """cpu, cuda, or auto"""

    # values checked before any work starts (nanorlhf/infra/config.py check_values)
    POSITIVE: ClassVar[tuple] = ("beta", "lr", "epochs", "batch_prompts", "val_prompts", "log_every", "grad_clip")
    NONNEGATIVE: ClassVar[tuple] = ("max_steps",)

    PRESETS: ClassVar[dict] = {
        # DPO from the pipeline's SFT model on its RM's comparisons (nanorlhf/recipe.py stage_preset)
        "tiny": dict(stage_preset("tiny", "dpo"), batch_prompts=4, val_prompts=8, log_every=1),
        "small": stage_preset("small", "dpo"),
    }


def main(cfg: Config) -> dict:
    print_config(cfg)
    t_start = time.time()
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)

    # 1. policy and frozen reference, both pi_SFT; the comparisons to fit and to validate on (read before any work)
    policy, tok, sft_ck = load_model(cfg.sft, device, dropout=0.0)
    ref, _, _ = load_model(cfg.sft, device, dropout=0.0)
    ref.requires_grad_(False).eval()
    cmp = usable(read_pairs(cfg.pairs) if cfg.pairs else load_comparisons(cfg.comparisons))
    if not cmp:
        raise DataError(f"{cfg.pairs or cfg.comparisons}: no comparison has an untied pair; DPO has nothing to learn")
    val = usable(load_comparisons(cfg.val_comparisons))[:cfg.val_prompts] if cfg.val_comparisons else []
    os.makedirs(cfg.out_dir, exist_ok=True)
    steps = cfg.epochs * math.ceil(len(cmp) / cfg.batch_prompts)
    steps = min(steps, cfg.max_steps) if cfg.max_steps else steps
    print(f"{len(cmp)} comparisons ({sum(len(c['completions']) for c in cmp)} completions), {steps} steps")
    opt = make_optimizer(policy, cfg.lr, weight_decay=0.0)
    log = MetricsLog(os.path.join(cfg.out_dir, "metrics.jsonl"), fresh=True)
    bar, g, step = Progress(steps, "dpo"), torch.Generator().manual_seed(cfg.seed), 0
    guard = NonFiniteGuard(max_consecutive=3)
    policy.train()
    while step < steps:
        for idx in torch.randperm(len(cmp), generator=g).split(cfg.batch_prompts):
            if step >= steps:
                break
            # 2-3. each prompt's K-way ranking is one batch element; DPO loss over its untied pairs
            set_lr(opt, cosine_lr(step, steps, cfg.lr, warmup=max(1, steps // 20), min_lr=cfg.lr / 10))
            loss, s = dpo.comparison_loss(policy, ref, tok, [cmp[i] for i in idx.tolist()], cfg.beta, device)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = clip_grad(policy, cfg.grad_clip)
            if not guard.check(loss=loss, grad_norm=gnorm):
                continue  # a non-finite step is skipped; 3 in a row stop the run (nanorlhf/infra/guard.py)
            opt.step()
            step += 1
            # 4. log: the loss, and the implicit reward beta * log(pi / pi_ref) of chosen vs rejected
            if step % cfg.log_every == 0 or step == steps:
                m = {"dpo/loss": loss.item(), **{f"dpo/{k}": v for k, v in s.items()}, "dpo/grad_norm": gnorm}
                log.write(step, **m)
                if bar.due(step):
                    print(bar.line(step, loss=loss.item(), margin=s["margin"], acc=s["accuracy"]))
        guard.end_epoch(f"pass over the comparisons ending at step {step}")  # all-zero gradients: stop, save nothing

    # 5. validate: does the implicit reward order held-out comparisons like the labelers did?
    report = {"n_comparisons": len(cmp), "steps": step, "beta": cfg.beta}
    if val:
        policy.eval()
        with torch.no_grad():
            _, vs = dpo.comparison_loss(policy, ref, tok, val, cfg.beta, device)
        report.update({"val_accuracy": vs["accuracy"], "val_margin": vs["margin"]})
        log.write(step, **{"val/dpo_accuracy": vs["accuracy"], "val/dpo_margin": vs["margin"]})
        print(f"held-out implicit-reward accuracy {vs['accuracy']:.3f} (margin {vs['margin']:+.3f}) "
              f"on {len(val)} comparisons")

    # 6. save a policy checkpoint (loadable by load_model, like SFT's and PPO's)
    report["wall_s"] = time.time() - t_start
    human, ai = label_counts(cmp)                      # source "ai" rows (RLAIF) are AI feedback, the rest human
    extra = {"model_config": dataclasses.asdict(policy.cfg), "tokenizer": sft_ck["extra"]["tokenizer"],
             "report": report, "lineage": {"human_labels": human, "ai_labels": ai, "wall_s": report["wall_s"]},
             "inputs": {p: file_sha256(p) for p in (cfg.sft, cfg.pairs or cfg.comparisons)}}
    ckpt = os.path.join(cfg.out_dir, "ckpt.pt")
    save_checkpoint(ckpt, model=policy.state_dict(), config=config_dict(cfg), step=step, extra=extra)
    write_text(os.path.join(cfg.out_dir, "report.json"), json.dumps(report, indent=1))
    plot_curves(log.read(), ["dpo/loss", "dpo/margin", "dpo/accuracy"], os.path.join(cfg.out_dir, "curves.png"),
                title=stage_title(f"DPO (beta={cfg.beta})", cfg.out_dir, count_params(policy)["total"]))
    print(f"done: {step} steps in {report['wall_s']:.0f}s -> {ckpt}")
    write_text(os.path.join(cfg.out_dir, "config.json"), config_json(cfg))  # replay: --config=this file
    return {"metrics": log.read(), "report": report, "ckpt": ckpt, "policy": policy}


if __name__ == "__main__":
    run(main, Config, __doc__)
