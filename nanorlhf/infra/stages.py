"""Stages of a run that are skipped when nothing they depend on has changed.

Each stage's folder holds stage.json: the hash of its config and of its input files (the key), its
wall-clock and torch threads, its result, and the hash of the checkpoint it wrote. A stage runs again
when the key or the checkpoint changed; a flag added to a stage's config since it ran, left at its
default, counts as no change. Used by pipeline.py (its lineage stages too, and nanorlhf/infra/lanes.py's
lanes) and experiments/ablate.py.
"""
from __future__ import annotations

import json
import os
import time

import torch

from nanorlhf.infra.config import config_dict, config_hash, default_dict
from nanorlhf.infra.fileio import file_sha256, hold, write_text


class Stages:
    """Runs stages in order, skipping those whose key (config + input hashes) is unchanged."""

    def __init__(self, out: str, fresh: bool):
        self.out, self.fresh, self.log = out, fresh, {}

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
                print(f"== {name}: up to date, reusing {ckpt}")
                self.log[name] = old
                return old.get("result", {})
        print(f"\n== {name}")
        t = time.time()
        with hold(folder):  # no other live process writes the stage's folder meanwhile (nanorlhf/infra/fileio.py)
            res = main(cfg)
        keep = {k: v for k, v in res.items() if isinstance(v, (int, float, str, dict, list))}
        self.log[name] = {"key": key, "seconds": time.time() - t, "threads": torch.get_num_threads(), "config": flat,
                          "ckpt_sha256": file_sha256(ckpt) if os.path.exists(ckpt) else None,
                          "result": json.loads(json.dumps(keep, default=str))}
        write_text(meta, json.dumps(self.log[name], indent=1))
        return self.log[name]["result"]
