"""Stage 3: PPO against the reward model, with a per-token KL penalty and PPO-ptx (InstructGPT §3.5).

Each iteration is the paper's recipe, one named step at a time:
  1. rollout   sample prompts, generate responses with the KV cache
  2. score     the RM reads each response at its true last token
  3. penalise  R = r(x, y) - beta * log(pi_RL / pi_SFT), the KL spread over tokens
  4. GAE       values from a value model initialised from the RM; gamma = 1
  5. update    PPO epochs: clipped policy loss, clipped value loss, whitened advantages,
               plus gamma_ptx * pretraining loss (PPO-ptx; gamma_ptx = 0 is plain PPO)
  6. log       fixed metric names, a few decoded samples, warnings in plain words
  7. adapt     optionally steer beta towards a target KL

    python train_ppo.py --preset=tiny                 # seconds
    python train_ppo.py --preset=small                # PPO
    python train_ppo.py --preset=small --ptx_coef=1 --out_dir=out/small/ppo_ptx
"""
from __future__ import annotations

import dataclasses
import os
import signal
import time
from dataclasses import dataclass, field, replace
from typing import ClassVar

import torch

from nanorlhf import ppo
from nanorlhf.checkpoint import (check_resume_config, file_sha256, load_checkpoint, load_model, save_checkpoint,
                                 seed_everything, set_rng_state)
from nanorlhf.cli import run
from nanorlhf.config import config_dict, print_config
from nanorlhf.metrics import MetricsLog, Progress, plot_curves
from nanorlhf.model import ScalarHeadModel, flops_per_token
from nanorlhf.optim import clip_grad, make_optimizer
from nanorlhf.ppo import PPOConfig
from nanorlhf.precision import autocast, cache_dtype, resolve_dtype
from nanorlhf.device import resolve_device
from nanorlhf.experience import (PromptSampler, diagnose, length_groups, make_experience, minibatch_loss, ptx_batches,
                                 rollout, show_samples, value_from_rm)
from nanorlhf.guard import NonFiniteGuard


@dataclass
class Config:
    sft: str = "out/small/sft/ckpt.pt"
    """SFT checkpoint: the initial policy and the frozen reference pi_SFT"""
    rm: str = "out/small/rm/ckpt.pt"
    """reward model checkpoint (also initialises the value function)"""
    data_dir: str = "data/small"
    """world data folder holding ppo_prompts.jsonl and corpus.jsonl"""
    out_dir: str = "out/small/ppo"
    """where checkpoints, metrics and plots go"""
    iterations: int = 60
    """PPO iterations (each: one batch of episodes)"""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """PPO's hyperparameters and implementation switches (nanorlhf/ppo.py PPOConfig): each field is a flag"""
    ptx_batch_size: int = 8
    """pretraining sequences per gradient step when ptx_coef > 0"""
    dtype: str = "float32"
    """float32, bfloat16 autocast, or auto (bfloat16 only where native), for scoring and update passes; rollouts
    stay float32 (nanorlhf/precision.py)"""
    rollout_cache: str = "float32"
    """the rollouts' KV cache: float32, or bfloat16 where the CPU runs it natively (1.1-1.2x faster decoding in the
    bench, but about 1 s of a 60 s PPO run here, whose short answers keep the cache small: docs/results.md, speed)"""
    save_every: int = 20
    """iterations between checkpoints (kept as iter{N}.pt for over-optimisation curves)"""
    log_samples: int = 2
    """decoded samples printed per log line"""
    log_every: int = 5
    """iterations between printed progress lines"""
    dropout: float = 0.0
    """residual dropout of the policy during PPO (paper: off; SFT trained with 0.2)"""
    seed: int = 0
    """seed for prompt order and sampling"""
    device: str = "cpu"
    """cpu, cuda, or auto"""
    resume: bool = False
    """continue from out_dir/ckpt.pt, exactly (every random stream and data position is saved); the config must
    match the checkpoint's but for RESUME_MAY_CHANGE"""
    kill_at: int = 0
    """for the resume test: SIGKILL this process right after iteration N's checkpoint (0 = never)"""

    # values checked before any work starts (nanorlhf/config.py check_values)
    POSITIVE: ClassVar[tuple] = ("iterations", "ptx_batch_size", "save_every", "log_every")
    CHOICES: ClassVar[dict] = {"rollout_cache": ("float32", "bfloat16")}
    NONNEGATIVE: ClassVar[tuple] = ("log_samples", "dropout", "kill_at")

    PRESETS: ClassVar[dict] = {
        "tiny": dict(sft="out/tiny/sft/ckpt.pt", rm="out/tiny/rm/ckpt.pt", data_dir="data/tiny",
                     out_dir="out/tiny/ppo", iterations=2, batch_size=8, minibatch_size=4, max_new_tokens=16,
                     save_every=1, log_every=1),
        "small": dict(),
    }


# a resumed run may change these (iterated RLHF continues a policy against a new RM); any other change is refused
RESUME_MAY_CHANGE = ("resume", "kill_at", "iterations", "rm", "log_every", "log_samples", "save_every", "device")


def main(cfg: Config) -> dict:
    print_config(cfg)
    hp = cfg.ppo
    device = resolve_device(cfg.device)
    cfg = replace(cfg, dtype=resolve_dtype(cfg.dtype, device))  # auto: bfloat16 only where it runs natively
    seed_everything(cfg.seed)
    os.makedirs(cfg.out_dir, exist_ok=True)

    # policy pi_RL and reference pi_SFT start equal; the value function starts as the RM
    policy, tok, sft_ck = load_model(cfg.sft, device, dropout=cfg.dropout)
    ref, _, _ = load_model(cfg.sft, device, dropout=0.0)
    rm, _, rm_ck = load_model(cfg.rm, device, kind="scalar", dropout=0.0)
    rm_bias = rm_ck["extra"]["bias"] if hp.normalize_reward else 0.0
    if hp.value_init == "rm":
        value = value_from_rm(rm, rm_bias).to(device)
    else:  # ablation: a value head that knows nothing of the reward yet
        value = ScalarHeadModel.from_gpt(ref).to(device)
    for m in (ref, rm):
        m.requires_grad_(False).eval()
    opt = make_optimizer(torch.nn.ModuleList([policy, value]), hp.lr, weight_decay=0.0)
    kl_ctl = (ppo.AdaptiveKLController(hp.beta, hp.target_kl, hp.kl_horizon) if hp.target_kl > 0
              else ppo.FixedKLController(hp.beta))
    prompts = PromptSampler(os.path.join(cfg.data_dir, "ppo_prompts.jsonl"), tok,
                            policy.cfg.block_size - hp.max_new_tokens, seed=cfg.seed)
    ptx = (ptx_batches(cfg.data_dir, tok, policy.cfg.block_size, cfg.ptx_batch_size, cfg.seed)
           if hp.ptx_coef > 0 else None)
    guard = NonFiniteGuard(max_consecutive=3)
    ckpt_path = os.path.join(cfg.out_dir, "ckpt.pt")
    it = 0
    gen = torch.Generator().manual_seed(cfg.seed)                 # prompts' sampling, minibatch order
    if cfg.resume:
        ck = load_checkpoint(ckpt_path, map_location="cpu")  # RNG states stay CPU tensors; load_state_dict moves
        check_resume_config(ck, config_dict(cfg), ignore=RESUME_MAY_CHANGE)
        policy.load_state_dict(ck["model"])
        value.load_state_dict(ck["extra"]["value"])
        opt.load_state_dict(ck["optim"])
        prompts.load_state_dict(ck["data_pos"])
        set_rng_state(ck["rng"])
        gen.set_state(ck["extra"]["generator"])
        if ptx is not None:
            ptx.load_state_dict(ck["extra"]["ptx_pos"])
        kl_ctl.value, it = ck["extra"]["beta"], ck["step"]
        print(f"resumed from {ckpt_path} at iteration {it}")
    log = MetricsLog(os.path.join(cfg.out_dir, "metrics.jsonl"), fresh=not cfg.resume, keep_until=it)
    extra = {"model_config": dataclasses.asdict(policy.cfg), "tokenizer": sft_ck["extra"]["tokenizer"],
             "inputs": {p: file_sha256(p) for p in (cfg.sft, cfg.rm)}}

    def save(path):
        save_checkpoint(path, model=policy.state_dict(), config=config_dict(cfg), step=it, optim=opt.state_dict(),
                        data_pos=prompts.state_dict(),
                        extra={**extra, "value": value.state_dict(), "beta": kl_ctl.value, "generator": gen.get_state(),
                               "ptx_pos": ptx.state_dict() if ptx is not None else None})

    bar = Progress(cfg.iterations, "ppo", start_step=it)
    # FLOPs per real token: the trunks, and the unembedding on the positions that predict a response token
    trunk_p, trunk_v = flops_per_token(policy.cfg, unembedding=False), flops_per_token(value.cfg, unembedding=False)
    head = flops_per_token(policy.cfg) - trunk_p
    flops = 0.0
    while it < cfg.iterations:
        t0 = time.time()
        # 1. rollout: prompts -> responses, with the KV cache
        batch = prompts.next(hp.batch_size)
        ro = rollout(policy, tok, batch, hp, gen, cache_dtype(cfg.rollout_cache, device))
        t_gen = time.time() - t0
        # 2-4. score with the RM, per-token KL penalty, GAE (no gradients)
        with autocast(cfg.dtype, device):
            exp = make_experience(policy, ref, rm, value, ro, rm_bias=rm_bias, beta=kl_ctl.value, hp=hp)
        t_score = time.time() - t0 - t_gen
        if not guard.check(score=exp["score"].mean(), kl=exp["kl"].sum()):
            print(f"iteration {it}: non-finite score or KL, skipped ({guard.skipped} so far)")
            it += 1
            continue
        # 5. PPO epochs over minibatches, plus the pretraining mix (PPO-ptx)
        stats = []
        B = ro.tokens.size(0)
        for _ in range(hp.ppo_epochs):
            minibatches = (length_groups(ro.attention_mask, hp.minibatch_size, gen) if hp.group_by_length
                           else torch.randperm(B, generator=gen).split(hp.minibatch_size))
            for idx in minibatches:
                with autocast(cfg.dtype, device):
                    loss, s = minibatch_loss(policy, value, exp, idx, hp, ptx)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                gnorm = clip_grad(torch.nn.ModuleList([policy, value]), hp.grad_clip)
                if guard.check(loss=loss, grad_norm=gnorm):
                    opt.step()
                stats.append(s)
        it += 1
        # FLOPs on real tokens: rollout and 4 scoring passes (forward = 1/3 of training), PPO epochs, ptx batches
        n_real, n_resp = ro.attention_mask.sum().item(), ro.response_mask.sum().item()
        pol = n_real * trunk_p + n_resp * head                                  # one policy pass, training FLOPs
        flops += (3 * pol + 2 * n_real * trunk_v) / 3 + hp.ppo_epochs * (pol + n_real * trunk_v)
        flops += (len(stats) * cfg.ptx_batch_size * policy.cfg.block_size * (trunk_p + head)) if ptx is not None else 0
        # 6. log: fixed names, samples, plain-words diagnostics
        m = {k: sum(s[k] for s in stats) / len(stats) for k in stats[0]}
        m.update({"objective/score": exp["score"].mean().item(), "objective/kl": exp["kl"].sum(1).mean().item(),
                  "objective/beta": kl_ctl.value, "response/length": exp["length"].mean().item(),
                  "time/episodes_per_s": B / (time.time() - t0), "time/generate_s": t_gen,
                  "time/score_s": t_score, "time/update_s": time.time() - t0 - t_gen - t_score,
                  "time/tokens_per_s": ro.response_mask.sum().item() / (time.time() - t0)})
        log.write(it, **m)
        for w in diagnose(m, hp.max_new_tokens):
            print(f"WARNING iteration {it}: {w}")
        if it % cfg.log_every == 0 or it == cfg.iterations:
            print(bar.line(it, score=m["objective/score"], kl=m["objective/kl"], clipfrac=m["ppo/clipfrac"],
                           len=m["response/length"], eps=round(m["time/episodes_per_s"], 1)))
            show_samples(tok, batch, ro, exp, cfg.log_samples)
        # 7. adapt beta (if a target KL is set)
        kl_ctl.update(m["objective/kl"], B)
        if it % cfg.save_every == 0 or it == cfg.iterations:
            save(ckpt_path)
            save(os.path.join(cfg.out_dir, f"iter{it}.pt"))
            if cfg.kill_at and it == cfg.kill_at:
                os.kill(os.getpid(), signal.SIGKILL)  # the resume test: die without cleanup
    plot_curves(log.read(), ["objective/score", "objective/kl", "ppo/clipfrac", "ppo/approx_kl",
                             "val/explained_var", "response/length", "ptx/loss"],
                os.path.join(cfg.out_dir, "curves.png"), title=f"PPO (ptx_coef={hp.ptx_coef})", xlabel="iteration")
    print(f"done: {it} iterations, {guard.skipped} skipped steps -> {ckpt_path}")
    return {"metrics": log.read(), "ckpt": ckpt_path, "policy": policy, "value": value, "skipped": guard.skipped,
            "flops": flops}


if __name__ == "__main__":
    run(main, Config, __doc__)
