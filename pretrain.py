"""Pretrain the base model: next-token prediction on the world's corpus.

InstructGPT starts from GPT-3, trained on web text; nanorlhf starts from a small
GPT trained here on the generated village's corpus (encyclopedia, gossip, quiz
sheets, forums, ...), which is what makes it know facts but not follow instructions.

    python pretrain.py --preset=tiny      # < 1 minute on 2 CPU cores (tests use this)
    python pretrain.py --preset=small     # the default CPU run; docs/results.md gives its time in the pipeline
    python pretrain.py --corpus=my.txt    # any text file (documents split at blank lines)

Writes out_dir/ckpt.pt (model, optimiser, step, data position, RNG states, config),
out_dir/metrics.jsonl and out_dir/loss.png. Resume with --resume=true.
"""
from __future__ import annotations

import dataclasses
import math
import os
import signal
import time
from dataclasses import dataclass, replace
from typing import ClassVar

import torch
import torch.nn.functional as F

from nanorlhf.checkpoint import check_resume_config, load_checkpoint, save_checkpoint, seed_everything, set_rng_state
from nanorlhf.infra.cli import run
from nanorlhf.infra.config import config_dict, config_json, print_config
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import file_sha256, write_text
from nanorlhf.infra.guard import NonFiniteGuard, check_val
from nanorlhf.infra.metrics import MetricsLog, Progress, measure_matmul_peak, plot_curves, stage_title
from nanorlhf.infra.optim import clip_grad, cosine_lr, make_optimizer, set_lr
from nanorlhf.infra.precision import autocast, resolve_dtype
from nanorlhf.infra.schemas import DataError
from nanorlhf.lmdata import LMBatches, encode_docs, eval_batches, read_corpus, split_docs
from nanorlhf.model import GPT, GPTConfig, count_params, flops_per_token
from nanorlhf.recipe import stage_preset
from nanorlhf.tokenizer import SPECIAL_TOKENS, Tokenizer
from nanorlhf.world.scales import SCALES


@dataclass
class Config:
    scale: str = "small"
    """world scale whose corpus to train on (data/<scale>/corpus.jsonl, built if missing)"""
    corpus: str = ""
    """a corpus file (.jsonl with "text", or .txt) to use instead of the world's"""
    tokenizer: str = ""
    """tokenizer file; default: tokenizer.tiktoken beside the corpus, trained if missing"""
    vocab_size: int = 2048
    """BPE vocabulary size when a tokenizer has to be trained"""
    out_dir: str = "out/small/base_1m"
    """where the checkpoint, metrics and plots go"""
    n_layer: int = 4
    """transformer blocks"""
    n_head: int = 4
    """attention heads"""
    n_embd: int = 128
    """residual stream width"""
    block_size: int = 128
    """context length in tokens"""
    dropout: float = 0.0
    """dropout during pretraining"""
    attn: str = "manual"
    """attention path: manual (readable) or sdpa (fused)"""
    dtype: str = "float32"
    """float32, bfloat16 autocast for the matmuls (faster on CPUs with AVX512-BF16), or auto: bfloat16 only where
    native (nanorlhf/infra/precision.py)"""
    batch_size: int = 16
    """sequences per step"""
    max_steps: int = 3000
    """optimisation steps"""
    lr: float = 3e-3
    """peak learning rate"""
    min_lr: float = 3e-4
    """learning rate at the end of the cosine decay"""
    warmup: int = 100
    """linear warmup steps"""
    weight_decay: float = 0.1
    """AdamW decoupled weight decay on matrices"""
    grad_clip: float = 1.0
    """global gradient-norm clip"""
    eval_every: int = 250
    """steps between validation-loss evaluations"""
    eval_batches: int = 10
    """batches per validation evaluation"""
    ckpt_every: int = 1000
    """steps between checkpoints (also written at the end)"""
    log_every: int = 50
    """steps between progress lines"""
    seed: int = 0
    """seed for init, data order and dropout"""
    device: str = "cpu"
    """cpu, cuda, or auto"""
    resume: bool = False
    """continue from out_dir/ckpt.pt (the config must match)"""
    kill_at_step: int = 0
    """for the resume test: SIGKILL this process right after step N's checkpoint (0 = never)"""

    # values checked before any work starts (nanorlhf/infra/config.py check_values)
    POSITIVE: ClassVar[tuple] = ("n_layer", "n_head", "n_embd", "batch_size", "max_steps", "lr", "eval_every",
                                 "eval_batches", "ckpt_every", "log_every", "grad_clip")
    NONNEGATIVE: ClassVar[tuple] = ("min_lr", "warmup", "weight_decay", "kill_at_step")
    RANGES: ClassVar[dict] = {**GPTConfig.RANGES,
                              "vocab_size": f"[{256 + len(SPECIAL_TOKENS)}, inf)"}  # the bytes and the specials
    CHOICES: ClassVar[dict] = {"scale": tuple(SCALES)}
    RULES: ClassVar[tuple] = GPTConfig.RULES + ((lambda c: c.min_lr <= c.lr, "--min_lr={min_lr} is above --lr={lr}"),)

    PRESETS: ClassVar[dict] = {
        # the pipeline's base model of the largest size (nanorlhf/recipe.py stage_preset), and the tiny world's sizes
        "tiny": dict(stage_preset("tiny", "pretrain"), scale="tiny", vocab_size=512, block_size=128, batch_size=8,
                     warmup=10, eval_every=50, eval_batches=2, ckpt_every=150, log_every=25),
        "small": stage_preset("small", "pretrain"),
        "large": dict(out_dir="out/small/base_large", n_layer=8, n_head=8, n_embd=384,
                      block_size=128, lr=1e-3, min_lr=1e-4),
    }


# ignored when comparing a resumed run's config with its checkpoint's
RESUME_IGNORE = ("resume", "kill_at_step", "log_every", "device")


def corpus_path(cfg: Config) -> str:
    if cfg.corpus:
        return cfg.corpus
    path = os.path.join("data", cfg.scale, "corpus.jsonl")
    if not os.path.exists(path):
        from nanorlhf.world import build_world, write_world
        print(f"no corpus at {path}: building the {cfg.scale} world")
        write_world(build_world(cfg.scale, seed=0), os.path.dirname(path))
    return path


def load_or_train_tokenizer(cfg: Config, docs: list[str], corpus: str) -> tuple[Tokenizer, str]:
    path = cfg.tokenizer or os.path.join(os.path.dirname(os.path.abspath(corpus)), "tokenizer.tiktoken")
    if os.path.exists(path):
        return Tokenizer.load(path), path
    t = time.time()
    tok = Tokenizer.train("\n\n".join(docs), vocab_size=cfg.vocab_size, verbose=True)
    tok.save(path)
    print(f"trained a {tok.vocab_size}-token BPE in {time.time() - t:.1f}s -> {path}")
    return tok, path


@torch.no_grad()
def val_loss(model, stream, cfg: Config, device: str) -> float:
    model.eval()
    with autocast(cfg.dtype, device):
        losses = [F.cross_entropy(model(x.to(device)).flatten(0, 1), y.to(device).flatten()).item()
                  for x, y in eval_batches(stream, cfg.block_size, cfg.batch_size, cfg.eval_batches)]
    model.train()
    return sum(losses) / len(losses)


def main(cfg: Config) -> dict:
    print_config(cfg)
    device = resolve_device(cfg.device)
    cfg = replace(cfg, dtype=resolve_dtype(cfg.dtype, device))  # auto: bfloat16 only where it runs natively
    seed_everything(cfg.seed)
    os.makedirs(cfg.out_dir, exist_ok=True)

    # 1. data: the corpus, its tokenizer, a token stream split by document
    corpus = corpus_path(cfg)
    docs = read_corpus(corpus)
    tok, tok_path = load_or_train_tokenizer(cfg, docs, corpus)
    train_docs, val_docs = split_docs(docs)
    train_stream, val_stream = encode_docs(tok, train_docs), encode_docs(tok, val_docs)
    batches = LMBatches(train_stream, cfg.block_size, cfg.batch_size, seed=cfg.seed)
    if len(val_stream) < cfg.block_size + 2:
        raise DataError(f"{corpus}: its validation documents hold {len(val_stream)} tokens, under one block of "
                        f"--block_size={cfg.block_size}; use a smaller block or more text")
    print(f"corpus {corpus}: {len(docs)} docs, {len(train_stream):,} train / {len(val_stream):,} val tokens")

    # 2. model and optimiser
    mcfg = GPTConfig(vocab_size=tok.vocab_size, block_size=cfg.block_size, n_layer=cfg.n_layer,
                     n_head=cfg.n_head, n_embd=cfg.n_embd, dropout=cfg.dropout, attn=cfg.attn)
    model = GPT(mcfg).to(device)
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay)
    n = count_params(model)
    print(f"model: {n['total']:,} parameters ({n['non_embedding']:,} non-embedding)")
    ckpt_path = os.path.join(cfg.out_dir, "ckpt.pt")
    log = MetricsLog(os.path.join(cfg.out_dir, "metrics.jsonl"), fresh=not cfg.resume)
    step = 0
    if cfg.resume:
        ck = load_checkpoint(ckpt_path, map_location="cpu")  # RNG states stay CPU tensors; load_state_dict moves
        check_resume_config(ck, config_dict(cfg), ignore=RESUME_IGNORE)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
        batches.load_state_dict(ck["data_pos"])
        set_rng_state(ck["rng"])
        step = ck["step"]
        log = MetricsLog(log.path, keep_until=step)  # the steps redone after the checkpoint are logged once
        print(f"resumed from {ckpt_path} at step {step}")

    def save():
        save_checkpoint(ckpt_path, model=model.state_dict(), config=config_dict(cfg), step=step,
                        optim=opt.state_dict(), data_pos=batches.state_dict(),
                        extra={"model_config": dataclasses.asdict(mcfg), "tokenizer": tok.to_dict(),
                               "inputs": {corpus: file_sha256(corpus), tok_path: file_sha256(tok_path)}})

    # 3. train: AdamW, warmup + cosine, clipping, periodic validation
    peak = measure_matmul_peak(device, dtype=cfg.dtype)  # MFU against the peak of the dtype in use
    flops_tok = flops_per_token(mcfg, cfg.block_size)
    bar = Progress(cfg.max_steps, "pretrain", start_step=step)
    losses, busy, tokens_since, guard = [], 0.0, 0, NonFiniteGuard(max_consecutive=3)
    while step < cfg.max_steps:
        t0 = time.time()
        lr = cosine_lr(step, cfg.max_steps, cfg.lr, cfg.warmup, cfg.min_lr)
        set_lr(opt, lr)
        x, y = batches.next()
        x, y = x.to(device), y.to(device)
        with autocast(cfg.dtype, device):
            logits = model(x)                                       # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = clip_grad(model, cfg.grad_clip)
        if not guard.check(loss=loss, grad_norm=gnorm):
            continue  # a non-finite step is skipped; 3 in a row stop the run (nanorlhf/infra/guard.py)
        opt.step()
        step += 1
        losses.append(loss.item())
        tokens_since, busy = tokens_since + x.numel(), busy + time.time() - t0
        if step % cfg.log_every == 0 or step == cfg.max_steps:
            tps = tokens_since / busy  # training time only: evaluation and saving excluded
            mfu = tps * flops_tok / peak
            log.write(step, **{"train/loss": loss.item(), "train/lr": lr, "train/grad_norm": gnorm,
                               "time/tokens_per_s": tps, "time/mfu": mfu})
            if bar.due(step):
                print(bar.line(step, loss=loss.item(), lr=lr, tok_s=round(tps), mfu=f"{100 * mfu:.0f}%"))
            busy, tokens_since = 0.0, 0
        if step % cfg.eval_every == 0 or step % cfg.ckpt_every == 0 or step == cfg.max_steps:  # before each save
            vl = val_loss(model, val_stream, cfg, device)
            log.write(step, **{"val/loss": vl})
            print(f"step {step}: val loss {vl:.4f}")
            guard.end_epoch(f"steps up to {step}")  # a diverged model is never saved (nanorlhf/infra/guard.py)
            check_val(vl, math.log(tok.vocab_size), f"at step {step}")  # start: a uniform guess's loss, ln V
        if step % cfg.ckpt_every == 0 or step == cfg.max_steps:
            save()
            if cfg.kill_at_step and step == cfg.kill_at_step:
                os.kill(os.getpid(), signal.SIGKILL)  # the resume test: die without cleanup

    plot_curves(log.read(), ["train/loss", "val/loss", "time/mfu"], os.path.join(cfg.out_dir, "loss.png"),
                title=stage_title("pretraining", cfg.out_dir, n["total"]))
    final_val = val_loss(model, val_stream, cfg, device)
    print(f"done: {step} steps, final train loss {losses[-1] if losses else float('nan'):.4f}, "
          f"val loss {final_val:.4f} -> {ckpt_path}")
    write_text(os.path.join(cfg.out_dir, "config.json"), config_json(cfg))  # replay: --config=this file
    return {"losses": losses, "val_loss": final_val, "ckpt": ckpt_path, "model": model,
            "flops": flops_tok * cfg.batch_size * cfg.block_size * step}


if __name__ == "__main__":
    run(main, Config, __doc__)
