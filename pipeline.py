"""The one command: world -> tokenizer and base models -> SFT -> RM -> PPO, PPO-ptx -> baselines -> evaluation.

    python pipeline.py --preset=small     # the default CPU run; README gives its time and results
    python pipeline.py --preset=tiny      # the whole chain in about 15 s (the tests run it)
    python pipeline.py --preset=paper --device=cuda

Two sizes at least 10x apart go through every stage; one reward model, from the larger SFT model, serves both (as
the paper's 6B RM served every policy). On a CPU the RM's sampling, the stages after the RM, then the evaluation's
two halves run in two processes side by side (--lanes; nanorlhf/infra/lanes.py). A stage whose checkpoint, config and
inputs are unchanged is skipped (nanorlhf/infra/stages.py; --fresh=true redoes all). Writes out/<run>/report.md.
--lineage=true adds DPO, RLAIF-hybrid PPO and iterated online RLHF (nanorlhf/evals/lineage.py) and the frontier section.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from typing import ClassVar

import pretrain
import train_ppo
import train_rm
import train_sft
from experiments.iterated import train_lineage
from nanorlhf.evals.report import speed_probe
from nanorlhf.evals.context import EvalContext, Section
from nanorlhf.evals.findings import findings_markdown, run_findings
from nanorlhf.evals.ladder import ladder_policies
from nanorlhf.evals.lineage import PLANS, pipeline_frontier
from nanorlhf.evals.report import stage_flops, write_report
from nanorlhf.evals.suites import SUITES, ladder_and_suites, names_of
from nanorlhf.infra.cli import run
from nanorlhf.infra.config import config_dict, parse_config, print_config
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import hold, write_text
from nanorlhf.infra.lanes import run_lanes, usable_cpus
from nanorlhf.infra.precision import cpu_name, device_name, fast_bfloat16
from nanorlhf.infra.stages import Plan, Stages
from nanorlhf.model import count_params
from nanorlhf.recipe import Recipe
from nanorlhf.world import ensure_world
from nanorlhf.world.judge import Judge


@dataclass
class Config:
    preset: str = "small"
    """tiny, small or paper: world scale and stage sizes"""
    run: str = ""
    """name of the run folder out/<run> (default: the preset, and _world<k> after it for --world_seed=k > 0)"""
    out_root: str = "out"
    """folder holding run folders"""
    data_root: str = "data"
    """folder holding world data folders (data/<preset>, and data/<preset>_world<k> for --world_seed=k > 0)"""
    world_seed: int = 0
    """seed of the generated world: its village (characters, facts, myths, corpus, prompts); built into its own data
    folder, never over a world of another seed"""
    recipe: Recipe = field(default_factory=Recipe)
    """what each stage trains with, per size (nanorlhf/recipe.py Recipe): each field is a flag"""
    n_eval: int = 300
    """test prompts in the evaluation"""
    sweeps: bool = False
    """also train PPO at other beta and gamma_ptx for the largest size: the paper's sweeps (three more 1m PPO runs)"""
    lineage: bool = False
    """also train the lineage (DPO, RLAIF-hybrid PPO, iterated PPO; nanorlhf/evals/lineage.py) and report its
    frontier"""
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
    lanes), the cores split between them (~1.5x the throughput on 2 cores: nanorlhf/infra/lanes.py); 1 runs them in
    turn"""
    fresh: bool = False
    """redo every stage even when its checkpoint is up to date"""

    # values checked before any work starts (nanorlhf/infra/config.py check_values)
    POSITIVE: ClassVar[tuple] = ("n_eval", "lanes")
    RANGES: ClassVar[dict] = {"seed": "[0, 4294967295]", "labeler_seed": "[0, 4294967295]",
                              "world_seed": "[0, 4294967295]"}
    RULES: ClassVar[tuple] = ((lambda c: set(names_of(c.suites)) <= set(SUITES),
                               "--suites={suites}: give all, none, or names among " + ", ".join(SUITES)),)

    PRESETS: ClassVar[dict] = {
        "tiny": dict(preset="tiny", n_eval=24, suites="none", **Recipe.PRESETS["tiny"]),
        "small": dict(**Recipe.PRESETS["small"]),
        "paper": dict(preset="paper", n_eval=3000, **Recipe.PRESETS["paper"]),
    }


def folders(cfg: Config) -> tuple[str, str]:
    """(run folder, world data folder): out/<run> and data/<preset>, each with _world<k> after the preset when the
    world is not the seed-0 village (so each world keeps its own data and stages)."""
    tag = f"_world{cfg.world_seed}" if cfg.world_seed else ""
    return (os.path.join(cfg.out_root, cfg.run or cfg.preset + tag),
            os.path.join(cfg.data_root, cfg.preset + tag))


def stage_jobs(cfg: Config, out: str, data: str) -> dict[str, tuple]:
    """Every stage of the run as name -> (name, main, config, inputs, ckpt), for Stages.run: the base models (the
    first trains the tokenizer), SFT and the FLAN/T0 analog on public tasks, one reward model from the largest SFT
    model and its held-out-labeler test, PPO and PPO-ptx against it, and (cfg.sweeps) the alignment-tax sweeps."""
    r, names = cfg.recipe, cfg.recipe.names()
    big, corpus = names[0], os.path.join(data, "corpus.jsonl")
    common = ["--preset=" + ("tiny" if cfg.preset == "tiny" else "small"), f"--device={cfg.device}",
              f"--seed={cfg.seed}"]

    def spec(name: str, script, inputs: list[str], *flags: str, ckpt: str = "ckpt.pt") -> tuple:
        c = parse_config(script.Config, common + [f"--out_dir={out}/{name}", *flags])
        # the world's meta.json (its scale and seed) is an input of every stage: its key names the world
        return name, script.main, c, [*inputs, os.path.join(data, "meta.json")], f"{out}/{name}/{ckpt}"

    def ppo(name: str, s: str, *flags: str) -> tuple:
        sft = f"{out}/sft_{s}/ckpt.pt"
        return spec(name, train_ppo, [sft, f"{out}/rm/ckpt.pt"], f"--sft={sft}", f"--rm={out}/rm/ckpt.pt",
                    f"--data_dir={data}", *flags)

    jobs = {}
    for s in names:
        base = f"{out}/base_{s}/ckpt.pt"
        jobs[f"base_{s}"] = spec(f"base_{s}", pretrain, [corpus], f"--corpus={corpus}", *r.pretrain_flags(s))
        for name, flan in ((f"sft_{s}", False), (f"flan_{s}", True)):
            jobs[name] = spec(name, train_sft, [base], f"--base={base}", f"--data_dir={data}", *r.sft_flags(s, flan))
        jobs[f"ppo_{s}"] = ppo(f"ppo_{s}", s, *r.ppo_flags(s))
        jobs[f"ppo_ptx_{s}"] = ppo(f"ppo_ptx_{s}", s, *r.ppo_flags(s, ptx=True))
    trunk, cmp = f"{out}/sft_{big}/ckpt.pt", f"{out}/rm/comparisons.jsonl"
    rm_flags = [f"--sft={trunk}", f"--data_dir={data}", f"--labeler_seed={cfg.labeler_seed}", *r.rm_flags()]
    n_lanes = cfg.lanes if resolve_device(cfg.device) == "cpu" else 1
    jobs["rm"] = spec("rm", train_rm, [trunk], *rm_flags, f"--max_prompts={r.rm_prompts}", "--heldout_folds=0",
                      f"--procs={n_lanes}")
    # the held-out-labeler test (§4.1) a stage of its own, to run beside PPO; it trains on the RM's comparisons
    jobs["rm_heldout"] = spec("rm_heldout", train_rm, [trunk, cmp, f"{out}/rm/val_comparisons.jsonl"], *rm_flags,
                              "--heldout_only=true", f"--comparisons={cmp}", "--max_prompts=0",  # labels no prompt
                              f"--heldout_prompts={r.rm_heldout_prompts}", ckpt="heldout.json")
    if cfg.sweeps:  # the alignment-tax section's sweeps: gamma_ptx up, and beta up instead of ptx
        for name, beta, ptx in ((f"ppo_beta0.02_{big}", 0.02, 0.0), (f"ppo_beta0.3_{big}", 0.3, 0.0),
                                (f"ppo_ptx4_{big}", r.ppo_beta, 4.0)):
            jobs[name] = ppo(name, big, *r.ppo_flags(big), f"--beta={beta}", f"--ptx_coef={ptx}")
    return jobs


# expected seconds of each stage as the small preset ran on a 2-core AMD EPYC VM (the lanes' stages on one core
# each), for the largest size and the others (the lineage's stages: rough guesses, not measured): where the overall
# ETA starts from; it then follows this run's own pace (infra/stages.py Plan)
EXPECTED = {"base": (92, 42), "sft": (34, 25), "flan": (45, 10), "ppo_ptx": (123, 17), "ppo": (98, 14), "rm": 199,
            "rm_heldout": 43, "dpo": 30, "rlaif": 130, "iterated": 150, "evaluate": 110}


def expected_seconds(name: str, big: str) -> float:
    if name in EXPECTED:
        return EXPECTED[name]
    kind, size = name.rsplit("_", 1)
    v = EXPECTED[next(k for k in EXPECTED if kind.startswith(k))]
    return v[size != big] if isinstance(v, tuple) else v


def run_plan(first: list[str], lanes: list[list[str]], later: list[str], big: str, side_by_side: bool) -> Plan:
    """The run's stages in order with their expected seconds, the evaluation last: "stage k of N" and the ETA."""
    plan, w = Plan(), lambda names: [(n, expected_seconds(n, big)) for n in names]
    for name, seconds in w(first):
        plan.then(name, seconds)
    if side_by_side:
        plan.side_by_side([w(lane) for lane in lanes])
    for name, seconds in [x for lane in lanes for x in w(lane)] * (not side_by_side) + w(later + ["evaluate"]):
        plan.then(name, seconds)
    return plan


def main(cfg: Config) -> dict:
    with hold(folders(cfg)[0]):  # one live pipeline per run folder
        return run_pipeline(cfg)


def run_pipeline(cfg: Config) -> dict:
    print_config(cfg)
    t0 = time.time()
    device = resolve_device(cfg.device)
    # each stage's key names the dtype it ran in (auto: bfloat16 where native)
    cfg = replace(cfg, recipe=cfg.recipe.resolved(device))
    scale, (out, data) = cfg.preset, folders(cfg)
    names, recipe = cfg.recipe.names(), cfg.recipe
    big, st, n_lanes = names[0], Stages(out, cfg.fresh), cfg.lanes if device == "cpu" else 1

    # 0. the world, its public-task compilation (FLAN/T0 analog), and RM prompts up to the label budget
    with hold(data):  # another seed's or settings' world is refused, never rebuilt unasked (nanorlhf/world)
        if ensure_world(data, scale, recipe.rm_prompts, cfg.fresh, seed=cfg.world_seed):  # False: already there, as this run needs it
            st.log["world"] = {"seconds": time.time() - t0}
    print(f"dtype {cfg.recipe.dtype} on {device_name(device)} (native bfloat16: {fast_bfloat16(device)})")
    probe = [speed_probe(device, cfg.recipe.dtype)]  # and again at the end: how fast this machine ran today
    print(f"speed probe: a 1m-shape training step at {probe[0]:,.0f} tokens/s")
    jobs = stage_jobs(cfg, out, data)

    # 1-4: the largest base and SFT models, then the RM, on every core; the rest in two lanes side by side
    # (nanorlhf/infra/lanes.py): the largest PPO-ptx model, its FLAN/T0 analog and the held-out-labeler test beside
    # its PPO model and the smaller sizes' every stage
    first = [f"base_{big}", f"sft_{big}", "rm"]
    lanes = [[f"ppo_ptx_{big}", f"flan_{big}", "rm_heldout"],
             [f"ppo_{big}", *(f"{k}_{s}" for s in names[1:] for k in ("base", "sft", "flan", "ppo", "ppo_ptx"))]]
    later = [n for n in jobs if n.startswith(("ppo_beta", "ppo_ptx4"))] * cfg.sweeps + cfg.lineage * [
        *(f"dpo_b{b}_{big}" for b in PLANS[scale].dpo_betas), f"rlaif_{big}", f"iterated_{big}"]
    st.plan = run_plan(first, lanes, later, big, n_lanes > 1 and len(usable_cpus()) > 1)
    for name in first:
        st.run(*jobs[name])
    run_lanes(st, [[jobs[n] for n in lane] for lane in lanes], n_lanes)
    # 4b. the sweeps of the alignment-tax section: gamma_ptx up, and beta up instead of ptx
    sweep_runs = {}
    if cfg.sweeps:
        for name, job in jobs.items():
            if name.startswith(("ppo_beta", "ppo_ptx4")):
                st.run(*job)
                sweep_runs[name] = (job[4], job[2].ppo.beta, job[2].ppo.ptx_coef)
        sweep_runs.update({f"ppo_{big}": (f"{out}/ppo_{big}/ckpt.pt", recipe.ppo_beta, 0.0),
                           f"ppo_ptx_{big}": (f"{out}/ppo_ptx_{big}/ckpt.pt", recipe.ppo_beta,
                                              recipe.per_size("ptx_coef")[big])})
    # 4c. the lineage after InstructGPT, from the largest SFT model and the RM's comparisons
    if cfg.lineage:
        common = ["--preset=" + ("tiny" if scale == "tiny" else "small"), f"--device={cfg.device}",
                  f"--seed={cfg.seed}"]
        train_lineage(st, cfg, common, out, data, big, recipe.per_size("ppo_iterations")[big])

    # 5. evaluation: the ladder beside the safety and capability suites on the largest size, then report.md
    st.announce("evaluate")
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
    probe.append(speed_probe(device, cfg.recipe.dtype))
    machine = {"cpu": cpu_name(), "device": device_name(device), "dtype": cfg.recipe.dtype,
               "probe_tokens_per_s_start": probe[0], "probe_tokens_per_s_end": probe[1],
               "world_seed": cfg.world_seed, "seed": cfg.seed, "labeler_seed": cfg.labeler_seed}
    print(f"speed probe: {probe[0]:,.0f} tokens/s at the start, {probe[1]:,.0f} at the end")
    found = run_findings(sections[0].data["findings"], st.log["rm"]["result"]["report"],
                         {s.title: s.data for s in sections[1:]}, total / 60, machine)
    write_text(os.path.join(out, "findings.json"), json.dumps(found, indent=1))
    sections.insert(0, Section("Findings", "\n".join(findings_markdown(found)), [], {}))
    path = write_report(out, config_dict(cfg), big, st.log, sections, stage_flops(st.log), total)
    print(f"\npipeline done in {total / 60:.1f} min -> {path}")
    return {"report": path, "seconds": total, "sections": sections}


if __name__ == "__main__":
    run(main, Config, __doc__)
