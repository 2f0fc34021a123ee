"""Replication across worlds: the whole pipeline on several villages, every finding's verdict per world, and one
combined verdict a finding.

A finding of one run might belong to its village (the seed-0 world's characters, facts and myths) rather than to
RLHF. Each world k here is `python pipeline.py --world_seed=k --seed=k --labeler_seed=k`: its own village, its own
training seed and its own draw of labelers, so the worlds are independent replications.

    python -m experiments.replicate --preset=small --worlds=0,1,2     # three pipeline runs, one after the other
    python -m experiments.replicate --preset=tiny --worlds=0,1        # a smoke run (its verdicts mean nothing)

The combined verdict (nanorlhf/evals/findings.py combined_verdict): each world's 95% interval is read as a normal
one, the worlds' estimates are pooled by inverse variance with a between-world variance (random effects,
DerSimonian-Laird: worlds that disagree widen the interval), and
the finding's own rule (the interval of a win rate above 50%, of a paired difference above 0, ...) is applied to the
pooled interval; "reproduced on k of N" sits beside it. A world whose run is finished is reused (the pipeline skips
its stages and only evaluates again). Writes out_root/replication_<preset>/replication.md and replication.json.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import ClassVar

from nanorlhf.evals.findings import CALIBRATION, REPRODUCED, combined_verdict
from nanorlhf.infra.cli import run
from nanorlhf.infra.config import print_config
from nanorlhf.infra.fileio import read_json, write_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Config:
    preset: str = "small"
    """the pipeline's preset (tiny or small)"""
    worlds: str = "0,1,2"
    """world seeds, comma-separated; world k trains with --seed=k --labeler_seed=k"""
    out_root: str = "out"
    """folder of the pipeline's run folders (world 0: <preset>, world k: <preset>_world<k>)"""
    data_root: str = "data"
    """folder of the worlds' data folders"""
    device: str = "cpu"
    """cpu, cuda, or auto"""
    lanes: int = 2
    """the pipeline's --lanes"""
    table_only: bool = False
    """run nothing: build the table from the worlds' findings.json (each run must have finished)"""

    POSITIVE: ClassVar[tuple] = ("lanes",)
    CHOICES: ClassVar[dict] = {"preset": ("tiny", "small", "paper")}
    PRESETS: ClassVar[dict] = {p: dict(preset=p) for p in ("tiny", "small", "paper")}
    RULES: ClassVar[tuple] = ((lambda c: world_seeds(c.worlds) is not None,
                               "--worlds={worlds}: give distinct world seeds in [0, 4294967295], comma-separated "
                               "(e.g. 0,1,2)"),)


def world_seeds(text: str) -> list[int] | None:
    """'0,1,2' -> [0, 1, 2]; None unless every item is an integer seed in range, each once, 1 to 16 of them."""
    try:
        seeds = [int(x) for x in text.split(",")]
    except ValueError:
        return None
    ok = 0 < len(seeds) <= 16 and len(set(seeds)) == len(seeds) and all(0 <= s < 2 ** 32 for s in seeds)
    return seeds if ok else None


def run_folder(cfg: Config, world: int) -> str:
    """The pipeline's own run folder for world k at seed k (pipeline.py folders)."""
    return os.path.join(cfg.out_root, cfg.preset + (f"_world{world}" if world else ""))


def pipeline_command(cfg: Config, world: int) -> list[str]:
    return [sys.executable, os.path.join(ROOT, "pipeline.py"), f"--preset={cfg.preset}", f"--world_seed={world}",
            f"--seed={world}", f"--labeler_seed={world}", f"--out_root={cfg.out_root}",
            f"--data_root={cfg.data_root}", f"--device={cfg.device}", f"--lanes={cfg.lanes}"]


def replication_table(per_world: dict[int, list[dict]]) -> tuple[list[dict], list[str]]:
    """(rows, markdown): every finding of the first world, its verdict and headline in each world, how many
    worlds reproduce it, and the combined verdict on the pooled interval."""
    worlds = list(per_world)
    by_world = {w: {f["name"]: f for f in found} for w, found in per_world.items()}
    rows, md = [], ["| finding | " + " | ".join(f"world {w}" for w in worlds) + " | reproduced on | combined "
                    "(pooled 95% interval) |", "|---|" + "---|" * (len(worlds) + 2)]
    for name in by_world[worlds[0]]:
        if name == "minutes" or not all(name in by_world[w] for w in worlds):
            continue
        items = [by_world[w][name] for w in worlds]
        if items[0]["verdict"] == CALIBRATION:
            cells = [f"{100 * f['figures']['value']:.1f}%" for f in items]
            rows.append({"name": name, "verdicts": [f["verdict"] for f in items], "combined": CALIBRATION})
            md.append(f"| {name} | " + " | ".join(cells) + f" | (calibration) | {CALIBRATION} |")
            continue
        combined = combined_verdict(name, [f["figures"] for f in items])
        k = sum(f["verdict"] == REPRODUCED for f in items)
        row = {"name": name, "claim": items[0]["claim"], "verdicts": [f["verdict"] for f in items],
               "headline": [f["figures"]["value"] for f in items], "reproduced_on": k, "worlds": len(worlds)}
        if combined:
            row.update(combined=combined[0], pooled=combined[1])
        rows.append(row)
        cells = [f"{headline(name, f['figures'])} {f['verdict']}" for f in items]
        tail = (f"{pooled_text(name, combined[1])} **{combined[0]}**" if combined else "(nothing to pool)")
        md.append(f"| {name} | " + " | ".join(cells) + f" | {k} of {len(worlds)} | {tail} |")
    return rows, md


def headline(name: str, x: dict) -> str:
    if name == "truthful_informative":
        return f"{100 * x['all']['diff']:+.1f} pts"
    if "diff" in x:
        return f"{100 * x['diff']:+.1f} pts"
    if name == "rm_ratio":
        return f"{x['value']:.2f}"
    return f"{100 * x['value']:.0f}%"


def pooled_text(name: str, p: dict) -> str:
    if "rungs" in p:
        return ", ".join(f"{100 * r['value']:.0f}% [{100 * r['lo']:.0f}, {100 * r['hi']:.0f}]" for r in p["rungs"])
    if name == "rm_ratio":
        return f"{p['value']:.2f} [{p['lo']:.2f}, {p['hi']:.2f}]"
    scale, unit = 100, (" pts" if name in ("truthful_informative", "answers_the_question", "hallucination_lower")
                        else "%")
    sign = "+" if unit == " pts" else ""
    return f"{scale * p['value']:{sign}.1f}{unit} [{scale * p['lo']:{sign}.1f}, {scale * p['hi']:{sign}.1f}]"


def main(cfg: Config) -> dict:
    print_config(cfg)
    seeds = world_seeds(cfg.worlds)
    t0, per_world, minutes = time.time(), {}, {}
    for i, w in enumerate(seeds):
        print(f"== world {w} ({i + 1} of {len(seeds)}): {' '.join(pipeline_command(cfg, w)[1:])}", flush=True)
        t, found = time.time(), os.path.join(run_folder(cfg, w), "findings.json")
        if cfg.table_only and not os.path.exists(found):
            raise SystemExit(f"--table_only=true: {found} is missing (run world {w} first, without --table_only)")
        if not cfg.table_only:
            done = subprocess.run(pipeline_command(cfg, w), cwd=ROOT)
            if done.returncode:
                raise SystemExit(f"the pipeline of world {w} failed (exit {done.returncode}); its log is above")
        per_world[w] = read_json(found)
        minutes[w] = (time.time() - t) / 60 if not cfg.table_only else next(
            f["figures"]["value"] for f in per_world[w] if f["name"] == "minutes")
    rows, md = replication_table(per_world)
    total = (time.time() - t0) / 60 if not cfg.table_only else sum(minutes.values())
    probes = {w: next(f["figures"] for f in found if f["name"] == "minutes") for w, found in per_world.items()}
    out = os.path.join(cfg.out_root, f"replication_{cfg.preset}")
    summed = " (the runs' own wall-clocks, summed)" if cfg.table_only else ""
    smoke = ["A tiny run is a smoke test: its verdicts mean nothing.", ""] if cfg.preset == "tiny" else []
    text = [f"# Replication across worlds: `python -m experiments.replicate --preset={cfg.preset} "
            f"--worlds={cfg.worlds}`", "", *smoke,
            "World k is the pipeline at --world_seed=k --seed=k --labeler_seed=k. Combined: the worlds' 95% "
            "intervals pooled by random-effects inverse variance (DerSimonian-Laird: the spread between worlds "
            "widens the interval), the finding's own rule applied to the pooled interval.", "",
            *md, "",
            f"Wall-clock {total:.1f} min in all{summed} (" + ", ".join(
                f"world {w}: {minutes[w]:.1f} min, speed probe {probes[w].get('probe_tokens_per_s_start', 0):,.0f}"
                f" -> {probes[w].get('probe_tokens_per_s_end', 0):,.0f} tokens/s" for w in seeds)
            + f") on {probes[seeds[0]].get('cpu', 'this machine')}."]
    write_text(os.path.join(out, "replication.md"), "\n".join(text) + "\n")
    write_text(os.path.join(out, "replication.json"), json.dumps(
        {"worlds": seeds, "rows": rows, "minutes": total, "world_minutes": minutes, "machine": probes}, indent=1))
    print("\n".join(text))
    print(f"\nreplication done in {total:.1f} min -> {out}/replication.md")
    return {"rows": rows, "minutes": total, "out": out}


if __name__ == "__main__":
    run(main, Config, __doc__)
