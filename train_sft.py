"""Stage 1: supervised fine-tuning on labeler demonstrations (InstructGPT §3.5).

The base model is fine-tuned on (prompt, demonstration) pairs in the chat format,
with the loss on response tokens only, for several epochs with cosine decay and
residual dropout 0.2. The paper trains 16 epochs although validation loss
overfits after one, and picks the checkpoint by reward-model score on
validation prompts; every epoch's weights are kept so --select_by_rm can do so.

    python train_sft.py --preset=tiny                       # seconds
    python train_sft.py --preset=small                      # docs/results.md gives its time in the pipeline
    python train_sft.py --preset=small --select_by_rm=out/small/rm/ckpt.pt

Writes out_dir/epoch{E}.pt (weights), out_dir/ckpt.pt (the chosen epoch, plus
optimiser state for --resume), metrics.jsonl and loss.png.
"""
from __future__ import annotations

import dataclasses
import math
import os
import random
from dataclasses import dataclass, replace
from typing import ClassVar

import torch

from nanorlhf.chat import chat_example, fits
from nanorlhf.checkpoint import (atomic_torch_save, check_resume_config, load_checkpoint, load_model, load_weights,
                                 save_checkpoint, seed_everything, set_rng_state)
from nanorlhf.infra.cli import run
from nanorlhf.infra.config import config_dict, config_json, print_config
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import file_sha256, write_text
from nanorlhf.infra.guard import NonFiniteGuard, check_val
from nanorlhf.infra.jsonl import DEMO, read_jsonl
from nanorlhf.infra.metrics import MetricsLog, Progress, plot_curves, stage_title
from nanorlhf.infra.optim import clip_grad, cosine_lr, make_optimizer, set_lr
from nanorlhf.infra.precision import autocast, resolve_dtype
from nanorlhf.infra.schemas import DataError
from nanorlhf.model import count_params, flops_per_token
from nanorlhf.recipe import stage_preset
from nanorlhf.sft import collate, sft_loss


@dataclass
class Config:
    base: str = "out/small/base_1m/ckpt.pt"
    """pretrained base checkpoint to start from"""
    data_dir: str = "data/small"
    """world data folder holding sft.jsonl and val_prompts.jsonl"""
    demos: str = "sft.jsonl"
    """demonstration file inside data_dir (public_tasks.jsonl trains the FLAN/T0 analog)"""
    out_dir: str = "out/small/sft_1m"
    """where epoch checkpoints, metrics and plots go"""
    epochs: int = 16
    """passes over the demonstrations (paper: 16)"""
    batch_size: int = 32
    """demonstrations per step"""
    lr: float = 1e-3
    """peak learning rate (cosine decay to lr/10)"""
    warmup: int = 20
    """linear warmup steps"""
    weight_decay: float = 0.0
    """AdamW weight decay"""
    dropout: float = 0.2
    """residual dropout while fine-tuning (paper: 0.2)"""
    dtype: str = "float32"
    """float32, bfloat16 autocast, or auto (bfloat16 only where native), for the matmuls (nanorlhf/infra/precision.py)"""
    grad_clip: float = 1.0
    """global gradient-norm clip"""
    val_every: int = 20
    """every val_every-th demonstration is held out for validation loss"""
    loss_on_prompt: bool = False
    """ablation: next-token loss on prompt tokens too, not only the response (docs/details.md)"""
    select_by_rm: str = ""
    """reward model checkpoint: choose the epoch whose samples it scores highest on validation prompts"""
    select_prompts: int = 64
    """validation prompts sampled per epoch when selecting by RM score"""
    seed: int = 0
    """seed for data order and dropout"""
    device: str = "cpu"
    """cpu, cuda, or auto"""
    resume: bool = False
    """continue from out_dir/ckpt.pt after the last finished epoch"""

    # values checked before any work starts (nanorlhf/infra/config.py check_values)
    POSITIVE: ClassVar[tuple] = ("epochs", "batch_size", "lr", "select_prompts", "grad_clip")
    NONNEGATIVE: ClassVar[tuple] = ("warmup", "weight_decay")
    RANGES: ClassVar[dict] = {"dropout": "[0, 1)", "val_every": "[2, inf)"}  # 1 would hold out every demonstration

    PRESETS: ClassVar[dict] = {
        # the pipeline's SFT model of the largest size (nanorlhf/recipe.py stage_preset)
        "tiny": dict(stage_preset("tiny", "sft"), batch_size=8, warmup=2, val_every=8, select_prompts=8),
        "small": stage_preset("small", "sft"),
    }


def load_demos(cfg: Config, tok, block_size: int):
    rows = read_jsonl(os.path.join(cfg.data_dir, cfg.demos), DEMO, nonempty="demonstrations")
    examples = [chat_example(tok, r["prompt"], r["response"]) for r in rows]
    kept = [e for e in examples if fits(e[0], block_size)]
    if len(kept) < len(examples):
        print(f"dropped {len(examples) - len(kept)} demonstrations longer than the context ({block_size})")
    train = [e for i, e in enumerate(kept) if i % cfg.val_every != cfg.val_every - 1]
    val = [e for i, e in enumerate(kept) if i % cfg.val_every == cfg.val_every - 1]
    if not train or not val:
        raise DataError(f"{os.path.join(cfg.data_dir, cfg.demos)}: {len(kept)} demonstrations fit the context; "
                        f"need at least {cfg.val_every} (every {cfg.val_every}th is held out for validation)")
    return train, val


@torch.no_grad()
def val_loss(model, val, cfg: Config, pad_id: int, device: str) -> float:
    model.eval()
    total, n = 0.0, 0
    for i in range(0, len(val), cfg.batch_size):
        x, y, lm, am = (t.to(device) for t in collate(val[i:i + cfg.batch_size], pad_id))
        with autocast(cfg.dtype, device):
            total += sft_loss(model(x, attention_mask=am), y, lm).item() * lm.sum().item()
        n += lm.sum().item()
    model.train()
    return total / max(n, 1)


@torch.no_grad()
def rm_scores_by_epoch(model, tok, cfg: Config, rm_and_ck: tuple, device: str) -> dict[int, float]:
    """Mean RM score of each epoch's samples on validation prompts (paper §3.5: how SFT is chosen)."""
    from nanorlhf.evals.preference import fitting, sample_responses
    from nanorlhf.infra.jsonl import PROMPT
    from nanorlhf.reward import score_texts
    rm, rm_ck = rm_and_ck
    rows = read_jsonl(os.path.join(cfg.data_dir, "val_prompts.jsonl"), PROMPT)
    rows = fitting(rows, tok, model.cfg.block_size, 48)[:cfg.select_prompts]
    scores = {}
    for e in range(1, cfg.epochs + 1):
        model.load_state_dict(load_weights(os.path.join(cfg.out_dir, f"epoch{e}.pt"), map_location=device))
        model.eval()
        texts = sample_responses(model, tok, rows, 48, seed=cfg.seed)
        scores[e] = sum(score_texts(rm, tok, [r["prompt"] for r in rows], texts, device, rm_ck["extra"]["bias"])
                        .tolist()) / len(rows)  # one batched call: each row scores as alone (tested)
    return scores


def main(cfg: Config) -> dict:
    print_config(cfg)
    device = resolve_device(cfg.device)
    cfg = replace(cfg, dtype=resolve_dtype(cfg.dtype, device))  # auto: bfloat16 only where it runs natively
    seed_everything(cfg.seed)

    # 1. the base model with residual dropout, and the demonstrations in the chat format (and the RM that will
    # choose the epoch: a wrong file is refused now, not after training)
    model, tok, base_ck = load_model(cfg.base, device, dropout=cfg.dropout)
    train, val = load_demos(cfg, tok, model.cfg.block_size)
    rm, _, rm_ck = load_model(cfg.select_by_rm, device, kind="scalar") if cfg.select_by_rm else (None, None, None)
    os.makedirs(cfg.out_dir, exist_ok=True)
    steps_per_epoch = math.ceil(len(train) / cfg.batch_size)
    max_steps = steps_per_epoch * cfg.epochs
    print(f"{len(train)} train / {len(val)} val demonstrations, {steps_per_epoch} steps per epoch")
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay)
    log = MetricsLog(os.path.join(cfg.out_dir, "metrics.jsonl"), fresh=not cfg.resume)
    ckpt_path = os.path.join(cfg.out_dir, "ckpt.pt")
    epoch, step, val_start = 0, 0, None
    if cfg.resume:
        ck = load_checkpoint(ckpt_path, map_location="cpu")  # RNG states stay CPU tensors; load_state_dict moves
        check_resume_config(ck, config_dict(cfg), ignore=("resume", "device", "select_by_rm"))
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
        set_rng_state(ck["rng"])
        epoch, step, val_start = ck["data_pos"]["epoch"], ck["step"], ck["extra"].get("val_start")
        log = MetricsLog(log.path, keep_until=step)  # the steps redone after the checkpoint are logged once
    extra = {"model_config": dataclasses.asdict(model.cfg), "tokenizer": base_ck["extra"]["tokenizer"],
             "inputs": {cfg.base: file_sha256(cfg.base),
                        os.path.join(cfg.data_dir, cfg.demos): file_sha256(os.path.join(cfg.data_dir, cfg.demos))}}

    # 2. epochs of next-token loss on response tokens, cosine decay
    bar = Progress(max_steps, "sft", start_step=step)
    tokens, guard = 0, NonFiniteGuard(max_consecutive=3)
    val_losses = [val_loss(model, val, cfg, tok.pad_id, device)] if epoch == 0 else []
    if val_losses:
        val_start = val_losses[0]  # the bound of a diverged run: DIVERGED x this (nanorlhf/infra/guard.py)
        log.write(0, **{"val/loss": val_losses[0]})
        print(f"epoch 0 (base model): val loss {val_losses[0]:.4f}")
    extra["val_start"] = val_start
    while epoch < cfg.epochs:
        order = list(range(len(train)))
        random.Random(cfg.seed * 1000 + epoch).shuffle(order)
        for i in range(0, len(order), cfg.batch_size):
            set_lr(opt, cosine_lr(step, max_steps, cfg.lr, cfg.warmup, cfg.lr / 10))
            x, y, lm, am = (t.to(device) for t in collate([train[j] for j in order[i:i + cfg.batch_size]], tok.pad_id))
            lm = am.float() if cfg.loss_on_prompt else lm             # ablation: every real token counts
            with autocast(cfg.dtype, device):
                loss = sft_loss(model(x, attention_mask=am), y, lm)   # response tokens only
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = clip_grad(model, cfg.grad_clip)
            if not guard.check(loss=loss, grad_norm=gnorm):
                continue  # a non-finite step is skipped; 3 in a row stop the run (nanorlhf/infra/guard.py)
            opt.step()
            step += 1
            tokens += int(am.sum())  # real tokens: the padding is not counted as work
            if step % 10 == 0:
                log.write(step, **{"train/loss": loss.item()})
        epoch += 1
        vl = val_loss(model, val, cfg, tok.pad_id, device)
        val_losses.append(vl)
        log.write(step, **{"val/loss": vl, "epoch": epoch})
        if bar.due(step):
            print(bar.line(step, epoch=epoch, train_loss=loss.item(), val_loss=vl))
        guard.end_epoch(f"epoch {epoch}")                      # a diverged epoch is never saved
        check_val(vl, val_start, f"after epoch {epoch}")
        atomic_torch_save(model.state_dict(), os.path.join(cfg.out_dir, f"epoch{epoch}.pt"))
        save_checkpoint(ckpt_path, model=model.state_dict(), config=config_dict(cfg), step=step,
                        optim=opt.state_dict(), data_pos={"epoch": epoch}, extra={**extra, "epoch": epoch})

    # 3. choose the epoch (the paper: by RM score on validation prompts, not by validation loss)
    chosen = cfg.epochs
    if cfg.select_by_rm:
        scores = rm_scores_by_epoch(model, tok, cfg, (rm, rm_ck), device)
        chosen = max(scores, key=scores.get)
        print("RM score by epoch: " + ", ".join(f"{e}: {s:+.3f}" for e, s in scores.items()))
        model.load_state_dict(load_weights(os.path.join(cfg.out_dir, f"epoch{chosen}.pt"), map_location=device))
        extra["rm_scores"] = {str(k): v for k, v in scores.items()}
    save_checkpoint(ckpt_path, model=model.state_dict(), config=config_dict(cfg), step=step,
                    optim=opt.state_dict(), data_pos={"epoch": epoch}, extra={**extra, "epoch": chosen})
    kind = "SFT" if cfg.demos == "sft.jsonl" else f"SFT on {cfg.demos} (the FLAN/T0 analog)"
    plot_curves(log.read(), ["train/loss", "val/loss"], os.path.join(cfg.out_dir, "loss.png"),
                title=stage_title(kind, cfg.out_dir, count_params(model)["total"]))
    print(f"done: val loss by epoch {[round(v, 4) for v in val_losses]}; chose epoch {chosen} -> {ckpt_path}")
    write_text(os.path.join(cfg.out_dir, "config.json"), config_json(cfg))  # replay: --config=this file
    return {"val_losses": val_losses, "chosen_epoch": chosen, "ckpt": ckpt_path, "model": model,
            "flops": flops_per_token(model.cfg) * tokens}


if __name__ == "__main__":
    run(main, Config, __doc__)
