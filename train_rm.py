"""Stage 2: the reward model, trained on K-way rankings from simulated labelers (InstructGPT §3.5).

  1. sample   K = 4..9 completions per RM prompt from the SFT model (KV-cache engine)
  2. rank     one screened training labeler per prompt ranks them (ties allowed), as in the paper;
              the comparisons are saved as data (comparisons.jsonl) for reuse, export and mixing
  3. train    the SFT trunk with a scalar head in place of the unembedding, one epoch,
              all C(K, 2) pairs of a prompt in ONE batch element:
              loss = -1/C(K,2) * sum log sigmoid(r(x, y_w) - r(x, y_l))
  4. bias     so that the labelers' demonstrations score 0 on average
  5. report   validation pairwise accuracy beside the labelers' own agreement (the ceiling),
              and the held-out-labeler test (train on 4 labeler groups, predict the 5th)

    python train_rm.py --preset=tiny
    python train_rm.py --preset=small
    python train_rm.py --preset=small --comparisons=out/small/rm/comparisons.jsonl   # reuse labels
    python train_rm.py --preset=small --heldout_only=true --comparisons=out/small/rm/comparisons.jsonl \
        --out_dir=out/small/rm_heldout                                        # step 5's held-out test alone

    # a larger label budget: 9,000 RM prompts (the world's other sets unchanged), two epochs
    python -m nanorlhf.world --scale=small --rm_extra=7500 --out=data/small_rm9k
    python train_rm.py --preset=small --data_dir=data/small_rm9k --epochs=2 --lr=3e-4 --out_dir=out/small/rm_9k
    python train_ppo.py --preset=small --rm=out/small/rm_9k/ckpt.pt --beta=0.1 --iterations=120 \
        --batch_size=128 --out_dir=out/small/ppo_rm9k                               # README: ~64% wins
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
from dataclasses import dataclass, field, replace
from typing import ClassVar

from nanorlhf.checkpoint import (check_resume_config, load_checkpoint, load_model, remove_checkpoint, save_checkpoint,
                                 seed_everything, set_rng_state)
from nanorlhf.evals.heldout import heldout_group_eval
from nanorlhf.evals.preference import ratio_interval
from nanorlhf.generate import check_room
from nanorlhf.infra.cli import UsageError, run
from nanorlhf.infra.config import config_dict, config_json, print_config
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import file_sha256, write_text
from nanorlhf.infra.jsonl import DEMO, DataError, read_jsonl
from nanorlhf.infra.metrics import MetricsLog, plot_curves, stage_title
from nanorlhf.infra.precision import autocast, resolve_dtype
from nanorlhf.interop.pairs import read_pairs
from nanorlhf.model import ScalarHeadModel, count_params, flops_per_token
from nanorlhf.rankings import comparisons_to_two_way
from nanorlhf.recipe import stage_preset
from nanorlhf.reward import RewardConfig, RMFit, demo_bias, fit_reward_model, ranking_accuracy, ranking_counts
from nanorlhf.world.comparisons import CollectConfig, agreement_counts, collect_comparisons, load_comparisons
from nanorlhf.world.judge import Judge


@dataclass
class Config:
    sft: str = "out/small/sft_1m/ckpt.pt"
    """SFT checkpoint: samples the completions and initialises the RM trunk"""
    init: str = ""
    """checkpoint whose trunk initialises the RM (default: the SFT model, as the paper does)"""
    data_dir: str = "data/small"
    """world data folder holding rm_prompts.jsonl, val_prompts.jsonl, sft.jsonl"""
    out_dir: str = "out/small/rm"
    """where the RM checkpoint, comparisons and metrics go"""
    comparisons: str = ""
    """reuse these comparisons (JSONL) instead of sampling and labeling anew"""
    pairs: str = ""
    """or train on preference pairs: TRL, TRL conversational or Anthropic HH rows (nanorlhf/interop/pairs.py),
    each K = 2"""
    human_labels: str = ""
    """labeling logs from label.py (comma-separated) whose comparisons join the training set"""
    human_weight: float = 1.0
    """weight of one human comparison relative to one simulated comparison"""
    human_only: bool = False
    """train on the human comparisons alone (validation stays on the simulated labelers)"""
    collect: CollectConfig = field(default_factory=CollectConfig)
    """how comparisons are collected (nanorlhf/world/comparisons.py CollectConfig): each field is a flag"""
    rm: RewardConfig = field(default_factory=RewardConfig)
    """the RM fit's hyperparameters (nanorlhf/reward.py RewardConfig): each field is a flag"""
    dtype: str = "float32"
    """float32, bfloat16 autocast, or auto (bfloat16 only where native), for the RM's training and scoring
    passes (nanorlhf/infra/precision.py)"""
    heldout_folds: int = 1
    """labeler groups to hold out in turn for the held-out-labeler test (0 = skip, 5 = all)"""
    heldout_prompts: int = 0
    """ranked prompts the held-out-labeler RM trains on, the first of the 4 groups' (0 = all of them)"""
    heldout_only: bool = False
    """run only the held-out-labeler test, on --comparisons and the val_comparisons.jsonl beside them (an
    earlier run's; pipeline.py runs it as a stage of its own, beside PPO), writing out_dir/heldout.json"""
    procs: int = 1
    """CPU processes, one core each, that sample the completions (the same samples for any number;
    nanorlhf/world/comparisons.py sample_completions)"""
    labeler_seed: int = 0
    """seed of the simulated labeler pool"""
    seed: int = 0
    """seed for sampling and batch order"""
    device: str = "cpu"
    """cpu, cuda, or auto"""
    resume: bool = False
    """continue an unfinished fit from out_dir/fit.pt, exactly (its comparisons reread from out_dir); the config
    must match the fit's but for RESUME_MAY_CHANGE"""
    save_every: int = 50
    """RM steps between resume points (out_dir/fit.pt, removed once ckpt.pt is written)"""
    kill_at: int = 0
    """for the resume test: SIGKILL this process right after step N's resume point (0 = never)"""

    # values checked before any work starts (nanorlhf/infra/config.py check_values)
    POSITIVE: ClassVar[tuple] = ("human_weight", "procs", "save_every")
    NONNEGATIVE: ClassVar[tuple] = ("heldout_prompts", "kill_at")
    RANGES: ClassVar[dict] = {"heldout_folds": "[0, 5]"}  # the labelers form 5 groups
    RULES: ClassVar[tuple] = (
        (lambda c: not (c.comparisons and c.pairs), "give --comparisons or --pairs, not both"),
        (lambda c: c.human_labels or not c.human_only, "--human_only=true needs --human_labels (label.py's logs)"),
        (lambda c: not c.heldout_only or (c.comparisons and c.heldout_folds > 0),
         "--heldout_only=true needs --comparisons (an RM run's comparisons.jsonl) and --heldout_folds > 0"),
        (lambda c: not (c.heldout_only and c.resume), "--heldout_only=true has nothing to resume"),
    )

    PRESETS: ClassVar[dict] = {
        # the pipeline's RM (nanorlhf/recipe.py stage_preset)
        "tiny": dict(stage_preset("tiny", "rm"), val_prompts=16, max_new_tokens=16, gen_batch=32, batch_prompts=4),
        "small": stage_preset("small", "rm"),
    }


# a resumed fit may change these; any other change is refused
RESUME_MAY_CHANGE = ("resume", "kill_at", "save_every", "device", "procs")


def read_inputs(cfg: Config, tok, device: str) -> tuple:
    """(given comparisons or None, human comparisons, the trunk's initial model or None): every input read, and a
    bad one refused, before any sampling."""
    given = load_comparisons(cfg.comparisons) if cfg.comparisons else read_pairs(cfg.pairs) if cfg.pairs else None
    if given is not None and not (cfg.collect.claim_checks or cfg.collect.fact_checks):  # reused without its checks
        given = [c for c in given if not c["id"].startswith("check-")]
    human = []
    if cfg.human_labels:  # a person's labels (label.py), alone or mixed in with a weight
        from nanorlhf.labelapp.events import human_comparisons
        for path in cfg.human_labels.split(","):
            if not os.path.isfile(path):
                raise UsageError(f"--human_labels: no such labeling log: {path}")
            rows = human_comparisons([path])
            if not rows:
                raise DataError(f"{path}: no usable human label in it (gold questions and can't-tell are left out)")
            human += [dict(c, weight=cfg.human_weight) for c in rows]
    init = load_model(cfg.init, device, dropout=0.0)[0] if cfg.init else None
    return given, human, init


def main(cfg: Config) -> dict:
    print_config(cfg)
    device = resolve_device(cfg.device)
    cfg = replace(cfg, dtype=resolve_dtype(cfg.dtype, device))  # auto: bfloat16 only where it runs natively
    seed_everything(cfg.seed)
    if cfg.procs > 1 and device != "cpu":
        raise UsageError(f"--procs={cfg.procs} splits the sampling between CPU processes; on {device} use --procs=1")
    sft, tok, sft_ck = load_model(cfg.sft, device, dropout=0.0)
    check_room(cfg.collect.max_new_tokens, sft.cfg.block_size)
    if cfg.heldout_only:
        return heldout_only(cfg, sft, tok, device)
    given, human, init = read_inputs(cfg, tok, device)
    fit_path, fit = os.path.join(cfg.out_dir, "fit.pt"), RMFit(every=cfg.save_every)
    if cfg.resume:
        if not os.path.exists(fit_path):
            raise UsageError(f"--resume=true: no unfinished RM fit in {cfg.out_dir} (fit.pt; a finished run "
                             "removes it)")
        ck = load_checkpoint(fit_path)
        check_resume_config(ck, config_dict(cfg), ignore=RESUME_MAY_CHANGE)
    os.makedirs(cfg.out_dir, exist_ok=True)

    # 1-2. sample K completions per prompt and have one training labeler rank them (a resumed fit rereads them)
    judge = Judge(cfg.data_dir, labeler_seed=cfg.labeler_seed)
    if cfg.resume:
        train_cmp = given or load_comparisons(os.path.join(cfg.out_dir, "comparisons.jsonl"))
        val_cmp = load_comparisons(os.path.join(cfg.out_dir, "val_comparisons.jsonl"))
    else:
        train_cmp, val_cmp = collect_comparisons(sft, tok, judge, cfg.data_dir, cfg.out_dir, cfg.collect, cfg.seed,
                                                 only_val=given is not None, procs=cfg.procs)
        train_cmp = given if given is not None else train_cmp
    if cfg.human_labels:
        train_cmp = human if cfg.human_only else train_cmp + human
        print(f"{len(human)} human comparisons (weight {cfg.human_weight}) "
              + ("alone" if cfg.human_only else "mixed with the simulated ones"))
    print(f"{len(train_cmp)} training comparisons ({sum(len(c['completions']) for c in train_cmp)} completions), "
          f"{len(val_cmp)} validation")

    # 3. the RM: SFT trunk + scalar head, one epoch, each prompt's K-way ranking one batch element
    fit_cmp = train_cmp  # what the optimiser sees; train_cmp stays one row per ranked prompt (the label count)
    if not cfg.rm.kway_batch:  # ablation: every pair its own item, so each completion is seen K - 1 times
        fit_cmp = comparisons_to_two_way(train_cmp)
        print(f"kway_batch=false: {len(fit_cmp)} pairs shuffled as separate comparisons")
    rm = ScalarHeadModel.from_gpt(init or sft).to(device)
    if cfg.resume:  # the weights, RNG states, batch order, optimiser and losses of the resume point
        rm.load_state_dict(ck["model"])
        set_rng_state(ck["rng"])
        fit = RMFit(**ck["extra"]["fit"], every=cfg.save_every)
        print(f"resumed the RM fit from {fit_path} at step {fit.step}")
    # a resumed fit keeps the rows logged up to its resume point: the steps it redoes are logged once
    log = MetricsLog(os.path.join(cfg.out_dir, "metrics.jsonl"), fresh=not cfg.resume, keep_until=fit.step)

    def save_fit(f: RMFit) -> None:
        save_checkpoint(fit_path, model=rm.state_dict(), config=config_dict(cfg), step=f.step, extra={"fit": f.state()})
        if cfg.kill_at and f.step == cfg.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # the resume test: die without cleanup
    fit.save, fit.validate = save_fit, lambda: ranking_accuracy(rm, tok, val_cmp, device, every=True)
    with autocast(cfg.dtype, device):  # sampling above stays float32
        fit_reward_model(rm, tok, fit_cmp, cfg.rm, seed=cfg.seed, log=log, fit=fit)

        # 4. bias: labelers' demonstrations score 0 on average (paper §3.5)
        demos = read_jsonl(os.path.join(cfg.data_dir, "sft.jsonl"), DEMO)[:256]
        bias = demo_bias(rm, tok, demos, device)

        # 5. report: accuracy on held-out comparisons beside the labelers' agreement (the ceiling), both over
        # every ranking of the validation completions (several labelers each), pairs pooled
        acc, agree = ranking_counts(rm, tok, val_cmp, device, every=True), agreement_counts(val_cmp)
        report = {"val_accuracy": sum(k for k, _ in acc) / max(1, sum(n for _, n in acc)),
                  "labeler_agreement": sum(k for k, _ in agree) / max(1, sum(n for _, n in agree)),
                  "ratio_interval": ratio_interval(acc, agree, seed=cfg.seed),
                  "n_train_comparisons": len(train_cmp), "n_val_comparisons": len(val_cmp)}
        print(f"RM validation pairwise accuracy {report['val_accuracy']:.3f} "
              f"(labelers agree with each other on {report['labeler_agreement']:.3f} of the same pairs; "
              f"ratio {report['val_accuracy'] / report['labeler_agreement']:.2f})")
        if cfg.heldout_folds > 0 and given is None:
            report["heldout"] = heldout_group_eval(sft, tok, judge, (train_cmp, val_cmp), cfg.rm,
                                                   folds=cfg.heldout_folds, seed=cfg.seed,
                                                   max_prompts=cfg.heldout_prompts)
    plot_curves(log.read(), ["rm/loss", "rm/accuracy", "val/accuracy"], os.path.join(cfg.out_dir, "curves.png"),
                title=stage_title("reward model", cfg.out_dir, count_params(rm)["total"]))
    extra = {"model_config": dataclasses.asdict(rm.cfg), "tokenizer": sft_ck["extra"]["tokenizer"], "bias": bias,
             "report": report, "inputs": {cfg.sft: file_sha256(cfg.sft)}}
    ckpt = os.path.join(cfg.out_dir, "ckpt.pt")
    save_checkpoint(ckpt, model=rm.state_dict(), config=config_dict(cfg), extra=extra)
    write_text(os.path.join(cfg.out_dir, "report.json"), json.dumps(report, indent=1))
    remove_checkpoint(fit_path)  # the fit is finished: nothing to resume
    # FLOPs: sampling (forward only, 1/3 of training per token) plus one training pass per epoch
    n_tok = sum(len(tok.encode(c["prompt"])) + len(tok.encode(x)) + 3 for c in fit_cmp for x in c["completions"])
    flops = flops_per_token(rm.cfg, unembedding=False) * n_tok * ((0 if given is not None else 1 / 3) + cfg.rm.epochs)
    print(f"done: bias {bias:+.3f} -> {ckpt}")
    write_text(os.path.join(cfg.out_dir, "config.json"), config_json(cfg))  # replay: --config=this file
    return {"report": report, "ckpt": ckpt, "rm": rm, "bias": bias, "flops": flops}


def heldout_only(cfg: Config, sft, tok, device) -> dict:
    """The held-out-labeler test alone, on an earlier run's comparisons (train and validation)."""
    train_cmp = load_comparisons(cfg.comparisons)
    val_cmp = load_comparisons(os.path.join(os.path.dirname(cfg.comparisons), "val_comparisons.jsonl"))
    judge = Judge(cfg.data_dir, labeler_seed=cfg.labeler_seed)
    with autocast(cfg.dtype, device):
        heldout = heldout_group_eval(sft, tok, judge, (train_cmp, val_cmp), cfg.rm, folds=cfg.heldout_folds,
                                     seed=cfg.seed, max_prompts=cfg.heldout_prompts)
    os.makedirs(cfg.out_dir, exist_ok=True)
    write_text(os.path.join(cfg.out_dir, "heldout.json"), json.dumps(heldout, indent=1))
    return {"heldout": heldout}


if __name__ == "__main__":
    run(main, Config, __doc__)
