"""report.md: a report card (the commit, the package versions, the machine, the seeds), then the pipeline's tables
and figures, with each stage's wall-clock and FLOPs beside the paper's.

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
import platform
import subprocess
from importlib import metadata

import torch

from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import write_text
from nanorlhf.infra.precision import cpu_name, device_name


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ("torch", "numpy", "tiktoken", "matplotlib")


def git_commit(root: str = ROOT) -> str:
    """The checkout's commit, with "+ uncommitted changes" when tracked files differ from it."""
    try:
        git = lambda *a: subprocess.run(["git", "-C", root, *a], capture_output=True, text=True, timeout=10)
        head = git("rev-parse", "--short=12", "HEAD")
        if head.returncode:
            return "not a git checkout"
        dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
        return head.stdout.strip() + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"


def report_card(flags: dict) -> dict:
    """What a reader needs to rerun or compare a run: the commit, Python and package versions, the machine, the
    seeds (nanochat's report card does the same)."""
    from nanorlhf.infra.lanes import usable_cpus
    device = resolve_device(flags.get("device", "cpu"))
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {"commit": git_commit(), "versions": versions, "device": device_name(device), "cpu": cpu_name(),
            "cores": len(usable_cpus()), "torch_threads": torch.get_num_threads(),
            "seeds": {k: flags[k] for k in ("world_seed", "seed", "labeler_seed") if k in flags}}


def card_markdown(card: dict) -> list[str]:
    gpu = "" if card["device"] == card["cpu"] else f"{card['device']} on "
    rows = [("commit", f"`{card['commit']}`"), ("packages", ", ".join(f"{k} {v}" for k, v in card["versions"].items())),
            ("machine", f"{gpu}{card['cpu']}, {card['cores']} cores, {card['torch_threads']} torch threads"),
            ("seeds", ", ".join(f"--{k}={v}" for k, v in card["seeds"].items()))]
    return ["| report card | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)]


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
    card = report_card(flags)
    md = [f"# nanorlhf report: `{out}`", "",
          "`python pipeline.py " + " ".join(f"--{k}={str(v).lower() if isinstance(v, bool) else v}"
                                          for k, v in flags.items()
                                          if k in ("preset", "world_seed", "seed", "labeler_seed") or v is True) + "`", "",
          *card_markdown(card), "",
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
        {"card": card, "stages": log, "flops": flops, "sections": {s.title: s.data for s in sections}}, indent=1,
        default=str))
    return path


def speed_probe(device: str, dtype: str, steps: int = 3) -> float:
    """Training tokens/s of the 1m shape (4 x 128, a batch of 16 x 128 tokens) under dtype: a yardstick of this
    machine now, printed beside a run's minutes (VMs of one type and CPU name run the same pipeline 2x apart).
    About a second; its own RNG (the run's random stream does not move)."""
    import time

    from nanorlhf.infra.optim import make_optimizer
    from nanorlhf.infra.precision import autocast
    from nanorlhf.model import GPT, GPTConfig
    cfg = GPTConfig(vocab_size=2048, block_size=128, n_layer=4, n_head=4, n_embd=128)
    with torch.random.fork_rng(devices=range(torch.cuda.device_count())):  # manual_seed reseeds the GPUs too
        torch.manual_seed(0)
        model = GPT(cfg).to(device)
        opt = make_optimizer(model, lr=1e-4)
        x = torch.randint(cfg.vocab_size, (16, 128), device=device)
        times = []
        for _ in range(steps + 1):                                  # the first step warms up, and is not timed
            t0 = time.perf_counter()
            with autocast(dtype, device):
                loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1).float(), x.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    return x.numel() / sorted(times[1:])[len(times[1:]) // 2]
