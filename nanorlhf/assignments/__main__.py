"""`python -m nanorlhf.assignments make|hint|answers|grade`: the course's command line (see registry.py's docstring)."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from nanorlhf.assignments import grading, registry
from nanorlhf.assignments.handout import answers, hint, make
from nanorlhf.assignments.registry import ROOT, AssignmentError


class Parser(argparse.ArgumentParser):
    """argparse that answers a mistake in one line (the usage is a --help away)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (--help lists the arguments)\n")


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds > 0")
    return value


def folder(text: str) -> Path:
    """An argparse type: a folder that exists."""
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is not a folder")
    return Path(text)


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m nanorlhf.assignments", description=registry.__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="write the handout: every region stubbed, the instructor's side left out")
    m.add_argument("out_dir", help="new or empty folder for the student copy")
    m.add_argument("--repo", default=ROOT, type=folder, help="the solution repository (a git checkout)")
    h = sub.add_parser("hint", help="print an assignment's hints, level 1 (the stub's) up to --level")
    h.add_argument("name", help="the assignment, e.g. gae")
    h.add_argument("--level", type=int, default=1, help="1: what and why; 2: the traps")
    a = sub.add_parser("answers", help="print an assignment's reference body (instructors; refused in a copy)")
    a.add_argument("name", help="the assignment, e.g. gae")
    g = sub.add_parser("grade", help="run the grading tests and print a score per assignment")
    g.add_argument("--repo", default=ROOT, type=folder, help="the copy to grade (default: this one)")
    g.add_argument("--class", dest="class_dir", default=None, type=folder,
                   help="grade every student copy in this folder (one subfolder each) into --csv")
    g.add_argument("--csv", default="grades.csv", help="with --class: the CSV to write")
    g.add_argument("--only", default=None, help="grade only these assignments (comma-separated names)")
    g.add_argument("--timeout", type=seconds, default=grading.CPU_SECONDS,
                   help="CPU seconds one grading run may use (not wall-clock: a loaded machine is fine)")
    g.add_argument("--seed", type=int, default=None, help="the held-out cases' seed (default: drawn, and printed)")
    args = p.parse_args(argv)
    try:
        if args.cmd == "make":
            return make(Path(args.out_dir), Path(args.repo))
        if args.cmd == "hint":
            print(hint(args.name, args.level))
            return 0
        if args.cmd == "answers":
            print(answers(args.name))
            return 0
        if args.class_dir:
            return grading.grade_class(Path(args.class_dir), Path(args.csv), args.only, args.timeout, args.seed)
        return grading.grade(Path(args.repo).resolve(), args.only, args.timeout, args.seed)[0]
    except AssignmentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
