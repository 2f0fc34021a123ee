"""Lanes: chains of stages run side by side, one process per lane, the CPU's cores split between them.

At these model sizes one PyTorch process does not keep two cores busy: per-op overheads do not parallelise
inside an op. On a 2-core CPU the small pipeline's two lanes, one pinned core and one thread each, finish
their stages sooner than the same stages run one at a time on both cores. pipeline.py runs the RM's sampling
(nanorlhf/world/comparisons.py) and the stages after its reward model this way, and then its evaluation's
ladder beside its suites. A lane is a list of stages run in order by nanorlhf.infra.stages.Stages in
a spawned process (spawn, not fork: a forked OpenMP runtime can hang); every line it prints carries its
stage's name. A stage may read what stages before the lanes wrote, or earlier stages of its own lane
(check_lanes refuses any other plan).
"""
from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from typing import Callable

import torch

from nanorlhf.infra.stages import Stages

# (name, main, cfg, inputs, ckpt): the arguments of Stages.run; main must be a module-level function
Spec = tuple


def usable_cpus() -> list[int]:
    """The cores this process may run on (its affinity mask), in order."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def split_cpus(cpus: list[int], n: int) -> list[list[int]]:
    """n disjoint, equal, non-empty slices of cpus (the remainder unused); n <= len(cpus)."""
    if not 1 <= n <= len(cpus):
        raise ValueError(f"cannot split {len(cpus)} cores into {n} lanes")
    per = len(cpus) // n
    return [cpus[i * per:(i + 1) * per] for i in range(n)]


class Prefixed:
    """A text stream that writes each whole line as '[prefix] line' to `stream`, flushed at once."""

    def __init__(self, stream):
        self.stream, self.prefix, self.pending = stream, "", ""

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            self.stream.write(f"[{self.prefix}] {line}\n")
        self.stream.flush()
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name):  # isatty, encoding, fileno: the wrapped stream's
        return getattr(self.stream, name)


def pinned(cpus: list[int], name: str, fn: Callable):
    """fn() in a lane's process: pinned to `cpus`, one thread per core, its lines tagged with `name`."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)
    torch.set_num_threads(len(cpus))
    sys.stdout = Prefixed(sys.stdout)
    sys.stdout.prefix = name
    try:
        return fn()
    finally:
        sys.stdout.flush()


def side_by_side(jobs: list[tuple[str, Callable]], n_lanes: int) -> list:
    """(name, fn) jobs, fn taking no arguments (a module-level function or a functools.partial of one): their
    results, in order. Each runs in its own spawned process on an equal share of the cores; with n_lanes 1,
    one job, or more jobs than n_lanes or cores, they run here one after another."""
    cpus = usable_cpus()
    if n_lanes <= 1 or len(jobs) <= 1 or len(jobs) > min(n_lanes, len(cpus)):
        return [fn() for _, fn in jobs]
    parts = split_cpus(cpus, len(jobs))
    print(f"\n== side by side on cores {parts}: " + "; ".join(name for name, _ in jobs))
    sys.stdout.flush()
    with ProcessPoolExecutor(len(jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(pinned, part, name, fn) for (name, fn), part in zip(jobs, parts)]
        try:
            return [f.result() for f in futures]  # a job's exception is raised here, once every job has ended
        except BrokenProcessPool as e:
            raise RuntimeError("a lane's process died before it finished: killed (out of memory?), or started from "
                               "a script without an `if __name__ == '__main__':` guard, which spawned processes "
                               "need; --lanes=1 runs every stage in this process") from e


def check_lanes(lanes: list[list[Spec]]) -> None:
    """Refuse a plan in which a stage reads a checkpoint that another lane, or a later stage of its own lane,
    writes: the read would race the write."""
    writer = {spec[4]: i for i, lane in enumerate(lanes) for spec in lane}
    for i, lane in enumerate(lanes):
        written = set()
        for name, _, _, inputs, ckpt in lane:
            for path in inputs:
                if path in writer and (writer[path] != i or path not in written):
                    where = "another lane" if writer[path] != i else "a later stage of its lane"
                    raise ValueError(f"stage {name} reads {path}, which {where} writes")
            written.add(ckpt)


def run_lane(out: str, fresh: bool, specs: list[Spec], plan=None) -> dict:
    """A lane's stages in order (nanorlhf.infra.stages.Stages: each skipped when up to date, announced by the
    run's plan); their log."""
    st = Stages(out, fresh, plan)
    for spec in specs:
        if isinstance(sys.stdout, Prefixed):
            sys.stdout.prefix = spec[0]
        st.run(*spec)
    return st.log


def run_lanes(st: Stages, lanes: list[list[Spec]], n_lanes: int) -> None:
    """Each lane's stages in order, the lanes side by side (at most n_lanes processes); their logs join st.log."""
    check_lanes(lanes)
    lanes = [lane for lane in lanes if lane]
    jobs = [(" -> ".join(spec[0] for spec in lane), partial(run_lane, st.out, st.fresh, lane, st.plan))
            for lane in lanes]
    for log in side_by_side(jobs, n_lanes):
        st.log.update(log)
