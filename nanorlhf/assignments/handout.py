"""The handout, the hints a student asks for, and the instructor's answer key.

`make` copies the git-tracked files, minus the instructor's side (tests/instructor/: the held-out tests and
the grader's fixtures), with every region stubbed, and stamps the copy (STUDENT_STAMP). In a copy,
`hint NAME --level=N` appends to HINTS_LOG, which the instructor's class CSV reads; `answers NAME` prints the
reference body of the instructor's checkout and is refused in a copy.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from pathlib import Path

from nanorlhf.assignments.regions import bodies, find_regions, locate, stub
from nanorlhf.assignments.registry import API_VERSION, BY_NAME, HELDOUT, REGISTRY, ROOT, AssignmentError, select

STUDENT_STAMP = ".student_copy.json"  # written by `make` at the top of a student copy
HINTS_LOG = ".hints_asked.jsonl"      # one line per `hint` asked for in a student copy
INSTRUCTOR_ONLY = (f"{HELDOUT}/",)    # never in a handout


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def grading_files(repo: Path) -> list[str]:
    """The visible test files the grader runs: what a student grading their own copy must leave as handed out."""
    return sorted({n.split("::")[0] for a in REGISTRY for n in a.tests if (repo / n.split("::")[0]).is_file()})


def handed_out(path: str) -> bool:
    return not path.startswith(INSTRUCTOR_ONLY)


def make(out: Path, repo: Path = ROOT) -> int:
    """Write the handout of repo's git-tracked files into out (absent or empty)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise AssignmentError(f"{out} exists and is not an empty folder; pick a new OUT_DIR")
    locate(repo)  # every registry region present and well formed, before anything is written
    try:
        ls = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as e:
        raise AssignmentError(f"{repo} is not a git checkout ({e}); make copies the git-tracked files") from None
    tracked = set(ls.stdout.decode().split("\0")) | {"docs/assignments.md"}
    files = sorted(f for f in tracked if f and handed_out(f) and (repo / f).is_file())
    regions = locate(repo, files)
    for f in files:
        dst = out / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        if f in regions:
            dst.write_text(stub((repo / f).read_text(encoding="utf-8"), regions[f]), encoding="utf-8")
            shutil.copymode(repo / f, dst)
        else:
            shutil.copy2(repo / f, dst)
    stamp = {"api_version": API_VERSION, "made_from": commit, "assignments": [a.name for a in REGISTRY],
             "grading_tests": {f: sha256(repo / f) for f in grading_files(repo)}}
    (out / STUDENT_STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
    n = sum(len(r) for r in regions.values())
    print(f"wrote {len(files)} files to {out}; {n} regions stubbed (assignment API {API_VERSION}); "
          f"left out: {', '.join(INSTRUCTOR_ONLY)}")
    print(f"grade with: cd {out} && python -m nanorlhf.assignments grade; "
          "more hints: python -m nanorlhf.assignments hint NAME --level=2")
    return 0

# -----------------------------------------------------------------------------
# hints and the answer key


def hint(name: str, level: int, root: Path = ROOT) -> str:
    """Hints 1..level of one assignment, one numbered paragraph each; in a student copy, recorded in HINTS_LOG."""
    a = select(name)[0]
    if not 1 <= level <= len(a.hints):
        raise AssignmentError(f"--level must be 1..{len(a.hints)}, got {level}")
    if (root / STUDENT_STAMP).exists():
        with open(root / HINTS_LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps({"assignment": name, "level": level, "at": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
    return "\n".join(f"{name} hint {i + 1}/{len(a.hints)}: {h}" for i, h in enumerate(a.hints[:level]))


def hints_asked(copy: Path) -> str:
    """The highest hint level asked for per assignment in a copy, in registry order: "gae:2 dpo_loss:1"."""
    asked = {}
    path = copy / HINTS_LOG
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
        try:
            row = json.loads(line)
            asked[row["assignment"]] = max(asked.get(row["assignment"], 0), int(row["level"]))
        except (ValueError, KeyError, TypeError):
            continue  # a torn or edited line
    return " ".join(f"{a.name}:{asked[a.name]}" for a in REGISTRY if a.name in asked)


def answers(name: str, root: Path = ROOT) -> str:
    """The answer key of one assignment: its reference body in the instructor's checkout, and its traps."""
    a = select(name)[0]
    if (root / STUDENT_STAMP).exists():
        raise AssignmentError("the answer key is for instructors, and this is a student copy (made by `make`); "
                              f"ask for the traps instead: python -m nanorlhf.assignments hint {name} --level=2")
    text = (root / a.file).read_text(encoding="utf-8")
    body = bodies(text, find_regions(text, a.file))[name]
    if body.strip().startswith("raise NotImplementedError"):
        raise AssignmentError(f"{a.file} holds a stub for {name}, not a reference body")
    head = f"{name}: the reference body of {BY_NAME[name].function} in {a.file}, between its markers"
    return f"{head}\n\n{body.strip()}\n\ntraps (hint level 2): {a.hints[1]}"
