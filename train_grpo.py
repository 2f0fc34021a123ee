"""After PPO: critic-free RL (GRPO, Dr. GRPO, RLOO, REINFORCE with a group baseline) from the SFT model.

Each iteration, for P prompts:
  1. sample    G responses per prompt with the KV cache (the group)
  2. reward    the RM's score (RLHF), a rule's verdict on the response (RLVR: world/verifiers.py), or a
               fair coin (the control); beta * KL in the reward (k1_reward) or, later, in the loss
  3. baseline  each response's advantage against its group (pg.group_advantages): no value model
  4. update    epochs of the clipped surrogate with clip-higher, aggregated per sequence, per token or by a
               constant (pg.aggregate), plus beta * k2 or k3 where the KL is a loss term
  5. log       reward, KL, entropy, clip fractions (low, high), groups of equal rewards, length, cut-offs

    python train_grpo.py --preset=tiny                                    # seconds
    python train_grpo.py --preset=small --estimator=rloo --out_dir=out/small/rloo_1m
    python train_grpo.py --preset=small --reward=rlvr --out_dir=out/small/rlvr_1m     # verifiable tasks only

No --resume: a run is minutes long; the frontier (experiments/frontier.py) caches finished runs.
"""
from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field, replace
from typing import ClassVar

import torch

from nanorlhf.chat import chat_prompt
from nanorlhf.checkpoint import load_model, save_checkpoint, seed_everything
from nanorlhf.experience import make_group_experience, pg_minibatch_loss
from nanorlhf.generate import SamplingConfig, generate_in_length_groups, response_texts
from nanorlhf.infra.cli import run
from nanorlhf.infra.config import config_dict, config_json, print_config
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import file_sha256, write_text
from nanorlhf.infra.guard import NonFiniteGuard
from nanorlhf.infra.metrics import MetricsLog, Progress, plot_curves
from nanorlhf.infra.optim import clip_grad, make_optimizer
from nanorlhf.infra.precision import autocast, resolve_dtype
from nanorlhf.masks import last_token_index
from nanorlhf.packing import length_groups
from nanorlhf.pg import PGConfig
from nanorlhf.recipe import stage_preset
from nanorlhf.rollout import PromptSampler
from nanorlhf.world import prompt_from_dict
from nanorlhf.world.verifiers import checkable, random_rewards, verifiable


@dataclass
class Config:
    sft: str = "out/small/sft_1m/ckpt.pt"
    """SFT checkpoint: the initial policy and the frozen reference pi_SFT"""
    rm: str = "out/small/rm/ckpt.pt"
    """reward model checkpoint (for --reward=rm)"""
    data_dir: str = "data/small"
    """world data folder holding ppo_prompts.jsonl"""
    out_dir: str = "out/small/grpo_1m"
    """where checkpoints, metrics and plots go"""
    reward: str = "rm"
    """rm (the learned reward model: RLHF), rlvr (a rule checks the response: verifiable tasks only), random"""
    iterations: int = 60
    """iterations, each P prompts x G responses"""
    pg: PGConfig = field(default_factory=PGConfig)
    """the critic-free method (nanorlhf/pg.py PGConfig): each field is a flag"""
    dtype: str = "float32"
    """float32, bfloat16 autocast, or auto (bfloat16 only where native), for scoring and update passes"""
    save_every: int = 20
    """iterations between checkpoints (kept as iter{N}.pt)"""
    log_every: int = 5
    """iterations between printed progress lines"""
    seed: int = 0
    """seed for prompt order, sampling and the random reward"""
    device: str = "cpu"
    """cpu, cuda, or auto"""

    POSITIVE: ClassVar[tuple] = ("iterations", "save_every", "log_every")
    CHOICES: ClassVar[dict] = {"reward": ("rm", "rlvr", "random")}
    PRESETS: ClassVar[dict] = {
        # GRPO from the pipeline's SFT model and RM at PPO's budget (nanorlhf/recipe.py stage_preset)
        "tiny": dict(stage_preset("tiny", "grpo"), group_size=4, prompts_per_iteration=2, minibatch_size=4,
                     max_new_tokens=16, save_every=1, log_every=1),
        "small": stage_preset("small", "grpo"),
    }


def rule_rewards(cfg: Config, batch: list[dict], texts: list[str], gen: torch.Generator):
    """The rewards that no model computes: a verifiable task's rule, or the control's coin. None for the RM."""
    if cfg.reward == "random":
        return random_rewards(len(texts), gen)
    if cfg.reward == "rlvr":
        rows = [r for r in batch for _ in range(cfg.pg.group_size)]
        return torch.tensor([verifiable(prompt_from_dict(r), t) for r, t in zip(rows, texts)])
    return None


def update(cfg: Config, policy, opt, exp: dict, gen, guard, device: str) -> list[dict]:
    """Step 4: cfg.pg.epochs passes over the episodes in minibatches of similar length, one gradient step each."""
    hp, stats = cfg.pg, []
    for _ in range(hp.epochs):
        for idx in length_groups(exp["attention_mask"], hp.minibatch_size, gen):
            with autocast(cfg.dtype, device):
                loss, s = pg_minibatch_loss(policy, exp, idx, hp)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if guard.check(loss=loss, grad_norm=clip_grad(policy, hp.grad_clip)):
                opt.step()
            stats.append(s)
    return stats


def main(cfg: Config) -> dict:
    print_config(cfg)
    hp, device = cfg.pg, resolve_device(cfg.device)
    cfg = replace(cfg, dtype=resolve_dtype(cfg.dtype, device))
    seed_everything(cfg.seed)
    policy, tok, sft_ck = load_model(cfg.sft, device, dropout=0.0)
    ref, _, _ = load_model(cfg.sft, device, dropout=0.0)
    ref.requires_grad_(False).eval()
    rm, rm_bias = None, 0.0
    if cfg.reward == "rm":
        rm, _, rm_ck = load_model(cfg.rm, device, kind="scalar", dropout=0.0)
        rm.requires_grad_(False).eval()
        rm_bias = rm_ck["extra"]["bias"]
    os.makedirs(cfg.out_dir, exist_ok=True)
    # RLVR trains on the tasks a rule can check, and on nothing else
    keep = (lambda r: checkable(prompt_from_dict(r))) if cfg.reward == "rlvr" else None
    prompts = PromptSampler(os.path.join(cfg.data_dir, "ppo_prompts.jsonl"), tok,
                            policy.cfg.block_size - hp.max_new_tokens, seed=cfg.seed, keep=keep)
    opt, gen = make_optimizer(policy, hp.lr, weight_decay=0.0), torch.Generator().manual_seed(cfg.seed)
    sampling = SamplingConfig(max_new_tokens=hp.max_new_tokens, temperature=hp.temperature)
    guard, log = NonFiniteGuard(max_consecutive=3), MetricsLog(os.path.join(cfg.out_dir, "metrics.jsonl"), fresh=True)
    extra = {"model_config": dataclasses.asdict(policy.cfg), "tokenizer": sft_ck["extra"]["tokenizer"],
             "inputs": {p: file_sha256(p) for p in ((cfg.sft, cfg.rm) if rm is not None else (cfg.sft,))}}
    bar, ckpt = Progress(cfg.iterations, "grpo"), os.path.join(cfg.out_dir, "ckpt.pt")
    for it in range(1, cfg.iterations + 1):
        t0 = time.time()
        # 1. sample: G responses to each of P prompts, a group's rows consecutive
        batch = prompts.next(hp.prompts_per_iteration)
        ids = [chat_prompt(tok, r["prompt"]) for r in batch for _ in range(hp.group_size)]
        ro = generate_in_length_groups(policy, ids, sampling, group_size=hp.minibatch_size, generator=gen,
                                       stop_token=tok.eot_id, pad_id=tok.pad_id)
        texts = response_texts(ro, tok)
        # 2-3. reward (and k1 KL in it), group advantages
        with autocast(cfg.dtype, device):
            exp = make_group_experience(policy, ref, rm, ro, rule_rewards(cfg, batch, texts, gen), rm_bias=rm_bias,
                                        hp=hp)
        # 4. update
        stats = update(cfg, policy, opt, exp, gen, guard, device)
        # 5. log
        m = {k: sum(s[k] for s in stats) / len(stats) for k in stats[0]}
        last = ro.tokens.gather(1, last_token_index(ro.response_mask)[:, None]).squeeze(1)     # (B,)
        m.update({"objective/reward": exp["reward"].mean().item(), "objective/kl": exp["kl"].sum(1).mean().item(),
                  "pg/equal_groups": exp["equal_groups"], "response/length": exp["length"].mean().item(),
                  "response/cut_off": (last != tok.eot_id).float().mean().item(),
                  "time/episodes_per_s": len(texts) / (time.time() - t0)})
        log.write(it, **m)
        if it % cfg.log_every == 0 or it == cfg.iterations:
            print(bar.line(it, reward=m["objective/reward"], kl=m["objective/kl"], eq=m["pg/equal_groups"],
                           len=m["response/length"], eps=round(m["time/episodes_per_s"], 1)))
            print(f"  {batch[0]['prompt'][:60]!r} -> {texts[0][:100]!r}")
        if it % cfg.save_every == 0 or it == cfg.iterations:
            for path in (ckpt, os.path.join(cfg.out_dir, f"iter{it}.pt")):
                save_checkpoint(path, model=policy.state_dict(), config=config_dict(cfg), step=it, extra=extra)
    plot_curves(log.read(), ["objective/reward", "objective/kl", "entropy", "clipfrac_high", "pg/equal_groups",
                             "response/length"], os.path.join(cfg.out_dir, "curves.png"),
                title=f"{hp.estimator} ({cfg.reward} reward)", xlabel="iteration")
    print(f"done: {cfg.iterations} iterations, {guard.skipped} skipped steps -> {ckpt}")
    write_text(os.path.join(cfg.out_dir, "config.json"), config_json(cfg))  # replay: --config=this file
    return {"metrics": log.read(), "ckpt": ckpt, "policy": policy, "skipped": guard.skipped}


if __name__ == "__main__":
    run(main, Config, __doc__)
