"""Label by hand: a local web page where a person ranks or compares completions (InstructGPT §3.4).

  1. queue    K = 4..9 completions per prompt, sampled from a policy with the KV-cache
              engine (or read pre-sampled from a file), with gold questions mixed in
  2. serve    a page on 127.0.0.1: ranking mode (order, ties, 1-7 Likert, the paper's
              metadata flags) or pairwise mode (Christiano et al. 2017: left/right/tie/can't tell)
  3. log      every action is one fsynced JSONL event; undo appends a retract event;
              a restart replays the log and carries on where it stopped
  4. report   agreement with gold, between labelers (Cohen's kappa), with the simulated labelers
  5. export   comparisons for train_rm.py, preference pairs, Anthropic HH; ties on their own

    python label.py --policy=out/small/sft_1m/ckpt.pt --prompts=data/small/val_prompts.jsonl --labeler=rater1
    python label.py --completions=samples.jsonl --labeler=rater2 --mode=pair --n=30
    python label.py --report=labels/rater1.jsonl labels/rater2.jsonl --data_dir=data/small
    python label.py --report=labels/rater1.jsonl --export=out/human

Sampling 50 prompts x K = 4..9 on 2 CPU cores takes a few seconds; a ranking of K = 6
takes a person about a minute, most of it reading (docs/labeling.md).
"""
from __future__ import annotations

import os
import random
import re
import sys
from dataclasses import dataclass
from typing import ClassVar

from nanorlhf.infra.cli import run
from nanorlhf.infra.config import ConfigError
from nanorlhf.infra.jsonl import DEMO, PROMPT, Field, read_jsonl
from nanorlhf.labelapp.agreement import EXPORTS, export, report_text
from nanorlhf.labelapp.checks import MODES
from nanorlhf.labelapp.events import LabelLog
from nanorlhf.labelapp.items import build_queue, n_gold

COMPLETIONS = (Field("id", str), Field("prompt", str), Field("completions", list[str], nonempty=False))


@dataclass
class Config:
    labeler: str = ""
    """your name as it appears in the log and the exports (letters, digits, . _ -)"""
    policy: str = ""
    """checkpoint to sample completions from (with --prompts)"""
    prompts: str = ""
    """prompt file (JSONL with id, prompt) to sample completions for"""
    completions: str = ""
    """pre-sampled completions instead: JSONL rows {id, prompt, completions: [...]} (+ optional response)"""
    mode: str = "rank"
    """rank (InstructGPT: order K completions) or pair (2017 protocol: two side by side)"""
    log: str = ""
    """the event log (default labels/LABELER.jsonl); restarting on it carries on"""
    n: int = 50
    """items in the queue, gold questions included"""
    gold_rate: float = 0.1
    """share of the queue that are gold questions with known answers"""
    instructions: str = "train"
    """guidelines shown: train (helpfulness first) or eval (truthfulness and harmlessness first)"""
    k_min: int = 4
    """fewest completions sampled per prompt in ranking mode (paper: 4)"""
    k_max: int = 9
    """most completions sampled per prompt in ranking mode (paper: 9)"""
    host: str = "127.0.0.1"
    """address to bind; anything but loopback exposes the page to the network"""
    port: int = 0
    """port to listen on (0 = a free one; the URL is printed)"""
    data_dir: str = ""
    """world data folder: demonstrations for gold questions, and the simulated labelers in the report"""
    report: str = ""
    """print agreement for these logs (comma-separated, or list more after it) instead of serving"""
    export: str = ""
    """write comparisons / pairs / HH / ties exports of the --report (or --log) logs to this folder"""
    force: bool = False
    """let --export write over export files already in its folder"""
    cutoff: float = 0.75
    """gold agreement under which a labeler's labels are marked (paper: 75%)"""
    keep_below_cutoff: bool = False
    """keep the pairs and HH rows of labelers below the cutoff in the export (marked; left out by default)"""
    max_body: int = 65536
    """largest request body accepted, in bytes (larger gets 413)"""
    max_new_tokens: int = 48
    """longest sampled completion"""
    temperature: float = 1.0
    """sampling temperature"""
    gen_batch: int = 64
    """sequences generated at once"""
    seed: int = 0
    """seed for the queue and the sampling (labelers with one seed see the same prompts)"""
    device: str = "cpu"
    """cpu, cuda or auto, for sampling"""
    verbose: bool = False
    """log every HTTP request to stderr"""

    # values checked before any work starts (nanorlhf/infra/config.py check_values)
    POSITIVE: ClassVar[tuple] = ("n", "max_body", "max_new_tokens", "temperature", "gen_batch")
    RANGES: ClassVar[dict] = {"gold_rate": "[0, 1)", "cutoff": "[0, 1]", "port": "[0, 65535]", "k_min": "[2, 9]",
                              "k_max": "[2, 9]"}
    CHOICES: ClassVar[dict] = {"instructions": ("train", "eval"), "mode": MODES}
    RULES: ClassVar[tuple] = ((lambda c: c.k_min <= c.k_max, "--k_min={k_min} is above --k_max={k_max}"),
                              (lambda c: not os.path.isfile(c.export), "--export={export} is a file; give a folder"))


def _demos(path: str) -> list[dict]:
    return read_jsonl(path, DEMO) if path and os.path.exists(path) else []


def sample_rows(cfg: Config, count: int) -> list[dict]:
    """Rows {id, prompt, completions, ...prompt fields} with K completions sampled from cfg.policy."""
    import torch  # only this path needs a model

    from nanorlhf.checkpoint import load_model
    from nanorlhf.generate import SamplingConfig, check_room
    from nanorlhf.infra.device import resolve_device
    from nanorlhf.world.comparisons import fitting_prompts, sample_completions
    device = resolve_device(cfg.device)
    policy, tok, _ = load_model(cfg.policy, device)
    check_room(cfg.max_new_tokens, policy.cfg.block_size)
    rows = fitting_prompts(cfg.prompts, tok, policy.cfg.block_size, cfg.max_new_tokens, count)
    rng = random.Random(f"label-k-{cfg.seed}")
    ks = [2 if cfg.mode == "pair" else rng.randint(cfg.k_min, cfg.k_max) for _ in rows]
    print(f"sampling {sum(ks)} completions for {len(rows)} prompts from {cfg.policy} ...", flush=True)
    with torch.no_grad():
        sampling = SamplingConfig(max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature)
        comps = sample_completions(policy, tok, [r["prompt"] for r in rows], ks, sampling, batch=cfg.gen_batch,
                                   seed=cfg.seed)
    return [dict(r, completions=c) for r, c in zip(rows, comps)]


def make_queue(cfg: Config) -> list[dict]:
    """The items to label: real rows from --completions or the policy, plus gold questions."""
    real = cfg.n - n_gold(cfg.n, cfg.gold_rate)
    if cfg.completions:
        rows = read_jsonl(cfg.completions, COMPLETIONS, nonempty="completions")
        demos = [r for r in rows if isinstance(r.get("response"), str) and r["response"].strip()]
    else:
        _ = read_jsonl(cfg.prompts, PROMPT)  # a clear error for a bad prompt file before loading a model
        rows = sample_rows(cfg, real)
        demos = []
    near = os.path.join(os.path.dirname(cfg.prompts), "sft.jsonl") if cfg.prompts else ""
    demos = demos or _demos(os.path.join(cfg.data_dir, "sft.jsonl") if cfg.data_dir else "") or _demos(near)
    return build_queue(rows, demos, n=cfg.n, mode=cfg.mode, gold_rate=cfg.gold_rate, seed=cfg.seed,
                       labeler=cfg.labeler)


def serve(cfg: Config) -> None:
    from nanorlhf.labelapp.server import LabelServer
    log = LabelLog(cfg.log or os.path.join("labels", f"{cfg.labeler}.jsonl"))
    has_source = bool(cfg.completions or (cfg.policy and cfg.prompts))
    if not (log.items or has_source):
        raise ConfigError("give --completions=FILE, or --policy=CKPT with --prompts=FILE")
    try:  # bound first: a server that cannot start samples nothing and writes no log
        server = LabelServer(log, cfg.host, cfg.port, cfg.max_body, cfg.cutoff, cfg.verbose)
    except OSError as e:  # a port in use, an address this machine does not have
        raise ConfigError(f"cannot listen on {cfg.host}:{cfg.port}: {e.strerror or e}") from None
    queue = make_queue(cfg) if has_source and len(log.items) < cfg.n else None  # top up; never resample
    source = cfg.completions or f"{cfg.policy} on {cfg.prompts}"
    log.start(cfg.labeler, cfg.mode, cfg.instructions, queue, source=source)
    done, total = log.progress()
    if cfg.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"WARNING: listening on {cfg.host}: anyone who can reach it and has the URL can label", flush=True)
    print(f"{cfg.labeler}: {done}/{total} labeled in {log.path} ({cfg.mode} mode, {cfg.instructions} guidelines)")
    print(f"open {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print(f"\nstopped; {log.progress()[0]}/{total} labeled. Report: python label.py --report={log.path}")
    finally:
        server.server_close()
        log.close()


def main(cfg: Config, more_logs: list[str] | tuple = ()) -> None:
    logs = [p for p in cfg.report.split(",") if p] + list(more_logs)
    if cfg.report or cfg.export:
        logs = logs or ([cfg.log] if cfg.log else [])
        if not logs:
            raise ConfigError("--report/--export need log files: --report=labels/rater1.jsonl [more.jsonl ...]")
        missing = [p for p in logs if not os.path.isfile(p)]
        if missing:  # a mistyped path is not an empty log: it would export nothing over good files
            raise ConfigError(f"no such labeling log: {missing[0]} (nothing read, nothing written)")
        empty = [p for p in logs if os.path.getsize(p) == 0]
        if empty:
            raise ConfigError(f"{empty[0]} is empty: no labeling events in it (nothing read, nothing written)")
        there = [n for n in EXPORTS if os.path.exists(os.path.join(cfg.export, n))] if cfg.export else []
        if there and not cfg.force:
            raise ConfigError(f"--export={cfg.export} already holds {', '.join(there)}; --force=true writes over them")
        if cfg.report:
            print(report_text(logs, cfg.data_dir, cfg.cutoff, cfg.seed))
        if cfg.export:
            counts = export(logs, cfg.export, cfg.cutoff, cfg.keep_below_cutoff)
            print(f"wrote {cfg.export}: " + ", ".join(f"{n} ({c} rows)" for n, c in counts.items()))
        return
    if more_logs:
        raise ConfigError(f"unexpected argument {more_logs[0]!r}: extra log files go after --report=")
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", cfg.labeler):
        raise ConfigError("--labeler=NAME is required (letters, digits, . _ -, at most 40)")
    serve(cfg)


if __name__ == "__main__":
    argv = sys.argv[1:]
    logs = [a for a in argv if not a.startswith("-")]  # extra labeling logs after --report=
    run(lambda cfg: main(cfg, logs), Config, __doc__, [a for a in argv if a.startswith("-")])
