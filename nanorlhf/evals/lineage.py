"""The lineage after InstructGPT, trained from the pipeline's SFT model and comparisons and put on one frontier.

    python pipeline.py --preset=small --lineage=true     # trains the stages below, report.md gets the frontier
    python -m nanorlhf.evals.lineage --run_dir=out/small       # measures an existing run folder's frontier again

Beside the pipeline's RM (all best-of-n needs), PPO and PPO-ptx (`out/<run>/rm`, `ppo_<size>`, `ppo_ptx_<size>`),
experiments/iterated.py's `train_lineage` trains, by the Plan below, from the largest SFT model:

  dpo_b<beta>_<size>  DPO (train_dpo.py) on the RM's own comparisons, one run per beta
  rlaif_<size>        RLAIF (experiments/iterated.py, one round): the feedback model labels harmlessness pairs,
                      a hybrid PM learns them with the RM's comparisons, PPO against it
  iterated_<size>     iterated online RLHF (experiments/iterated.py): the RM's label budget and the PPO
                      iterations split over rounds, each round labeling the current policy's samples;
                      the same budget spent up front is the pipeline's own ppo_<size>

Each is a pipeline stage, reused on a rerun when its key is unchanged. `discover_runs` lists every
frontier point of a run folder with its labels and wall time; nanorlhf/evals/frontier.py measures and draws them.

Example:
    runs = discover_runs("out/small", "1m")                   # [Run("bon2", "best-of-n", n=2, ...), ...]
    sec = pipeline_frontier(ctx, "out/small", "1m", "small")  # Section: table, notes, frontier.png
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass

from nanorlhf.evals.common import pct
from nanorlhf.evals.context import Section
from nanorlhf.evals.frontier import Run, frontier_section
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import read_json, write_text
from nanorlhf.world.feedback import PRINCIPLE


@dataclass(frozen=True)
class Plan:
    """What --lineage=true trains from the largest SFT model and the RM's comparisons, and how it is measured."""
    bon_ns: tuple = (2, 4, 8, 16)
    """best-of-n sizes (no training: SFT samples n, the RM keeps its favourite)"""
    dpo_betas: tuple = (0.1, 0.3, 1.0)
    """one DPO run per beta"""
    dpo_max_steps: int = 0
    """DPO steps (0 = one epoch over the RM's comparisons)"""
    ai_pairs: int = 600
    """harmlessness pairs the feedback model labels for the RLAIF hybrid PM, beside the RM's comparisons"""
    rounds: int = 3
    """iterated online RLHF: rounds that split the RM's label budget and the PPO iterations (must divide these)"""
    n_prompts: int = 200
    """test prompts each frontier point is measured on"""
    max_new_tokens: int = 48
    """longest sampled response when measuring"""


PLANS = {"tiny": Plan(bon_ns=(2, 4), dpo_betas=(0.1, 1.0), dpo_max_steps=2, ai_pairs=4, rounds=2, n_prompts=8,
                      max_new_tokens=16),
         "small": Plan(),
         "paper": Plan(bon_ns=(2, 4, 8, 16, 64, 256), rounds=4, n_prompts=1000)}


def discover_runs(out: str, size: str, bon_ns=(2, 4, 8, 16), sweeps: bool = False) -> list[Run]:
    """The frontier's runs in a pipeline run folder (out/<run>): best-of-n, ppo_<size>'s checkpoints, ppo_ptx_<size>
    (and the beta / gamma_ptx sweeps), dpo_b*_<size>, rlaif_<size> and each round of iterated_<size>; labels and
    wall time from the stages' own files (stage.json, report.json, the DPO checkpoint)."""
    rm_labels = read_json(f"{out}/rm/report.json").get("n_train_comparisons")
    runs = [Run(f"bon{n}", "best-of-n", n=n, human_labels=rm_labels, ai_labels=0) for n in bon_ns]
    ppo = [(f"ppo_{size}", "PPO", True), (f"ppo_ptx_{size}", "PPO-ptx", False)]
    ppo += [(f"ppo_beta0.02_{size}", "PPO", False), (f"ppo_beta0.3_{size}", "PPO", False),
            (f"ppo_ptx4_{size}", "PPO-ptx", False)] if sweeps else []
    for stage, method, every in ppo:                        # PPO's wall: its stage's, pro rata per iteration
        meta = read_json(f"{out}/{stage}/stage.json")
        total, secs = meta.get("config", {}).get("iterations"), meta.get("seconds")
        iters = sorted(int(p[:-3].rsplit("iter", 1)[1]) for p in glob.glob(f"{out}/{stage}/iter*.pt")) if every else []
        for it in (i for i in iters if total and i < total):    # the final one is ckpt.pt; stale ones are skipped
            runs.append(Run(f"{stage}@{it}", method, f"{out}/{stage}/iter{it}.pt", human_labels=rm_labels, ai_labels=0,
                            wall_s=secs * it / total if secs and total else None))
        if os.path.exists(f"{out}/{stage}/ckpt.pt"):
            runs.append(Run(stage, method, f"{out}/{stage}/ckpt.pt", human_labels=rm_labels, ai_labels=0, wall_s=secs))
    runs += [Run(os.path.basename(os.path.dirname(p)), "DPO", p)              # labels, wall: in the checkpoint
             for p in sorted(glob.glob(f"{out}/dpo_b*_{size}/ckpt.pt"))]
    for stage, method in ((f"rlaif_{size}", "RLAIF-hybrid PPO"), (f"iterated_{size}", "iterated PPO")):
        rounds = read_json(f"{out}/{stage}/report.json").get("rounds", [])
        for i, r in enumerate(rounds):
            last = i == len(rounds) - 1
            ckpt = f"{out}/{stage}/ppo/ckpt.pt" if last else r.get("ppo_ckpt", "")
            if os.path.exists(ckpt):
                runs.append(Run(stage if last else f"{stage}@r{i + 1}", method, ckpt, human_labels=r["human_labels"],
                                ai_labels=r["ai_labels"], wall_s=r.get("wall_s")))
    return runs


def lineage_notes(out: str, size: str) -> list[str]:
    """What the table cannot say: the RM's cost, the feedback model's agreement, the iterated rounds."""
    rm, notes = read_json(f"{out}/rm/stage.json"), []
    if rm:
        notes.append(f"The reward model (stage rm: {rm['seconds']:.0f}s, {rm['result']['report']['n_train_comparisons']} "
                     "prompts ranked) is shared by best-of-n, PPO and PPO-ptx and not in their wall; DPO needs none; "
                     "RLAIF and iterated PPO fit their own preference models inside theirs.")
    fb = (read_json(f"{out}/rlaif_{size}/report.json").get("rounds") or [{}])[0].get("feedback_agreement")
    if fb:
        notes.append(f"RLAIF: the feedback model (the SFT model asked \"{PRINCIPLE}\") agrees with the gold order on "
                     f"{pct(fb['gold'])} of its {fb['n_pairs']} harmlessness pairs and with the toxicity order on "
                     f"{pct(fb['toxicity'])}; a simulated training labeler follows the toxicity order on "
                     f"{pct(fb['train_labeler_toxicity'])}.")
    it = read_json(f"{out}/iterated_{size}/report.json").get("rounds", [])
    if it:
        stale = ", ".join(pct(r["stale_pm_accuracy"]) for r in it if "stale_pm_accuracy" in r)
        notes.append(f"Iterated: {len(it)} rounds of {it[0]['human_labels']} prompts ranked on the current policy's "
                     f"samples, the PM refit on all so far, then PPO; the same budget up front is ppo_{size} (the RM's "
                     "comparisons on SFT samples, then all PPO iterations at once)."
                     + (f" Last round's PM ranks the new policy's samples with pairwise accuracy {stale} "
                        "(rounds 2 on): how stale it has become." if stale else ""))
    return notes


def pipeline_frontier(ctx, out: str, size: str, preset: str, sweeps: bool = False) -> Section:
    """The frontier section of out/<run>/report.md: every run discover_runs finds, measured against sft_<size>."""
    from nanorlhf.evals.context import EvalContext
    plan = PLANS[preset]
    sub = EvalContext(ctx.judge, ctx.data_dir, ctx.out_dir, {"sft": f"{out}/sft_{size}/ckpt.pt"}, rm=f"{out}/rm/ckpt.pt",
                      device=ctx.device, seed=ctx.seed, labeler_seed=ctx.labeler_seed, n=plan.n_prompts,
                      max_new_tokens=plan.max_new_tokens)
    return frontier_section(sub, discover_runs(out, size, plan.bon_ns, sweeps), lineage_notes(out, size))


@dataclass
class Config:
    run_dir: str = "out/small"
    """a pipeline run folder holding sft_<size>/, rm/ and the lineage's stages (pipeline.py --lineage=true)"""
    data_dir: str = "data/small"
    """world data folder (test prompts)"""
    size: str = "1m"
    """model size whose SFT model is the reference"""
    preset: str = "small"
    """which Plan measures: tiny, small or paper"""
    sweeps: bool = False
    """also plot the pipeline's beta and gamma_ptx sweep runs (pipeline.py --sweeps=true)"""
    labeler_seed: int = 0
    """seed of the simulated labeler pool"""
    device: str = "cpu"
    """cpu, cuda, or auto"""


def main(cfg: Config) -> Section:
    """Measure the frontier of an existing run folder again, without the pipeline: run_dir/lineage.md."""
    from nanorlhf.evals.context import EvalContext
    from nanorlhf.world.judge import Judge
    ctx = EvalContext(Judge(cfg.data_dir, cfg.labeler_seed), cfg.data_dir, cfg.run_dir, {},
                      device=resolve_device(cfg.device), labeler_seed=cfg.labeler_seed)
    sec = pipeline_frontier(ctx, cfg.run_dir, cfg.size, cfg.preset, cfg.sweeps)
    write_text(os.path.join(cfg.run_dir, "lineage.md"),
               f"## {sec.title}\n\n{sec.markdown}\n\n![frontier]({sec.figures[0]})\n")
    print(sec.markdown)
    return sec


if __name__ == "__main__":
    from nanorlhf.infra.cli import run
    run(main, Config, __doc__)
