"""Every script's entry point: flags parsed, the run started, and the project's own errors answered in one line.

    if __name__ == "__main__":
        run(main, Config, __doc__)

The run holds its out_dir for its whole length: a second run on the same folder is
refused while the first lives (nanorlhf/infra/fileio.py hold). Before the run, temporary files
that a killed earlier run left in that folder are removed (a live writer's are kept).
A mistake a user can make (a mistyped flag, a bad value, a missing or malformed input, a
checkpoint of the wrong kind, a full disk) ends with one line on stderr that names the
culprit and, where one exists, the command that makes the missing input; exit status 2
for usage and data errors, 1 for the rest. `--debug` shows the traceback instead. Any
other exception is a bug in nanorlhf and keeps its traceback.

`--help` prints the script's one-line purpose, then its flags, each choice flag's values and
each preset's settings.

Example:
    $ python train_ppo.py --betta=0.1
    train_ppo.py: unknown flag --betta; did you mean --beta? (--help lists the flags)
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import sys

from nanorlhf.infra.config import ConfigError, parse_config, usage
from nanorlhf.infra.fileio import FolderBusy, clean_orphans, hold
from nanorlhf.infra.guard import NonFiniteError
from nanorlhf.infra.schemas import DataError


class UserError(Exception):
    """A mistake a user can make (a checkpoint of the wrong kind, a log that cannot be resumed): one line, exit 2.

    Subclassed where the mistake is detected (checkpoint.CheckpointError, labelapp's LogError), so this module
    knows no module above it. `missing` names a file an earlier stage should have written (for the hint)."""
    missing: str | None = None


class UsageError(ConfigError):
    """A flag value the script cannot work with (checked before any work starts)."""


USAGE, FAILURE = 2, 1


def make_hint(path: str) -> str:
    """The command that creates a missing input, judged from its path."""
    parts = os.path.normpath(path).split(os.sep)
    if path.endswith(".jsonl") or path.endswith(".json"):
        folder = os.path.dirname(path) or "."
        scale = os.path.basename(folder)
        if scale in ("tiny", "small", "paper"):
            return f"build the world first: python -m nanorlhf.world --scale={scale} --out={folder}"
    if path.endswith(".pt") and len(parts) >= 2:
        stage, preset = parts[-2], parts[-3] if len(parts) >= 3 else "small"
        preset = preset if preset in ("tiny", "small", "paper") else "small"
        if stage.startswith(("dpo", "rlaif", "iterated")):  # the lineage's stages
            return f"run python pipeline.py --preset={preset} --lineage=true first (it trains DPO, RLAIF, iterated PPO)"
        for prefix, script in (("base", "pretrain.py"), ("sft", "train_sft.py"), ("flan", "train_sft.py"),
                               ("rm", "train_rm.py"), ("ppo", "train_ppo.py")):
            if stage.startswith(prefix):
                return f"run {script} --preset={preset} first (or python pipeline.py --preset={preset})"
    return ""


def one_line(text: str) -> str:
    """A message of several lines (a resume's list of changed fields) as one."""
    return "; ".join(line.strip() for line in text.strip().splitlines() if line.strip())


def explain(e: BaseException) -> tuple[str, int] | None:
    """(one-line message, exit status) for an error a user can cause; None for a bug."""
    if isinstance(e, UserError) and e.missing:
        hint = make_hint(e.missing)
        return str(e) + (f"; {hint}" if hint else ""), USAGE
    if isinstance(e, (ConfigError, DataError, UserError, FolderBusy)):
        return one_line(str(e)), USAGE
    if isinstance(e, NonFiniteError):
        return one_line(str(e)), FAILURE
    if isinstance(e, FileNotFoundError):
        name = e.filename or str(e)
        hint = make_hint(str(name))
        return f"no such file: {name}" + (f"; {hint}" if hint else ""), USAGE
    if isinstance(e, IsADirectoryError):
        return f"expected a file, got the folder {e.filename}", USAGE
    if isinstance(e, PermissionError):
        return f"permission denied: {e.filename}", FAILURE
    text = str(e)
    if (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EFBIG)) or re.search(
            r"No space left|file write failed|enforce fail at inline_container|File too large", text):
        return f"no space left on the device (or over the file-size limit) while writing: {text.splitlines()[0]}", \
            FAILURE
    if isinstance(e, UnicodeDecodeError):
        return f"an input is not UTF-8 text ({e.reason} at byte {e.start})", USAGE
    if e.__class__ in (FileExistsError, NotADirectoryError) and e.filename and not os.path.isdir(e.filename):
        return f"{e.filename} (or a folder above it) is a file, where a folder is needed", USAGE
    if isinstance(e, OSError) and e.strerror:  # the environment's answer (a port in use, a read-only disk): one line
        return e.strerror + (f": {e.filename}" if e.filename else ""), FAILURE
    return None


def debug_flag(argv: list[str]) -> tuple[bool, list[str]]:
    """(whether --debug is on, argv without it): `--debug`, `--debug=true` or `--debug true`."""
    rest, debug, i = [], False, 0
    while i < len(argv):
        a = argv[i].lower()
        if a == "--debug" or a.startswith("--debug="):
            value = a.partition("=")[2]
            if not value and i + 1 < len(argv) and argv[i + 1].lower() in ("true", "false", "1", "0"):
                value, i = argv[i + 1].lower(), i + 1
            debug = value in ("", "true", "1")
        else:
            rest.append(argv[i])
        i += 1
    return debug, rest


@contextlib.contextmanager
def owned_output(cfg):
    """Hold the run's out_dir while it runs; first remove the temp files dead runs left there (or in its out)."""
    with hold(getattr(cfg, "out_dir", "") or ""):
        for folder in {getattr(cfg, "out_dir", "") or "", getattr(cfg, "out", "") or ""} - {""}:
            gone = clean_orphans(folder)
            if gone:
                print(f"removed {len(gone)} unfinished temporary file(s) in {folder}: {', '.join(gone)}")
        yield


def run(main, cls, doc: str | None = None, argv: list[str] | None = None):
    """Parse cls from argv, call main(cfg), and answer the project's own errors in one line (see module doc)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = os.path.basename(sys.argv[0]) or cls.__module__
    debug, argv = debug_flag(argv)
    if any(a in ("-h", "--help") for a in argv):
        purpose = (doc or "").strip().splitlines()[0] if doc else ""
        print((purpose + "\n\n" if purpose else "") + usage(cls))
        raise SystemExit(0)
    try:
        cfg = parse_config(cls, argv)
        with owned_output(cfg):
            return main(cfg)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        raise SystemExit(130)
    except SystemExit as e:  # a script's own `raise SystemExit("message")` is a usage error
        if isinstance(e.code, str):
            print(f"{prog}: {e.code}", file=sys.stderr)
            raise SystemExit(USAGE)
        raise
    except Exception as e:
        answer = explain(e)
        if answer is None or debug:
            raise
        print(f"{prog}: {answer[0]}", file=sys.stderr)
        raise SystemExit(answer[1])
