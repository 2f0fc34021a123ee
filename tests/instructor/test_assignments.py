"""The course assignments: the handout, the grader, the registry and its docs (nanorlhf/assignments/).

Three gradings in all (the handout, the solutions, a class with one copy to run), and two small runs of the engine.
"""
import csv
import os
import re
import resource
import shutil
import subprocess
import sys

import pytest

from nanorlhf.assignments import grading, handout, regions
from nanorlhf.assignments.__main__ import main as cli_main
from nanorlhf.assignments.registry import API_VERSION, BY_NAME, REGISTRY, ROOT
from nanorlhf.assignments.testrun import PytestRunError, run_tests
from wrong_solutions import IN_THE_CLASS, RIGHT, drop_copy_files


def solution_body(name):
    """The library's own code between an assignment's markers."""
    a = BY_NAME[name]
    text = (ROOT / a.file).read_text()
    return regions.bodies(text, regions.find_regions(text, a.file))[name]


def in_copy(copy, *args):
    """Run the course's command line inside a copy, as its student would."""
    return subprocess.run([sys.executable, "-m", "nanorlhf.assignments", *args], cwd=copy, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(copy)))


def test_handout_fails_every_assignment_with_its_own_hint_whatever_the_copy_adds(tmp_path, capsys):
    """In the handout every visible and held-out grading test fails with ITS assignment's NotImplementedError hint
    (no import error, no other assignment's stub in the way), and each region is exactly one stub line; a
    conftest.py, pytest.ini, pyproject.toml, plugin or sitecustomize.py that passes every test, and a visible test
    edited to pass, change no grade."""
    out = tmp_path / "student"
    assert cli_main(["make", str(out)]) == 0
    drop_copy_files(out)
    for f, found in regions.locate(out).items():
        lines = (out / f).read_text().splitlines()
        for name, (indent, b, e) in found.items():
            assert lines[b + 1:e] == [f"{indent}{regions.stub_body(name)}"]
        compile("\n".join(lines), f, "exec")
    code, g = grading.grade(out, seed=0)
    printed = capsys.readouterr().out
    assert code == 1 and f"score: 0/{len(REGISTRY)} assignments passed" in printed and g.heldout
    for a in REGISTRY:
        assert len(g.details[a.name]) >= len(a.tests) + len(a.heldout), a.name
        for test, passed, msg in g.details[a.name]:
            assert not passed and msg == f"NotImplementedError: {a.message}", (test, msg)
        assert a.message in printed


def test_solutions_pass_every_assignment_in_a_few_seconds_of_cpu(capsys):
    """The library's own regions pass every visible and held-out grading test (every registered id really ran),
    and grading all ten takes the child process well under 20 s of CPU time (about 3 on one core)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    code, g = grading.grade(ROOT, seed=0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert code == 0, capsys.readouterr().out
    for a in REGISTRY:
        assert len(g.details[a.name]) >= len(a.tests) + len(a.heldout) and g.passed(a.name), a.name
    assert f"score: {len(REGISTRY)}/{len(REGISTRY)} assignments passed" in capsys.readouterr().out
    assert cpu < 20, f"grading the solutions took {cpu:.1f} s of CPU"


def test_grading_runs_under_a_cpu_time_limit_not_a_wall_clock_one(tmp_path):
    """The engine's limit is CPU time: a test that waits 3 s of wall-clock time under a 2-CPU-second limit passes,
    and an endless loop under a 1-CPU-second limit is stopped with a message saying so."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_t.py").write_text(
        "import time\n\ndef test_waits():\n    time.sleep(3)\n\ndef test_loops():\n    while True:\n        pass\n")
    waits = "tests/test_t.py::test_waits"
    assert run_tests(tmp_path, [waits], cpu_seconds=2) == {waits: (True, "")}
    with pytest.raises(PytestRunError, match="used up their 1 s of CPU time"):
        run_tests(tmp_path, ["tests/test_t.py::test_loops"], cpu_seconds=1)


def enclosing(lines, i, indent, kind):
    """(line index, name) of the nearest `kind` (def/class) above line i with an indent < indent."""
    for j in range(i - 1, -1, -1):
        m = re.match(rf"^(\s*){kind} (\w+)\b", lines[j])
        if m and len(m[1]) < len(indent):
            return j, m[2], m[1]
    raise AssertionError(f"no enclosing {kind}")


def test_registry_regions_sit_in_their_functions_with_the_registered_signatures():
    """Each region exists once, in the registered file, inside the registered function (Class.method),
    whose def line is the registered signature: a signature change must go through the registry."""
    found = regions.locate(ROOT)
    for a in REGISTRY:
        lines = (ROOT / a.file).read_text().splitlines()
        indent, begin, _ = found[a.file][a.name]
        j, name, def_indent = enclosing(lines, begin, indent, "def")
        assert name == a.function.split(".")[-1] and lines[j].strip() == f"def {a.signature}:", (a.name, lines[j])
        if "." in a.function:
            assert enclosing(lines, j, def_indent, "class")[1] == a.function.split(".")[0], a.name


def test_registry_docs_and_changelog_agree():
    """docs/assignments.md has one section per registered name (same set), names each visible and held-out grading
    test and each signature, and CHANGELOG.md has an entry for the current API version."""
    docs = (ROOT / "docs" / "assignments.md").read_text()
    assert sorted(re.findall(r"^## `(\w+)`", docs, re.M)) == sorted(BY_NAME)
    for a in REGISTRY:
        for node in a.tests + a.heldout:
            assert node.split("::")[1].split("[")[0] in docs, node
        assert a.signature in docs, a.signature
    assert re.search(rf"^## {re.escape(API_VERSION)}\b", (ROOT / "CHANGELOG.md").read_text(), re.M)


def test_usage_errors_are_clear_and_exit_2(tmp_path, capsys):
    """Unknown assignment, non-empty OUT_DIR, a missing or unknown marker: a message naming it, exit code 2."""
    assert cli_main(["grade", "--only=gae,nope"]) == 2
    assert "unknown assignment nope" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert cli_main(["make", str(tmp_path / "full")]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    repo = tmp_path / "repo"  # the registry's files, one END marker deleted, then one unknown region
    for f in {a.file for a in REGISTRY}:
        (repo / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / f, repo / f)
    ppo = repo / "nanorlhf" / "ppo.py"
    text = ppo.read_text()
    ppo.write_text(text.replace("    # END ASSIGNMENT gae\n", ""))
    assert cli_main(["make", str(tmp_path / "out"), f"--repo={repo}"]) == 2
    assert "ASSIGNMENT gae" in (err := capsys.readouterr().err) and "no END" in err
    ppo.write_text(text.replace("ASSIGNMENT gae\n", "ASSIGNMENT gea\n"))
    assert cli_main(["make", str(tmp_path / "out"), f"--repo={repo}"]) == 2
    assert "'gea' is not in the registry" in capsys.readouterr().err
    ppo.write_text(text.replace("    # BEGIN ASSIGNMENT gae\n", "").replace("    # END ASSIGNMENT gae\n", ""))
    assert cli_main(["make", str(tmp_path / "out"), f"--repo={repo}"]) == 2
    assert "ASSIGNMENT gae' markers" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_in_a_copy_hints_are_recorded_the_answer_key_refused_and_edited_tests_refuse_grading(tmp_path, capsys):
    """Inside a student copy: `hint` prints levels 1..N and records the level asked for; `answers` is refused (exit
    2); `grade` refuses visible grading tests edited since `make` (exit 2, naming the file) before any test runs.
    From the instructor's checkout `answers` prints the reference body and its traps."""
    out = tmp_path / "student"
    assert cli_main(["make", str(out)]) == 0
    p = in_copy(out, "hint", "gae", "--level=2")
    assert p.returncode == 0 and BY_NAME["gae"].hints[1] in p.stdout
    assert handout.hints_asked(out) == "gae:2"
    p = in_copy(out, "answers", "gae")
    assert p.returncode == 2 and "the answer key is for instructors" in p.stderr and "reversed" not in p.stdout
    (out / "tests" / "test_ppo.py").write_text("def test_nothing():\n    pass\n")
    p = in_copy(out, "grade")
    assert p.returncode == 2 and "grading tests edited since the copy was made: tests/test_ppo.py" in p.stderr
    capsys.readouterr()
    assert cli_main(["answers", "gae"]) == 0
    printed = capsys.readouterr().out
    assert solution_body("gae").strip() in printed and BY_NAME["gae"].hints[1] in printed


def test_hints_come_in_two_levels(capsys):
    """Every assignment has two distinct hints; the stub says level 1 and where level 2 is; `hint NAME --level=N`
    prints levels 1..N; a level out of range or an unknown name is a usage error (exit 2)."""
    for a in REGISTRY:
        assert len(a.hints) == 2 and len(set(a.hints)) == 2 and all(h.strip() for h in a.hints), a.name
        assert a.message.startswith(f"{a.name}: {a.hints[0]}") and f"hint {a.name} --level=2" in a.message
    assert cli_main(["hint", "gae"]) == 0
    out = capsys.readouterr().out
    assert BY_NAME["gae"].hints[0] in out and BY_NAME["gae"].hints[1] not in out
    assert cli_main(["hint", "gae", "--level=3"]) == 2 and "--level must be 1..2" in capsys.readouterr().err
    assert cli_main(["hint", "gea"]) == 2 and "unknown assignment gea" in capsys.readouterr().err


def test_grade_class_writes_one_csv_row_per_student(tmp_path, capsys):
    """`grade --class=DIR --csv=FILE`: one row per student folder (sorted), columns in the documented order, a 1/0
    column per assignment that the score sums, the failing tests, the refused regions, the hint levels asked for
    and the files edited outside their regions; correct variants pass; a folder that is not a copy gets an error."""
    klass, only = tmp_path / "class", ["attention", "gae", "policy_loss", "rm_loss"]
    for student in ("ada", "bob"):
        assert cli_main(["make", str(klass / student)]) == 0
    for f in {BY_NAME[n].file for n in only}:  # ada deleted the markers: every region refused, nothing to run
        path = klass / "ada" / f
        path.write_text(re.sub(r"^\s*# (BEGIN|END) ASSIGNMENT \w+\n", "", path.read_text(), flags=re.M))
    handout.hint("gae", 2, root=klass / "bob")
    handout.hint("policy_loss", 1, root=klass / "bob")
    for f, found in regions.locate(klass / "bob").items():
        path = klass / "bob" / f
        text = regions.splice(path.read_text(), found, {n: next(iter(RIGHT[n].values())) for n in IN_THE_CLASS
                                                         if n in found})
        path.write_text(text + ("\n# bob's notes, outside the regions\n" if f == "nanorlhf/ppo.py" else ""))
    (klass / "cy").mkdir()
    assert cli_main(["grade", f"--class={klass}", f"--csv={tmp_path / 'grades.csv'}", f"--only={','.join(only)}"]) == 0
    with open(tmp_path / "grades.csv") as f:
        header = next(csv.reader(f))
    assert header == ["student", "score", "out_of", *only, "failed_tests", "refused", "hints", "ignored_edits", "error"]
    ada, bob, cy = rows = list(csv.DictReader(open(tmp_path / "grades.csv")))
    assert [r["student"] for r in rows] == ["ada", "bob", "cy"] and {r["out_of"] for r in rows} == {"4"}
    assert [r["score"] for r in rows] == ["0", "3", "0"] and [bob[n] for n in only] == ["1", "1", "1", "0"]
    assert "test_gradient_sign" in bob["failed_tests"] and "test_gae" not in bob["failed_tests"]
    assert ada["refused"].count("has no '# BEGIN/END ASSIGNMENT") == 4 and bob["refused"] == ""
    assert (ada["hints"], bob["hints"]) == ("", "gae:2 policy_loss:1")
    assert bob["ignored_edits"] == "nanorlhf/ppo.py" and "nanorlhf/model.py" in ada["ignored_edits"]
    assert "not a copy" in cy["error"] and ada["error"] == bob["error"] == ""
    assert "bob: 3/4" in capsys.readouterr().out
