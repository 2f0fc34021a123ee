"""The autograder of the course assignments (nanorlhf/assignments/registry.py): one student's copy, or a class.

    python -m nanorlhf.assignments grade [--repo=DIR] [--only=NAME] [--seed=S]   # a score per assignment
    python -m nanorlhf.assignments grade --class=DIR --csv=FILE                  # every copy in DIR, one CSV row

It grades the regions, not the copy. Each assignment region's body is read from the student's file, screened
(vetting.py: no imports from the tests, no private torch entry points, no fused attention, nothing defined
outside the markers) and spliced into a fresh tree, in a temporary folder, of this installation's course code
(every other region stubbed) and its tests: the visible grading tests and, in an instructor's checkout, the
held-out ones (tests/instructor/, cases drawn from a seed drawn now). Nothing else of the copy is read: its
tests, conftest.py, pyproject.toml, pytest.ini and edits outside the regions change no grade (the latter are
listed). The tests run in one child process under a CPU-time limit (testrun.py). Inside a student copy, the
copy is the course code, and grading refuses visible tests edited since `make` (hashed in STUDENT_STAMP).
"""
from __future__ import annotations

import csv
import json
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from nanorlhf.assignments.handout import STUDENT_STAMP, hints_asked, sha256
from nanorlhf.assignments.regions import bodies, find_regions, splice, stub, stub_body
from nanorlhf.assignments.registry import API_VERSION, HELDOUT, ROOT, Assignment, AssignmentError, select
from nanorlhf.assignments.testrun import PytestRunError, run_tests
from nanorlhf.assignments.vetting import vet

CPU_SECONDS = 120  # default CPU-time limit of one grading run; one student takes a few seconds


@dataclass
class Graded:
    """One copy's grade: {name: [(test, passed, message)]}, {name: why its region was refused}, the region files
    edited outside their regions (ignored), the seed of the held-out cases and whether they ran."""
    details: dict[str, list[tuple[str, bool, str]]]
    refused: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    seed: int = 0
    heldout: bool = False

    def passed(self, name: str) -> bool:
        return all(ok for _, ok, _ in self.details[name])


def check_visible_tests(repo: Path) -> None:
    """Inside a student copy: refuse grading once a visible grading test no longer hashes as `make` wrote it."""
    stamp = repo / STUDENT_STAMP
    made = json.loads(stamp.read_text()).get("grading_tests", {}) if stamp.exists() else {}
    edited = [f for f, h in made.items() if not (repo / f).is_file() or sha256(repo / f) != h]
    if edited:
        raise AssignmentError(f"grading tests edited since the copy was made: {', '.join(edited)}; "
                              "grading runs them as handed out (restore them to grade)")


def student_bodies(student: Path, f: str, chosen: list[Assignment], course: str, refused: dict) -> tuple[dict, bool]:
    """({name: body} of the chosen regions of the student's file f that pass vetting, whether the student's file
    differs from the course's outside the regions); a refused region's reason goes into `refused`."""
    names = [a.name for a in chosen if a.file == f]
    path = student / f
    if not path.is_file():
        refused.update({n: f"{f} is missing from the copy" for n in names})
        return {}, False
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        regions = find_regions(text, f)
    except AssignmentError as e:
        refused.update({n: f"its markers are broken: {e}" for n in names})
        return {}, True
    stubbed = stub(course, find_regions(course, f))  # what the region's body will sit in: no reference body
    stubbed_regions = find_regions(stubbed, f)
    ok = {}
    for n in names:
        if n not in regions:
            refused[n] = f"{f} has no '# BEGIN/END ASSIGNMENT {n}' markers"
        elif why := vet(bodies(text, regions)[n], stubbed, stubbed_regions[n][1], f):
            refused[n] = why
        else:
            ok[n] = bodies(text, regions)[n]
    return ok, stub(text, regions) != stubbed


def graded_tree(student: Path, tree: Path, chosen: list[Assignment]) -> tuple[dict, list[str]]:
    """Build the tree to grade: this installation's nanorlhf/ with every region stubbed, the student's vetted
    bodies spliced in, and the grading test files. Returns ({name: why refused}, files edited outside regions)."""
    shutil.copytree(ROOT / "nanorlhf", tree / "nanorlhf", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    refused, ignored = {}, []
    for f in sorted({a.file for a in select(None)}):
        course = (ROOT / f).read_text(encoding="utf-8")
        regions = find_regions(course, f)
        new, edited = student_bodies(student, f, chosen, course, refused)
        (tree / f).write_text(splice(course, regions, {n: new.get(n, stub_body(n)) for n in regions}), encoding="utf-8")
        ignored += [f] if edited else []
    tests = {n.split("::")[0] for a in chosen for n in a.tests + a.heldout} | {f"{HELDOUT}/drawn.py"}
    for t in sorted(t for t in tests if (ROOT / t).is_file()):
        (tree / t).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / t, tree / t)
    return refused, ignored


def grade_results(results: dict, nodes: tuple[str, ...]) -> list[tuple[str, bool, str]]:
    """[(test, passed, message)] over the node ids; a node id that did not run fails, saying why."""
    out = []
    for node in nodes:
        cases = [(k, *v) for k, v in results.items() if k == node or ("[" not in node and k.startswith(node + "["))]
        why = results.get(node.split("::")[0], (False, "not collected"))[1]
        out += cases or [(node, False, f"did not run: {why}")]
    return out


def run_grading(repo: Path, chosen: list[Assignment], cpu_seconds: float, seed: int | None = None) -> Graded:
    """Grade one copy (the student's folder `repo`) in a fresh tree."""
    if repo.resolve() == ROOT:
        check_visible_tests(repo)
    seed = secrets.randbelow(10**6) if seed is None else seed
    heldout = any((ROOT / n.split("::")[0]).is_file() for a in chosen for n in a.heldout)
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "course"
        refused, ignored = graded_tree(repo, tree, chosen)
        graded = [a for a in chosen if a.name not in refused]
        nodes = [n for a in graded for n in a.tests + (a.heldout if heldout else ())]
        try:
            results = run_tests(tree, nodes, cpu_seconds, seed) if nodes else {}
        except PytestRunError as e:
            raise AssignmentError(str(e)) from None
    details = {a.name: [(f"{a.file}: region {a.name}", False, f"refused: {refused[a.name]}")] if a.name in refused
               else grade_results(results, a.tests + (a.heldout if heldout else ())) for a in chosen}
    return Graded(details, refused, ignored, seed, heldout)


def grade(repo: Path = ROOT, only: str | None = None, cpu_seconds: float = CPU_SECONDS,
          seed: int | None = None) -> tuple[int, Graded]:
    """Grade one copy; print a score per assignment. Returns (exit code, the grade)."""
    chosen = select(only)
    stamp = repo / STUDENT_STAMP
    kind = f"student copy of {json.loads(stamp.read_text())['made_from'][:10]}" if stamp.exists() else "solutions"
    print(f"nanorlhf assignments, API {API_VERSION}: grading {repo} ({kind}) against {ROOT}")
    g = run_grading(repo, chosen, cpu_seconds, seed)
    print(f"  held-out tests: cases drawn with seed {g.seed} (replay: --seed={g.seed})" if g.heldout else
          "  held-out tests: not in this installation (the instructor's grade adds them)")
    if g.ignored:
        print(f"  edits outside the regions are not graded: {', '.join(g.ignored)}")
    width = max(len(a.name) for a in chosen)
    for a in chosen:
        tests = g.details[a.name]
        ok = sum(t[1] for t in tests)
        why = "" if ok == len(tests) else "  " + next(msg for _, good, msg in tests if not good)
        print(f"  {a.name:<{width}}  {'PASS' if ok == len(tests) else 'FAIL'}  {ok}/{len(tests)} tests{why}")
    n_pass = sum(g.passed(a.name) for a in chosen)
    print(f"score: {n_pass}/{len(chosen)} assignments passed")
    return (0 if n_pass == len(chosen) else 1), g


def grade_class(class_dir: Path, csv_path: Path, only: str | None = None, cpu_seconds: float = CPU_SECONDS,
                seed: int | None = None) -> int:
    """Grade every student copy in class_dir (one folder each, named for the student) into one CSV.

    Columns, in this order: student, score, out_of, one 1/0 column per assignment, failed_tests, refused
    (assignment: why), hints (the highest level asked per assignment), ignored_edits (files edited outside
    their regions), error (a folder that is not a copy, a run out of CPU time: score 0). Returns 0 once written.
    """
    chosen = select(only)
    if not class_dir.is_dir():
        raise AssignmentError(f"{class_dir} is not a folder of student copies")
    students = sorted(d for d in class_dir.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not students:
        raise AssignmentError(f"{class_dir} holds no student folders")
    print(f"nanorlhf assignments, API {API_VERSION}: grading {len(students)} copies in {class_dir}, "
          f"{len(chosen)} assignments each")
    rows = []
    for d in students:
        row = {"student": d.name, "score": 0, "out_of": len(chosen), **{a.name: 0 for a in chosen},
               "failed_tests": "", "refused": "", "hints": hints_asked(d), "ignored_edits": "", "error": ""}
        try:
            if not (d / "nanorlhf").is_dir():
                raise AssignmentError("not a copy of the repository (no nanorlhf/ folder)")
            g = run_grading(d.resolve(), chosen, cpu_seconds, seed)
            row.update({a.name: int(g.passed(a.name)) for a in chosen})
            row["score"] = sum(row[a.name] for a in chosen)
            row["failed_tests"] = ";".join(t.split("::")[-1] for a in chosen if a.name not in g.refused
                                           for t, ok, _ in g.details[a.name] if not ok)
            row["refused"] = ";".join(f"{n}: {why}" for n, why in g.refused.items())
            row["ignored_edits"] = ";".join(g.ignored)
        except AssignmentError as e:
            row["error"] = str(e).splitlines()[0]
        rows.append(row)
        note = f"  error: {row['error']}" if row["error"] else f"  refused: {row['refused']}" if row["refused"] else ""
        print(f"  {d.name}: {row['score']}/{len(chosen)}{note}", flush=True)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {csv_path}: {len(rows)} students")
    return 0
