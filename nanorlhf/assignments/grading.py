"""The autograder of the course assignments (nanorlhf/assignments/registry.py): one student's copy, or a class of them.

    python -m nanorlhf.assignments grade [--repo=DIR] [--only=NAME]    # a score per assignment
    python -m nanorlhf.assignments grade --class=DIR --csv=FILE        # every copy in DIR, one CSV row each

All grading tests run in ONE pytest process (nanorlhf/assignments/testrun.py), with the grading tests as handed
out: graded from another installation (the instructor's, `--repo=STUDENT_COPY` or `--class`), this
installation's test files replace the student's; in the copy itself, edited ones (hashed by `make`)
refuse grading.
"""
from __future__ import annotations

import csv
import json
import shutil
import tempfile
from pathlib import Path

from nanorlhf.assignments.registry import (API_VERSION, ROOT, STUDENT_STAMP, Assignment, AssignmentError, grading_files,
                                  select, sha256)
from nanorlhf.assignments.testrun import PytestRunError, run_tests

COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "out", "data", "labels", "__pycache__", ".pytest_cache")


def grading_tree(repo: Path, tmp: Path) -> tuple[Path, list[str]]:
    """The tree to grade and the student files the grader's own tests replaced in it.

    Graded from this installation (the student grading their own copy): the grading tests must still
    hash as `make` wrote them, or grading is refused. Graded from another one (the instructor's, with
    --repo=STUDENT_COPY): a copy of the student's tree with this installation's grading tests put back
    over the student's, so an edited test changes nothing.
    """
    stamp = repo / STUDENT_STAMP
    if repo.resolve() == ROOT:
        made = json.loads(stamp.read_text()).get("grading_tests", {}) if stamp.exists() else {}
        edited = [f for f, h in made.items() if not (repo / f).is_file() or sha256(repo / f) != h]
        if edited:
            raise AssignmentError(f"grading tests edited since the copy was made: {', '.join(edited)}; "
                                  "grading runs them as handed out (restore them to grade)")
        return repo, []
    tree = tmp / "graded"
    shutil.copytree(repo, tree, ignore=COPY_IGNORE)
    replaced = []
    for f in grading_files(ROOT):
        if not (tree / f).is_file() or sha256(tree / f) != sha256(ROOT / f):
            replaced.append(f)
        (tree / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, tree / f)
    return tree, replaced


def grade_results(results: dict, a: Assignment) -> list[tuple[str, bool, str]]:
    """[(test, passed, message)] over a's node ids; a node id that did not run fails, saying why."""
    out = []
    for node in a.tests:
        cases = [(k, *v) for k, v in results.items() if k == node or ("[" not in node and k.startswith(node + "["))]
        why = results.get(node.split("::")[0], (False, "not collected"))[1]
        out += cases or [(node, False, f"did not run: {why}")]
    return out


def run_grading(repo: Path, chosen: list[Assignment], timeout: float) -> tuple[dict, list[str]]:
    """({name: [(test, passed, message)]}, the student files replaced by the grader's tests)."""
    nodes = list(dict.fromkeys(n for a in chosen for n in a.tests))
    with tempfile.TemporaryDirectory() as tmp:
        tree, replaced = grading_tree(repo, Path(tmp))
        try:
            results = run_tests(tree, nodes, timeout)
        except PytestRunError as e:
            raise AssignmentError(str(e)) from None
    return {a.name: grade_results(results, a) for a in chosen}, replaced


def passed(tests: list[tuple[str, bool, str]]) -> bool:
    return all(ok for _, ok, _ in tests)


def grade(repo: Path = ROOT, only: str | None = None, timeout: float = 300) -> tuple[int, dict]:
    """Run the selected assignments' grading tests; print a score each. Returns (exit code, {name: tests})."""
    chosen = select(only)
    stamp = repo / STUDENT_STAMP
    kind = f"student copy of {json.loads(stamp.read_text())['made_from'][:10]}" if stamp.exists() else "solutions"
    n_ids = len({n for a in chosen for n in a.tests})
    print(f"nanorlhf assignments, API {API_VERSION}: grading {repo} ({kind}), {n_ids} test ids")
    details, replaced = run_grading(repo, chosen, timeout)
    if replaced:
        print(f"  the grader's own tests replaced {len(replaced)} edited or missing student files: "
              f"{', '.join(replaced)}")
    width = max(len(a.name) for a in chosen)
    for a in chosen:
        tests = details[a.name]
        ok = sum(t[1] for t in tests)
        why = "" if ok == len(tests) else "  " + next(msg for _, good, msg in tests if not good)
        print(f"  {a.name:<{width}}  {'PASS' if ok == len(tests) else 'FAIL'}  {ok}/{len(tests)} tests{why}")
    n_pass = sum(passed(tests) for tests in details.values())
    print(f"score: {n_pass}/{len(chosen)} assignments passed")
    return (0 if n_pass == len(chosen) else 1), details


def grade_class(class_dir: Path, csv_path: Path, only: str | None = None, timeout: float = 300) -> int:
    """Grade every student copy in class_dir (one folder each, named for the student) into one CSV.

    Columns: student, score, out_of, one 1/0 column per assignment, failed_tests, replaced_tests, error.
    A folder that cannot be graded (no nanorlhf/ in it, a run that times out) gets its error and score 0.
    Returns 0 once the CSV is written, whatever the scores.
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
        row = {"student": d.name, "score": 0, "out_of": len(chosen), "failed_tests": "", "replaced_tests": "",
               "error": "", **{a.name: 0 for a in chosen}}
        try:
            if not (d / "nanorlhf").is_dir():
                raise AssignmentError("not a copy of the repository (no nanorlhf/ folder)")
            details, replaced = run_grading(d.resolve(), chosen, timeout)
            row.update({a.name: int(passed(details[a.name])) for a in chosen})
            row["score"] = sum(row[a.name] for a in chosen)
            failed = [t.split("::")[-1] for a in chosen for t, ok, _ in details[a.name] if not ok]
            row["failed_tests"] = ";".join(failed)
            row["replaced_tests"] = ";".join(replaced)
        except AssignmentError as e:
            row["error"] = str(e).splitlines()[0]
        rows.append(row)
        note = f"  error: {row['error']}" if row["error"] else (
            f"  (grader's tests replaced: {row['replaced_tests']})" if row["replaced_tests"] else "")
        print(f"  {d.name}: {row['score']}/{len(chosen)}{note}", flush=True)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {csv_path}: {len(rows)} students")
    return 0
