"""The one command: world -> tokenizer and base models -> SFT -> RM -> PPO, PPO-ptx -> baselines -> evaluation.

    python pipeline.py --preset=small     # the default CPU run; README gives its time and results
    python pipeline.py --preset=tiny      # the whole chain in about 15 s (the tests run it)
    python pipeline.py --preset=paper --device=cuda

Two sizes at least 10x apart go through every stage; one reward model, from the larger SFT model, serves both (as
the paper's 6B RM served every policy). On a CPU the RM's sampling, the stages after the RM, then the evaluation's
two halves run in two processes side by side (--lanes; nanorlhf/lanes.py). A stage whose checkpoint, config and
inputs are unchanged is skipped (nanorlhf/stages.py; --fresh=true redoes all). Writes out/<run>/report.md.
--lineage=true adds DPO, RLAIF-hybrid PPO and iterated online RLHF (nanorlhf/lineage.py) and the frontier section.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace
from typing import ClassVar

import pretrain
import train_ppo
import train_rm
import train_sft
from experiments.iterated import train_lineage
from nanorlhf.bench import speed_probe
from nanorlhf.cli import run
from nanorlhf.config import config_dict, parse_config, per_size, print_config
from nanorlhf.device import resolve_device
from nanorlhf.evals.context import EvalContext, Section
from nanorlhf.evals.findings import findings_markdown, run_findings
from nanorlhf.evals.ladder import ladder_policies
from nanorlhf.evals.suites import ladder_and_suites
from nanorlhf.fileio import write_text
from nanorlhf.judge import Judge
from nanorlhf.lanes import run_lanes
from nanorlhf.lineage import pipeline_frontier
from nanorlhf.model import count_params
from nanorlhf.precision import cpu_name, device_name, fast_bfloat16, resolve_dtype
from nanorlhf.report import stage_flops, write_report
from nanorlhf.stages import Stages
from nanorlhf.world import ensure_world


@dataclass
class Config:
    preset: str = "small"
    """tiny, small or paper: world scale and stage sizes"""
    run: str = ""
    """name of the run folder out/<run> (default: the preset)"""
    out_root: str = "out"
    """folder holding run folders"""
    data_root: str = "data"
    """folder holding world data folders (data/<preset>)"""
    sizes: str = "1m:4x128,100k:2x32"
    """model sizes as name:n_layerxn_embd, largest first"""
    pretrain_steps: str = "1m:1500,100k:1500"
    """pretraining steps per size"""
    attn: str = "manual"
    """attention of every model: manual, or sdpa (fused, tested equal; slower than manual under bfloat16 here)"""
    dtype: str = "auto"
    """autocast of pretraining, SFT, the RM fit and PPO's scoring and update passes: auto is bfloat16 where native
    (~1.5x faster with AVX512-BF16), float32 elsewhere (emulated: ~7x slower); sampling stays float32"""
    # DEVIATION: the paper fine-tunes every size alike (16 epochs, dropout 0.2); under dropout at lr 1e-3 the
    # 0.1M model underfits (validation loss 1.43; 0.43 without dropout at lr 6e-3), so it has its own recipe
    sft_epochs: str = "1m:6,100k:16"
    """SFT epochs per size (paper: 16), as size:value or one value for all (FLAN/T0 takes lr and dropout too)"""
    sft_lr: str = "1m:1e-3,100k:6e-3"
    """SFT peak learning rate per size"""
    sft_dropout: str = "1m:0.2,100k:0"
    """SFT residual dropout per size (paper: 0.2)"""
    flan_epochs: int = 4
    """epochs of the FLAN/T0 analog: about SFT's token budget (its batches hold ~1.3x SFT's padded tokens)"""
    rm_prompts: int = 4500
    """RM prompts labeled (the label budget; the world adds prompts past its own: nanorlhf/world --rm_extra)"""
    # DEVIATION: the paper's held-out-labeler RMs train on all the other groups' labels; here on 1,000 (time)
    rm_heldout_prompts: int = 1000
    """ranked prompts the held-out-labeler RM trains on (0 = all of its 4 groups'; train_rm --heldout_prompts)"""
    # DEVIATION: the paper trains its RM one epoch (more overfits at 6B); a 1M-parameter RM underfits in one, and
    # a third epoch adds about a point of accuracy over two (refits of both seeds' rankings: docs/results.md)
    rm_epochs: int = 3
    """RM epochs (paper: 1; one underfits at this label budget)"""
    rm_lr: float = 3e-4
    """RM learning rate"""
    # chosen on the 300 validation prompts (docs/results.md): in iterations of 64, 1m PPO-ptx won 57.5% after 60 and
    # 62.7% after 120; those 7,680 episodes as 60 of 128 won 61.1-63.9% over four PPO seeds where 120 of 64 won
    # 57.6-63.7% over five, 20% faster. The 100k model gains nothing from PPO (50.0%, 50.9%, 50.0% after 20, 40, 60
    # of 64: its SFT model is fitted), so it runs 15 of 128
    ppo_iterations: str = "1m:60,100k:15"
    """PPO iterations per size, each of --ppo_batch episodes"""
    ppo_batch: int = 128
    """episodes per PPO iteration (paper: 512), in minibatches of 32"""
    ppo_lr: float = 2e-4
    """PPO's learning rate (policy and value model)"""
    ppo_beta: float = 0.1
    """KL penalty coefficient (paper: 0.02; see README for why the toy needs more)"""
    # DEVIATION: one gamma_ptx in the paper; the small SFT model has forgotten its pretraining (LM loss 1.3 -> 8.9),
    # and at gamma 1 the mix pulls it back to the corpus and off the instructions (docs/results.md)
    ptx_coef: str = "1m:1,100k:0.1"
    """gamma_ptx of PPO-ptx per size"""
    n_eval: int = 300
    """test prompts in the evaluation"""
    sweeps: bool = False
    """also train PPO at other beta and gamma_ptx for the largest size: the paper's sweeps (three more 1m PPO runs)"""
    lineage: bool = False
    """also train the lineage (DPO, RLAIF-hybrid PPO, iterated PPO; nanorlhf/lineage.py) and report its frontier"""
    suites: str = "all"
    """evaluation suites beyond the ladder (all, none, or comma-separated names)"""
    seed: int = 0
    """seed of sampling and training"""
    labeler_seed: int = 0
    """seed of the simulated labeler pool"""
    device: str = "cpu"
    """cpu, cuda, or auto"""
    lanes: int = 2
    """on a CPU, the RM's sampling and the stages after the RM run in up to this many processes side by side (two
    lanes), the cores split between them (~1.5x the throughput on 2 cores: nanorlhf/lanes.py); 1 runs them in turn"""
    fresh: bool = False
    """redo every stage even when its checkpoint is up to date"""

    # values checked before any work starts (nanorlhf/config.py check_values)
    POSITIVE: ClassVar[tuple] = ("flan_epochs", "rm_epochs", "rm_lr", "ppo_lr",
                                 "ppo_beta", "ppo_batch", "n_eval", "lanes")
    NONNEGATIVE: ClassVar[tuple] = ("rm_prompts", "rm_heldout_prompts")

    PRESETS: ClassVar[dict] = {
        "tiny": dict(preset="tiny", sizes="a:2x64,b:1x16", pretrain_steps="a:60,b:60", sft_epochs="1", flan_epochs=1,
                     sft_lr="a:1e-3,b:3e-3", sft_dropout="a:0.2,b:0", ptx_coef="a:1,b:0.5", rm_prompts=48,
                     ppo_iterations="a:2,b:1", ppo_batch=8, n_eval=24, suites="none"),
        "small": dict(),
        "paper": dict(preset="paper", sizes="big:12x768,mid:8x256,small:4x128",
                      pretrain_steps="big:20000,mid:20000,small:20000", sft_epochs="16", sft_lr="1e-3",
                      sft_dropout="0.2", ptx_coef="1", rm_prompts=0, ppo_iterations="500", ppo_batch=64, n_eval=3000),
    }


def parse_sizes(cfg: Config) -> tuple[dict[str, dict], dict[str, dict]]:
    """(pretraining flags, and the SFT, PPO and PPO-ptx recipe) per size, largest first, from the per-size flags."""
    dims = dict(spec.split(":") for spec in cfg.sizes.split(","))
    steps = per_size(cfg.pretrain_steps, list(dims), "pretrain_steps", int)
    out = {}
    for name, d in dims.items():
        n_layer, n_embd = (int(x) for x in d.split("x"))
        out[name] = dict(n_layer=n_layer, n_embd=n_embd, n_head=max(1, n_embd // 32), max_steps=steps[name],
                         attn=cfg.attn)
    recipe = {k: per_size(getattr(cfg, k), list(dims), k, cast, positive) for k, cast, positive in
              (("sft_epochs", int, True), ("sft_lr", float, True), ("sft_dropout", float, False),
               ("ptx_coef", float, False), ("ppo_iterations", int, True))}
    return out, {name: {k: v[name] for k, v in recipe.items()} for name in dims}


def main(cfg: Config) -> dict:
    print_config(cfg)
    t0 = time.time()
    device = resolve_device(cfg.device)
    cfg = replace(cfg, dtype=resolve_dtype(cfg.dtype, device))  # each stage's key names the dtype it ran in
    print(f"dtype {cfg.dtype} on {device_name(device)} (native bfloat16: {fast_bfloat16(device)})")
    probe = [speed_probe(device, cfg.dtype)]  # and again at the end: how fast this machine ran today
    print(f"speed probe: a 1m-shape training step at {probe[0]:,.0f} tokens/s")
    run, scale = cfg.run or cfg.preset, cfg.preset
    out, data = os.path.join(cfg.out_root, run), os.path.join(cfg.data_root, scale)
    sizes, recipe = parse_sizes(cfg)
    names, big, st, n_lanes = list(sizes), list(sizes)[0], Stages(out, cfg.fresh), cfg.lanes if device == "cpu" else 1

    # 0. the world, its public-task compilation (FLAN/T0 analog), and RM prompts up to the label budget
    if ensure_world(data, scale, cfg.rm_prompts, cfg.fresh):  # False: already there, as this run needs it
        st.log["world"] = {"seconds": time.time() - t0}
    corpus = os.path.join(data, "corpus.jsonl")
    common = ["--preset=" + ("tiny" if scale == "tiny" else "small"), f"--device={cfg.device}", f"--seed={cfg.seed}"]

    # 1-4 as (name, main, cfg, inputs, ckpt): base models (the first trains the tokenizer), SFT and the FLAN/T0
    # analog on public tasks, one reward model from the largest SFT model, PPO and PPO-ptx against it
    def spec(name: str, script, inputs: list[str], *flags: str, ckpt: str = "ckpt.pt") -> tuple:
        c = parse_config(script.Config, common + [f"--out_dir={out}/{name}", f"--dtype={cfg.dtype}", *flags])
        return name, script.main, c, inputs, f"{out}/{name}/{ckpt}"

    def base(s: str) -> tuple:
        return spec(f"base_{s}", pretrain, [corpus], f"--corpus={corpus}", *(f"--{k}={v}" for k, v in sizes[s].items()))

    def sft(s: str, stage: str, demos: str, epochs: int) -> tuple:
        return spec(stage, train_sft, [f"{out}/base_{s}/ckpt.pt"], f"--base={out}/base_{s}/ckpt.pt",
                    f"--data_dir={data}", f"--demos={demos}", f"--epochs={epochs}", f"--lr={recipe[s]['sft_lr']}",
                    f"--dropout={recipe[s]['sft_dropout']}")

    def ppo(stage: str, s: str, beta: float, ptx: float) -> tuple:
        return spec(stage, train_ppo, [f"{out}/sft_{s}/ckpt.pt", f"{out}/rm/ckpt.pt"], f"--sft={out}/sft_{s}/ckpt.pt",
                    f"--rm={out}/rm/ckpt.pt", f"--data_dir={data}", f"--iterations={recipe[s]['ppo_iterations']}",
                    f"--batch_size={cfg.ppo_batch}", f"--ptx_coef={ptx}", f"--beta={beta}", f"--lr={cfg.ppo_lr}")
    trunk, cmp = f"{out}/sft_{big}/ckpt.pt", f"{out}/rm/comparisons.jsonl"
    rm_flags = [f"--sft={trunk}", f"--data_dir={data}", f"--labeler_seed={cfg.labeler_seed}", f"--lr={cfg.rm_lr}",
                f"--epochs={cfg.rm_epochs}"]
    rm = spec("rm", train_rm, [trunk], *rm_flags, f"--max_prompts={cfg.rm_prompts}", "--heldout_folds=0",
              f"--procs={n_lanes}")
    # the held-out-labeler test (§4.1) a stage of its own, to run beside PPO; it trains on the RM's comparisons
    heldout = spec("rm_heldout", train_rm, [trunk, cmp, f"{out}/rm/val_comparisons.jsonl"], *rm_flags,
                   "--heldout_only=true", f"--comparisons={cmp}", f"--heldout_prompts={cfg.rm_heldout_prompts}",
                   ckpt="heldout.json")
    sft_of = {s: sft(s, f"sft_{s}", "sft.jsonl", recipe[s]["sft_epochs"]) for s in names}
    flan_of = {s: sft(s, f"flan_{s}", "public_tasks.jsonl", cfg.flan_epochs) for s in names}
    ppo_of = {s: ppo(f"ppo_{s}", s, cfg.ppo_beta, 0.0) for s in names}
    ptx_of = {s: ppo(f"ppo_ptx_{s}", s, cfg.ppo_beta, recipe[s]["ptx_coef"]) for s in names}
    for job in (base(big), sft_of[big], rm):  # the largest base and SFT models, then the RM, on every core
        st.run(*job)
    # the rest in two lanes side by side (nanorlhf/lanes.py): the largest PPO-ptx model, its FLAN/T0 analog and
    # the held-out-labeler test beside its PPO model and the smaller sizes' every stage
    small = [s for s in names if s != big]
    run_lanes(st, [[ptx_of[big], flan_of[big], heldout],
                   [ppo_of[big], *(x for s in small for x in (base(s), sft_of[s], flan_of[s], ppo_of[s], ptx_of[s]))]],
              n_lanes)
    # 4b. the sweeps of the alignment-tax section: gamma_ptx up, and beta up instead of ptx
    sweep_runs = {}
    if cfg.sweeps:
        for stage, beta, ptx in ((f"ppo_beta0.02_{big}", 0.02, 0.0), (f"ppo_beta0.3_{big}", 0.3, 0.0),
                                 (f"ppo_ptx4_{big}", cfg.ppo_beta, 4.0)):
            st.run(*ppo(stage, big, beta, ptx))
            sweep_runs[stage] = (f"{out}/{stage}/ckpt.pt", beta, ptx)
        sweep_runs.update({f"ppo_{big}": (f"{out}/ppo_{big}/ckpt.pt", cfg.ppo_beta, 0.0),
                           f"ppo_ptx_{big}": (f"{out}/ppo_ptx_{big}/ckpt.pt", cfg.ppo_beta, recipe[big]["ptx_coef"])})
    # 4c. the lineage after InstructGPT, from the largest SFT model and the RM's comparisons
    if cfg.lineage:
        train_lineage(st, cfg, common, out, data, big, recipe[big]["ppo_iterations"])

    # 5. evaluation: the ladder beside the safety and capability suites on the largest size, then report.md
    t = time.time()
    ctx = EvalContext(Judge(data, cfg.labeler_seed), data, out, ladder_policies(out, names), rm=f"{out}/rm/ckpt.pt",
                      device=device, seed=cfg.seed, labeler_seed=cfg.labeler_seed, n=cfg.n_eval)
    params = {s: count_params(ctx.model(f"sft_{s}")[0])["total"] for s in names}
    sections = ladder_and_suites(ctx, (params, f"sft_{big}", f"ppo_ptx_{big}"), cfg.suites, big, n_lanes)
    if sweep_runs:
        from nanorlhf.evals.alignment_tax import sweep_sections
        sections += sweep_sections(ctx, sweep_runs, big)
    if cfg.lineage:  # best-of-n, PPO, PPO-ptx, DPO, RLAIF-hybrid and iterated PPO on one frontier
        sections.append(pipeline_frontier(ctx, out, big, cfg.preset, cfg.sweeps))
    st.log["evaluate"] = {"seconds": time.time() - t}
    total = time.time() - t0
    truth = next((s.data for s in sections if s.title.startswith("Truthfulness")), None)
    probe.append(speed_probe(device, cfg.dtype))
    machine = {"cpu": cpu_name(), "device": device_name(device), "dtype": cfg.dtype,
               "probe_tokens_per_s_start": probe[0], "probe_tokens_per_s_end": probe[1]}
    print(f"speed probe: {probe[0]:,.0f} tokens/s at the start, {probe[1]:,.0f} at the end")
    found = run_findings(sections[0].data["findings"], st.log["rm"]["result"]["report"], truth, total / 60, machine)
    write_text(os.path.join(out, "findings.json"), json.dumps(found, indent=1))
    sections.insert(0, Section("Findings", "\n".join(findings_markdown(found)), [], {}))
    path = write_report(out, config_dict(cfg), big, st.log, sections, stage_flops(st.log), total)
    print(f"\npipeline done in {total / 60:.1f} min -> {path}")
    return {"report": path, "seconds": total, "sections": sections}


if __name__ == "__main__":
    run(main, Config, __doc__)
