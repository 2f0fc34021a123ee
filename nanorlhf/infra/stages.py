"""Stages of a run that are skipped when nothing they depend on has changed.

Each stage's folder holds stage.json: the hash of its config and of its input files (the key), its
wall-clock and torch threads, its result, and the hash of the checkpoint it wrote. A stage runs again
when the key or the checkpoint changed; a flag added to a stage's config since it ran, left at its
default, counts as no change. Used by pipeline.py (its lineage stages too, and nanorlhf/infra/lanes.py's
lanes) and experiments/ablate.py. A stage that runs first writes its full config to config.json in its folder
(its script prints one line of it).

Given a Plan, each stage announces itself as "stage k of N" with the run's elapsed time and an overall ETA.

Example:
    plan = Plan().then("base", 90).then("sft", 35).side_by_side([[("ppo", 100)], [("flan", 45), ("dpo", 30)]])
    st = Stages("out/run", fresh=False, plan=plan.then("evaluate", 110))
    st.run("base", pretrain.main, cfg, inputs, "out/run/base/ckpt.pt")
    # == stage 1 of 6: base | 0.0s elapsed, ETA after this stage
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

import torch

from nanorlhf.infra.config import config_dict, config_hash, default_dict
from nanorlhf.infra.fileio import file_sha256, hold, write_text
from nanorlhf.infra.metrics import fmt_seconds


@dataclass
class Plan:
    """The stages of a run in order, each with its number and where it starts on a timeline of expected seconds
    (stages side by side share a stretch as long as their longest lane). The overall ETA scales what is left of
    the timeline by this run's pace: seconds elapsed per expected second of the stages that ran (reused ones left
    out). Picklable, so a lane's process (nanorlhf/infra/lanes.py) announces its stages the same way."""
    number: dict[str, int] = field(default_factory=dict)
    start: dict[str, float] = field(default_factory=dict)
    total: float = 0.0
    reused: float = 0.0
    """expected seconds of the stages reused so far (in this process, and before the lanes in the main one)"""
    weight: dict[str, float] = field(default_factory=dict)
    t0: float = field(default_factory=time.time)

    def then(self, name: str, seconds: float) -> "Plan":
        """Add a stage after everything planned so far."""
        self.number[name], self.start[name], self.weight[name] = len(self.number) + 1, self.total, seconds
        self.total += seconds
        return self

    def side_by_side(self, lanes: list[list[tuple[str, float]]]) -> "Plan":
        """Add lanes that run at once: a stage k-th in its lane starts its lane's share k-1 of the way along."""
        span, begin = max((sum(w for _, w in lane) for lane in lanes), default=0.0), self.total
        for lane in lanes:
            done, whole = 0.0, sum(w for _, w in lane) or 1.0
            for name, w in lane:
                self.number[name], self.weight[name] = len(self.number) + 1, w
                self.start[name], done = begin + span * done / whole, done + w
        self.total = begin + span
        return self

    def line(self, name: str) -> str:
        """'stage k of N: name | elapsed, ETA' (the ETA once a stage has run)."""
        elapsed, ran = time.time() - self.t0, self.start.get(name, self.total) - self.reused
        eta = f"ETA {fmt_seconds(elapsed / ran * (self.total - self.start[name]))}" if ran > 0 and elapsed > 0 \
            else "ETA after this stage"
        return f"stage {self.number[name]} of {len(self.number)}: {name} | {fmt_seconds(elapsed)} elapsed, {eta}"


class Stages:
    """Runs stages in order, skipping those whose key (config + input hashes) is unchanged."""

    def __init__(self, out: str, fresh: bool, plan: Plan | None = None):
        self.out, self.fresh, self.log, self.plan = out, fresh, {}, plan

    def announce(self, name: str, note: str = "") -> None:
        """'== stage k of N: ...' where the stage is in the plan, else '== name'."""
        head = self.plan.line(name) if self.plan is not None and name in self.plan.number else name
        print(f"== {head}{note}", flush=True)

    def run(self, name: str, main, cfg, inputs: list[str], ckpt: str):
        folder = os.path.join(self.out, name)
        hashes = {p: file_sha256(p) for p in inputs}
        flat = config_dict(cfg)
        key = config_hash({"cfg": flat, "inputs": hashes})
        meta = os.path.join(folder, "stage.json")
        if not self.fresh and os.path.exists(ckpt) and os.path.exists(meta):
            with open(meta) as f:
                old = json.load(f)
            # a flag added since the stage ran, left at its default, keeps the old behaviour: the same stage
            defaults = default_dict(type(cfg))
            kept = {k: v for k, v in flat.items() if k in old["config"] or v != defaults[k]}
            # and the checkpoint is the one this stage wrote (not, say, a hand run of the script over it)
            same_ckpt = old.get("ckpt_sha256") in (None, file_sha256(ckpt))
            if same_ckpt and old["key"] in (key, config_hash({"cfg": kept, "inputs": hashes})):
                self.announce(name, f" (up to date, reusing {ckpt})")
                if self.plan is not None:
                    self.plan.reused += self.plan.weight.get(name, 0.0)
                self.log[name] = old
                return old.get("result", {})
        self.announce(name, f" (config: {os.path.join(folder, 'config.json')})")
        write_text(os.path.join(folder, "config.json"), json.dumps(flat, indent=1))
        t = time.time()
        with hold(folder):  # no other live process writes the stage's folder meanwhile (nanorlhf/infra/fileio.py)
            res = main(cfg)
        keep = {k: v for k, v in res.items() if isinstance(v, (int, float, str, dict, list))}
        self.log[name] = {"key": key, "seconds": time.time() - t, "threads": torch.get_num_threads(), "config": flat,
                          "ckpt_sha256": file_sha256(ckpt) if os.path.exists(ckpt) else None,
                          "result": json.loads(json.dumps(keep, default=str))}
        write_text(meta, json.dumps(self.log[name], indent=1))
        return self.log[name]["result"]
