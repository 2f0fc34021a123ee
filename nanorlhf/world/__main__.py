"""Build a world and write it to disk.

    python -m nanorlhf.world --scale=small --seed=0 --out=data/small [--report=true]
    python -m nanorlhf.world --scale=small --rm_extra=7500 --out=data/small_rm9k   # 9,000 RM prompts

Takes about 2 s at small (see the report for sizes). Writes the files listed in
nanorlhf.world.SCHEMA. The report adds corpus tokens (with the folder's BPE, or one
trained on the spot) and the simulated labelers' agreement and screening.
"""
import os
import time
from dataclasses import dataclass, replace
from typing import ClassVar

from nanorlhf.infra.cli import UsageError, run
from nanorlhf.infra.fileio import hold

from . import WorldMismatch, build_world, get_scale, world_in, write_world
from .scales import SCALES
from .summary import report


@dataclass
class Config:
    scale: str = "small"
    """tiny, small or paper"""
    seed: int = 0
    """world seed"""
    out: str = ""
    """folder to write the data files to (nothing written if empty)"""
    report: bool = False
    """print the world report"""
    labeler_seed: int = 0
    """seed of the simulated labeler pool shown in the report"""
    rm_extra: int = 0
    """more RM prompts after the scale's own (a larger label budget; every other set stays the same)"""
    force: bool = False
    """write over a world of other settings (or unfinished) that --out already holds"""

    # values checked before any work starts (nanorlhf/infra/config.py check_values)
    NONNEGATIVE: ClassVar[tuple] = ("rm_extra",)
    CHOICES: ClassVar[dict] = {"scale": tuple(SCALES)}


def token_section(data, out: str) -> tuple[str, str]:
    from nanorlhf.tokenizer import Tokenizer
    path = os.path.join(out, "tokenizer.tiktoken") if out else ""
    text = "\n\n".join(d["text"] for d in data.corpus)
    tok = Tokenizer.load(path) if path and os.path.exists(path) else Tokenizer.train(text, 2048)
    n = sum(len(t) + 1 for t in tok.encode_batch([d["text"] for d in data.corpus]))
    words = len(text.split())
    return "tokens", f"{n:,} tokens with a {tok.vocab_size}-token BPE ({n / words:.2f} tokens per word)"


def main(cfg: Config) -> None:
    with hold(cfg.out):  # one writer at a time ('' holds nothing; nanorlhf/infra/fileio.py)
        theirs = world_in(cfg.out) if cfg.out and not cfg.force else None  # checked before any work
        ours = {"scale": cfg.scale, "seed": cfg.seed, **({"rm_extra": cfg.rm_extra} if cfg.rm_extra else {})}
        if theirs is not None and theirs != ours:
            raise WorldMismatch(f"{cfg.out} holds a world of {', '.join(f'{k} {v}' for k, v in theirs.items())}; "
                                "--force=true writes this one over it")
        t = time.time()
        try:
            data = build_world(replace(get_scale(cfg.scale), rm_extra=cfg.rm_extra), cfg.seed)
        except ValueError as e:  # a size the world cannot fill: one line, no traceback
            raise UsageError(str(e)) from None
        print(f"built {cfg.scale} world (seed {cfg.seed}) in {time.time() - t:.2f}s")
        if cfg.out:
            write_world(data, cfg.out)
            print(f"wrote {cfg.out}")
    if cfg.report:
        from nanorlhf.world.judge import labeler_report, screening_items
        from nanorlhf.world.labelers import LabelerPool
        pool = LabelerPool.build(seed=cfg.labeler_seed)
        pool.screen(screening_items(data, seed=cfg.labeler_seed), cutoff=0.75, seed=cfg.labeler_seed)
        print(report(data, extra=[token_section(data, cfg.out),
                                  ("simulated labelers", labeler_report(data, pool, cfg.labeler_seed))]))


if __name__ == "__main__":
    run(main, Config, __doc__)
