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
from nanorlhf.checkpoint import (check_resume_config, load_checkpoint, load_model, restore_copy,
                                 save_checkpoint, seed_everything, set_rng_state)
from nanorlhf.experience import make_experience, minibatch_loss, value_from_rm
from nanorlhf.generate import check_room
from nanorlhf.infra.cli import run
from nanorlhf.infra.config import config_dict, config_json, print_config
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import file_sha256, write_text
from nanorlhf.infra.guard import NonFiniteGuard
from nanorlhf.infra.metrics import MetricsLog, Progress, plot_curves, stage_title
from nanorlhf.infra.optim import clip_grad, make_optimizer
from nanorlhf.infra.precision import autocast, cache_dtype, resolve_dtype
from nanorlhf.model import ScalarHeadModel, count_params, flops_per_token
from nanorlhf.packing import length_groups
from nanorlhf.ppo import PPOConfig
from nanorlhf.recipe import stage_preset
from nanorlhf.rollout import PromptSampler, ptx_batches, rollout, show_samples


@dataclass
class Config:
    sft: str = "out/small/sft_1m/ckpt.pt"
    """SFT checkpoint: the initial policy and the frozen reference pi_SFT"""
    rm: str = "out/small/rm/ckpt.pt"
    """reward model checkpoint (also initialises the value function)"""
    data_dir: str = "data/small"
    """world data folder holding ppo_prompts.jsonl and corpus.jsonl"""
    out_dir: str = "out/small/ppo_1m"
    """where checkpoints, metrics and plots go"""
    iterations: int = 60
    """PPO iterations (each: one batch of episodes)"""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """PPO's hyperparameters and implementation switches (nanorlhf/ppo.py PPOConfig): each field is a flag"""
    ptx_batch_size: int = 8
    """pretraining sequences per gradient step when ptx_coef > 0"""
    dtype: str = "float32"
    """float32, bfloat16 autocast, or auto (bfloat16 only where native), for scoring and update passes; rollouts
    stay float32 (nanorlhf/infra/precision.py)"""
    rollout_cache: str = "float32"
    """the rollouts' KV cache: float32, or bfloat16 where the CPU runs it natively (faster decoding in the bench,
    little in a PPO run, whose short answers keep the cache small: python -m experiments.bench)"""
    save_every: int = 20
    """iterations between checkpoints (kept as iter{N}.pt for over-optimisation curves)"""
    log_samples: int = 2
    """decoded samples printed at the first progress line and the last"""
    log_every: int = 5
    """iterations between progress lines (at most about ten are printed: infra/metrics.py Progress.due)"""
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

    # values checked before any work starts (nanorlhf/infra/config.py check_values)
    POSITIVE: ClassVar[tuple] = ("iterations", "ptx_batch_size", "save_every", "log_every")
    CHOICES: ClassVar[dict] = {"rollout_cache": ("float32", "bfloat16")}
    NONNEGATIVE: ClassVar[tuple] = ("log_samples", "kill_at")
    RANGES: ClassVar[dict] = {"dropout": "[0, 1)"}

    PRESETS: ClassVar[dict] = {
        # the pipeline's ppo of the largest size (nanorlhf/recipe.py stage_preset: the same flags, the same model)
        "tiny": dict(stage_preset("tiny", "ppo"), minibatch_size=4, max_new_tokens=16, save_every=1, log_every=1),
        "small": stage_preset("small", "ppo"),
    }


# a resumed run may change these (iterated RLHF continues a policy against a new RM); any other change is refused
RESUME_MAY_CHANGE = ("resume", "kill_at", "iterations", "rm", "log_every", "log_samples", "save_every", "device")


@dataclass
class Models:
    """What one PPO run trains and reads: pi_RL and its value model (trained), pi_SFT and the RM (frozen)."""
    policy: torch.nn.Module
    value: torch.nn.Module
    ref: torch.nn.Module
    rm: torch.nn.Module
    rm_bias: float
    tok: object
    extra: dict
    """what every checkpoint of the run carries: the model config, the tokenizer, the inputs' hashes"""


def load_models(cfg: Config, device: str) -> Models:
    """policy pi_RL and reference pi_SFT start equal; the value function starts as the RM (InstructGPT §3.5)."""
    hp = cfg.ppo
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
    extra = {"model_config": dataclasses.asdict(policy.cfg), "tokenizer": sft_ck["extra"]["tokenizer"],
             "inputs": {p: file_sha256(p) for p in (cfg.sft, cfg.rm)}}
    return Models(policy, value, ref, rm, rm_bias, tok, extra)


@dataclass
class State:
    """Everything a resumed run must restore to continue exactly: the optimiser, beta, the prompt order and
    the pretraining stream's positions, the generator, and the iteration."""
    opt: torch.optim.Optimizer
    kl_ctl: object
    prompts: PromptSampler
    ptx: object
    gen: torch.Generator
    it: int = 0

    def save(self, cfg: Config, m: Models, path: str) -> None:
        save_checkpoint(path, model=m.policy.state_dict(), config=config_dict(cfg), step=self.it,
                        optim=self.opt.state_dict(), data_pos=self.prompts.state_dict(),
                        extra={**m.extra, "value": m.value.state_dict(), "beta": self.kl_ctl.value,
                               "generator": self.gen.get_state(),
                               "ptx_pos": self.ptx.state_dict() if self.ptx is not None else None})

    def resume(self, cfg: Config, m: Models, path: str) -> None:
        ck = load_checkpoint(path, map_location="cpu")  # RNG states stay CPU tensors; load_state_dict moves
        check_resume_config(ck, config_dict(cfg), ignore=RESUME_MAY_CHANGE)
        restore_copy(path, os.path.join(os.path.dirname(path), f"iter{ck['step']}.pt"))  # a kill may have cut it
        m.policy.load_state_dict(ck["model"])
        m.value.load_state_dict(ck["extra"]["value"])
        self.opt.load_state_dict(ck["optim"])
        self.prompts.load_state_dict(ck["data_pos"])
        set_rng_state(ck["rng"])
        self.gen.set_state(ck["extra"]["generator"])
        if self.ptx is not None:
            self.ptx.load_state_dict(ck["extra"]["ptx_pos"])
        self.kl_ctl.value, self.it = ck["extra"]["beta"], ck["step"]
        print(f"resumed from {path} at iteration {self.it}")


def new_state(cfg: Config, m: Models) -> State:
    hp = cfg.ppo
    opt = make_optimizer(torch.nn.ModuleList([m.policy, m.value]), hp.lr, weight_decay=0.0)
    kl_ctl = (ppo.AdaptiveKLController(hp.beta, hp.target_kl, hp.kl_horizon) if hp.target_kl > 0
              else ppo.FixedKLController(hp.beta))
    prompts = PromptSampler(os.path.join(cfg.data_dir, "ppo_prompts.jsonl"), m.tok,
                            m.policy.cfg.block_size - hp.max_new_tokens, seed=cfg.seed)
    ptx = (ptx_batches(cfg.data_dir, m.tok, m.policy.cfg.block_size, cfg.ptx_batch_size, cfg.seed)
           if hp.ptx_coef > 0 else None)
    return State(opt, kl_ctl, prompts, ptx, torch.Generator().manual_seed(cfg.seed))  # prompts' sampling, minibatches


def iteration_flops(cfg: Config, m: Models, ro, n_steps: int) -> float:
    """Training-equivalent FLOPs of one iteration on real tokens: the rollout and the four scoring passes (a
    forward pass is 1/3 of a training step), the PPO epochs, the ptx batches; the unembedding on response positions."""
    trunk_p, trunk_v = flops_per_token(m.policy.cfg, unembedding=False), flops_per_token(m.value.cfg, unembedding=False)
    head = flops_per_token(m.policy.cfg) - trunk_p
    n_real, n_resp = ro.attention_mask.sum().item(), ro.response_mask.sum().item()
    pol = n_real * trunk_p + n_resp * head                                      # one policy pass
    flops = (3 * pol + 2 * n_real * trunk_v) / 3 + cfg.ppo.ppo_epochs * (pol + n_real * trunk_v)
    return flops + (n_steps * cfg.ptx_batch_size * m.policy.cfg.block_size * (trunk_p + head) if cfg.ppo.ptx_coef > 0
                    else 0)


def ppo_epochs(cfg: Config, m: Models, s: State, exp: dict, guard: NonFiniteGuard, device: str) -> list[dict]:
    """Step 5: hp.ppo_epochs passes over the batch in minibatches (of similar length with group_by_length), one
    clipped-loss gradient step each, plus the pretraining mix (PPO-ptx). Returns each step's stats."""
    hp, stats, B = cfg.ppo, [], exp["tokens"].size(0)
    for _ in range(hp.ppo_epochs):
        minibatches = (length_groups(exp["attention_mask"], hp.minibatch_size, s.gen) if hp.group_by_length
                       else torch.randperm(B, generator=s.gen).split(hp.minibatch_size))
        for idx in minibatches:
            with autocast(cfg.dtype, device):
                loss, st = minibatch_loss(m.policy, m.value, exp, idx, hp, s.ptx)
            s.opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = clip_grad(torch.nn.ModuleList([m.policy, m.value]), hp.grad_clip)
            if guard.check(loss=loss, grad_norm=gnorm):
                s.opt.step()
            stats.append(st)
    guard.end_epoch(f"iteration {s.it + 1}")  # an iteration of zero gradients learns nothing: stop, save nothing
    return stats


def iteration_metrics(stats: list[dict], exp: dict, beta: float, times: tuple[float, float, float]) -> dict:
    """Step 6's fixed names: the minibatches' mean stats, the batch's score, KL, length and the time split."""
    t_gen, t_score, total = times
    B, n_resp = exp["tokens"].size(0), exp["response_mask"].sum().item()
    m = {k: sum(s[k] for s in stats) / len(stats) for k in stats[0]}
    m.update({"objective/score": exp["score"].mean().item(), "objective/kl": exp["kl"].sum(1).mean().item(),
              "objective/beta": beta, "response/length": exp["length"].mean().item(),
              "time/episodes_per_s": B / total, "time/generate_s": t_gen, "time/score_s": t_score,
              "time/update_s": total - t_gen - t_score, "time/tokens_per_s": n_resp / total})
    return m


def main(cfg: Config) -> dict:
    print_config(cfg)
    hp, device = cfg.ppo, resolve_device(cfg.device)
    print(f"PPO: beta {hp.beta}, {hp.batch_size} episodes an iteration in minibatches of {hp.minibatch_size}, "
          f"lr {hp.lr}, {cfg.iterations} iterations, gamma_ptx {hp.ptx_coef}", flush=True)
    cfg = replace(cfg, dtype=resolve_dtype(cfg.dtype, device))  # auto: bfloat16 only where it runs natively
    seed_everything(cfg.seed)
    m = load_models(cfg, device)
    check_room(hp.max_new_tokens, m.policy.cfg.block_size)
    s, guard, ckpt = new_state(cfg, m), NonFiniteGuard(max_consecutive=3), os.path.join(cfg.out_dir, "ckpt.pt")
    os.makedirs(cfg.out_dir, exist_ok=True)
    if cfg.resume:
        s.resume(cfg, m, ckpt)
    log = MetricsLog(os.path.join(cfg.out_dir, "metrics.jsonl"), fresh=not cfg.resume, keep_until=s.it)
    bar, flops = Progress(cfg.iterations, "ppo", start_step=s.it), 0.0
    while s.it < cfg.iterations:
        t0 = time.time()
        # 1. rollout: prompts -> responses, with the KV cache
        batch = s.prompts.next(hp.batch_size)
        ro = rollout(m.policy, m.tok, batch, hp, s.gen, cache_dtype(cfg.rollout_cache, device))
        t_gen = time.time() - t0
        # 2-4. score with the RM, per-token KL penalty (eq. 2), GAE (no gradients)
        with autocast(cfg.dtype, device):
            exp = make_experience(m.policy, m.ref, m.rm, m.value, ro, rm_bias=m.rm_bias, beta=s.kl_ctl.value, hp=hp)
        t_score = time.time() - t0 - t_gen
        if not guard.check(score=exp["score"].mean(), kl=exp["kl"].sum()):
            print(f"iteration {s.it}: non-finite score or KL, skipped ({guard.skipped} so far)")
            s.it += 1
            continue
        # 5. PPO epochs over minibatches, plus the pretraining mix (PPO-ptx)
        stats = ppo_epochs(cfg, m, s, exp, guard, device)
        s.it += 1
        flops += iteration_flops(cfg, m, ro, len(stats))
        # 6. log: fixed names, samples, plain-words diagnostics
        metrics = iteration_metrics(stats, exp, s.kl_ctl.value, (t_gen, t_score, time.time() - t0))
        log.write(s.it, **metrics)
        for w in ppo.diagnose(metrics, hp.max_new_tokens):
            print(f"WARNING iteration {s.it}: {w}")
        if (s.it % cfg.log_every == 0 or s.it == cfg.iterations) and bar.due(s.it):
            print(bar.line(s.it, score=metrics["objective/score"], kl=metrics["objective/kl"],
                           clipfrac=metrics["ppo/clipfrac"], len=metrics["response/length"],
                           eps=round(metrics["time/episodes_per_s"], 1)))
            if bar.printed == 1 or s.it == cfg.iterations:  # samples at the first line and the last: what moved
                show_samples(m.tok, batch, ro, exp, cfg.log_samples)
        # 7. adapt beta (if a target KL is set)
        s.kl_ctl.update(metrics["objective/kl"], len(batch))
        if s.it % cfg.save_every == 0 or s.it == cfg.iterations:
            s.save(cfg, m, ckpt)
            s.save(cfg, m, os.path.join(cfg.out_dir, f"iter{s.it}.pt"))
            if cfg.kill_at and s.it == cfg.kill_at:
                os.kill(os.getpid(), signal.SIGKILL)  # the resume test: die without cleanup
    plot_curves(log.read(), ["objective/score", "objective/kl", "ppo/clipfrac", "ppo/approx_kl",
                             "val/explained_var", "response/length", "ptx/loss"],
                os.path.join(cfg.out_dir, "curves.png"), xlabel="iteration",
                title=stage_title(f"PPO{'-ptx' * (hp.ptx_coef > 0)} (beta={hp.beta}, ptx_coef={hp.ptx_coef})",
                                  cfg.out_dir, count_params(m.policy)["total"]))
    print(f"done: {s.it} iterations, {guard.skipped} skipped steps -> {ckpt}")
    write_text(os.path.join(cfg.out_dir, "config.json"), config_json(cfg))  # replay: --config=this file
    return {"metrics": log.read(), "ckpt": ckpt, "policy": m.policy, "value": m.value, "skipped": guard.skipped,
            "flops": flops}


if __name__ == "__main__":
    run(main, Config, __doc__)
