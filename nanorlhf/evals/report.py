"""report.md: the pipeline's tables and figures, with each stage's wall-clock and FLOPs beside the paper's.

InstructGPT §5.1 puts the cost of alignment next to pretraining: SFT 175B took
4.9 PF/s-days, PPO-ptx 175B 60, GPT-3 pretraining 3,640. We report the same
ratios for our stages (FLOPs counted by each script; forward passes at 1/3 of a
training step's FLOPs per token).

Example:
    path = write_report("out/small", config_dict(cfg), "1m", stage_log, sections, stage_flops(stage_log), seconds)
"""
from __future__ import annotations

import json
import os

import torch

from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import write_text
from nanorlhf.infra.precision import device_name


def stage_flops(log: dict) -> dict[str, float]:
    """FLOPs of each stage as the stage reported them (0 where a stage did no training)."""
    return {name: float(entry.get("result", {}).get("flops", 0.0)) for name, entry in log.items()}


def compute_section(log: dict, flops: dict[str, float], big: str) -> str:
    """Wall-clock and FLOPs of every stage, then the largest model's stages beside the paper's PF/s-days."""
    from nanorlhf.evals.compute import compute_table
    lines = ["| stage | wall-clock | torch threads | FLOPs |", "|---|---|---|---|"]
    lines += [f"| {n} | {e.get('seconds', 0):.0f}s | {e.get('threads', '')} | "
              f"{f'{flops[n]:.2e}' if flops.get(n) else 'not counted'} |" for n, e in log.items()]
    mine = {"pretrain": flops.get(f"base_{big}", 0.0), "sft": flops.get(f"sft_{big}", 0.0),
            "rm": flops.get("rm", 0.0), "ppo_ptx": flops.get(f"ppo_ptx_{big}", 0.0)}
    return "\n".join(lines) + f"\n\nThe `{big}` model's stages beside the paper's 175B figures:\n\n" + compute_table(mine)


def rm_table(log: dict) -> str:
    rep = log.get("rm", {}).get("result", {}).get("report", {})
    if not rep:
        return "(no RM report)"
    lines = ["| measure | ours | paper |", "|---|---|---|",
             f"| RM pairwise accuracy, validation comparisons | {rep['val_accuracy']:.1%} | (72.4% on own labelers) |",
             f"| agreement between two training labelers (the ceiling) | {rep['labeler_agreement']:.1%} | 72.6% |",
             f"| RM accuracy / labeler agreement | {rep['val_accuracy'] / rep['labeler_agreement']:.2f} | |"]
    h = rep.get("heldout") or log.get("rm_heldout", {}).get("result", {}).get("heldout")  # pipeline: its own stage
    if h:
        lines += [f"| RM trained on 4 labeler groups, accuracy on the held-out group | "
                  f"{h['heldout_group_accuracy']:.1%} | 69.6% |",
                  f"| the same RM on the 4 training groups | {h['own_groups_accuracy']:.1%} | 72.4% |"]
    return "\n".join(lines)


def write_report(out: str, flags: dict, big: str, log: dict, sections: list, flops: dict, seconds: float) -> str:
    """report.md and report.json in out/; flags: the pipeline's config (its header names the non-default ones),
    big: the largest model size, whose stages the compute table sets beside the paper's."""
    md = [f"# nanorlhf report: `{out}`", "",
          "`python pipeline.py " + " ".join(f"--{k}={str(v).lower() if isinstance(v, bool) else v}"
                                          for k, v in flags.items()
                                          if k in ("preset", "seed", "labeler_seed") or v is True) + "`", "",
          f"This invocation took {seconds / 60:.1f} min; the stages' own wall-clocks (as each last ran, "
          f"reused ones included) add up to {sum(e.get('seconds', 0) for e in log.values()) / 60:.1f} min "
          f"on {device_name(resolve_device(flags.get('device', 'cpu')))} with {torch.get_num_threads()} torch "
          "threads (a stage with fewer ran side by side with another: pipeline.py --lanes).", "",
          "## Compute per stage", "", compute_section(log, flops, big), "",
          "## Reward model", "", rm_table(log), ""]
    for s in sections:
        md += [f"## {s.title}", "", s.markdown, ""]
        md += [f"![{f}]({f})" for f in s.figures] + [""]
    path = os.path.join(out, "report.md")
    write_text(path, "\n".join(md))
    write_text(os.path.join(out, "report.json"), json.dumps(
        {"stages": log, "flops": flops, "sections": {s.title: s.data for s in sections}}, indent=1, default=str))
    return path
