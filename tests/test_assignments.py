"""The course assignments: the student copy, the grader, the registry and its docs (nanorlhf/assignments/registry.py).

Two pytest subprocesses in all (one grading run of the student copy, one of the solutions).
"""
import re
import shutil

import pytest

from nanorlhf.assignments import registry as A
from nanorlhf.assignments import grading
from nanorlhf.assignments.__main__ import main as cli_main

IN_STUDENT_COPY = (A.ROOT / A.STUDENT_STAMP).exists()
needs_solutions = pytest.mark.skipif(IN_STUDENT_COPY, reason="a student copy holds stubs, not solutions")


@needs_solutions
def test_student_copy_fails_every_assignment_with_its_own_hint(tmp_path, capsys):
    """In the student copy every grading test fails with ITS assignment's NotImplementedError hint
    (no import error, no other assignment's stub in the way), and each region is exactly one stub line; a grading
    test the student edited to pass is replaced by the grader's own (and said so), so it still fails."""
    out = tmp_path / "student"
    assert cli_main(["make", str(out)]) == 0
    edited = out / "tests" / "test_ppo.py"
    edited.write_text(re.sub(r"(def test_policy_loss_clips\(.*?\):\n)", r"\1    return\n", edited.read_text()))
    for f, regions in A.locate(out).items():
        lines = (out / f).read_text().splitlines()
        for name, (indent, b, e) in regions.items():
            assert lines[b + 1:e] == [f"{indent}raise NotImplementedError({A.BY_NAME[name].message!r})"]
        compile("\n".join(lines), f, "exec")
    code, details = grading.grade(out)
    printed = capsys.readouterr().out
    assert code == 1 and f"score: 0/{len(A.REGISTRY)} assignments passed" in printed
    assert "replaced 1 edited or missing student files: tests/test_ppo.py" in printed
    for a in A.REGISTRY:
        assert details[a.name], a.name
        for test, passed, msg in details[a.name]:
            assert not passed and msg == f"NotImplementedError: {a.message}", (test, msg)
        assert a.message in printed


@needs_solutions
def test_solution_repo_passes_every_assignment(capsys):
    """The library's own regions pass every grading test, and every registered test id really ran."""
    code, details = grading.grade(A.ROOT)
    assert code == 0, capsys.readouterr().out
    for a in A.REGISTRY:
        assert len(details[a.name]) >= len(a.tests) and all(passed for _, passed, _ in details[a.name]), a.name
    assert f"score: {len(A.REGISTRY)}/{len(A.REGISTRY)} assignments passed" in capsys.readouterr().out


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
    found = A.locate(A.ROOT)
    for a in A.REGISTRY:
        lines = (A.ROOT / a.file).read_text().splitlines()
        indent, begin, _ = found[a.file][a.name]
        j, name, def_indent = enclosing(lines, begin, indent, "def")
        assert name == a.function.split(".")[-1] and lines[j].strip() == f"def {a.signature}:", (a.name, lines[j])
        if "." in a.function:
            assert enclosing(lines, j, def_indent, "class")[1] == a.function.split(".")[0], a.name


def test_registry_docs_and_changelog_agree():
    """docs/assignments.md has one section per registered name (same set), names each grading test,
    and CHANGELOG.md has an entry for the current API version."""
    docs = (A.ROOT / "docs" / "assignments.md").read_text()
    assert sorted(re.findall(r"^## `(\w+)`", docs, re.M)) == sorted(A.BY_NAME)
    for a in A.REGISTRY:
        for node in a.tests:
            assert node.split("::")[1].split("[")[0] in docs, node
        assert a.signature in docs, a.signature
    assert re.search(rf"^## {re.escape(A.API_VERSION)}\b", (A.ROOT / "CHANGELOG.md").read_text(), re.M)


def test_usage_errors_are_clear_and_exit_2(tmp_path, capsys):
    """Unknown assignment, non-empty OUT_DIR, a missing or unknown marker: a message naming it, exit code 2."""
    assert cli_main(["grade", "--only=gae,nope"]) == 2
    assert "unknown assignment nope" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert cli_main(["make", str(tmp_path / "full")]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    repo = tmp_path / "repo"  # the registry's files, one END marker deleted, then one unknown region
    for f in {a.file for a in A.REGISTRY}:
        (repo / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(A.ROOT / f, repo / f)
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


@needs_solutions
def test_grading_in_the_copy_refuses_edited_tests(tmp_path):
    """Graded inside the student copy, a grading test that no longer hashes as `make` wrote it refuses grading
    (exit 2, naming the file) before any test runs."""
    import os
    import subprocess
    import sys
    out = tmp_path / "student"
    assert cli_main(["make", str(out)]) == 0
    (out / "tests" / "test_ppo.py").write_text("def test_nothing():\n    pass\n")
    env = dict(os.environ, PYTHONPATH=str(out))
    p = subprocess.run([sys.executable, "-m", "nanorlhf.assignments", "grade"], cwd=out, capture_output=True,
                       text=True, timeout=120, env=env)
    assert p.returncode == 2 and "grading tests edited since the copy was made" in p.stderr, p.stderr


def test_hints_come_in_three_levels(capsys):
    """Every assignment has three distinct hints; the stub says level 1 and where level 2 is; `hint NAME --level=N`
    prints levels 1..N and no more; a level out of range or an unknown name is a usage error (exit 2)."""
    for a in A.REGISTRY:
        assert len(a.hints) == 3 and len(set(a.hints)) == 3 and all(h.strip() for h in a.hints), a.name
        assert a.message.startswith(f"{a.name}: {a.hints[0]}") and f"hint {a.name} --level=2" in a.message
    assert cli_main(["hint", "gae", "--level=2"]) == 0
    out = capsys.readouterr().out
    gae = A.BY_NAME["gae"]
    assert gae.hints[0] in out and gae.hints[1] in out and gae.hints[2] not in out
    assert cli_main(["hint", "gae", "--level=4"]) == 2 and "--level must be 1..3" in capsys.readouterr().err
    assert cli_main(["hint", "gea"]) == 2 and "unknown assignment gea" in capsys.readouterr().err


def solution_body(name):
    """The library's own code between an assignment's markers."""
    a = A.BY_NAME[name]
    lines = (A.ROOT / a.file).read_text().splitlines()
    indent, b, e = A.locate(A.ROOT)[a.file][name]
    return "\n".join(ln[len(indent):] for ln in lines[b + 1:e])


@needs_solutions
def test_grade_class_writes_one_csv_row_per_student(tmp_path, capsys):
    """`grade --class=DIR --csv=FILE`: one row per student folder (sorted), a 1/0 column per assignment that the
    score sums, the failing tests named; a folder that is not a copy gets an error, not a crash."""
    import csv
    klass = tmp_path / "class"
    assert cli_main(["make", str(klass / "ada")]) == 0
    assert cli_main(["make", str(klass / "bob")]) == 0
    ppo = klass / "bob" / "nanorlhf" / "ppo.py"
    ppo.write_text(A.splice(ppo.read_text(), A.locate(klass / "bob")["nanorlhf/ppo.py"],
                            {"policy_loss": solution_body("policy_loss"), "gae": solution_body("gae")}))
    (klass / "cy").mkdir()
    code = cli_main(["grade", f"--class={klass}", f"--csv={tmp_path / 'grades.csv'}", "--only=gae,policy_loss,rm_loss"])
    assert code == 0, capsys.readouterr().err
    rows = list(csv.DictReader(open(tmp_path / "grades.csv")))
    assert [r["student"] for r in rows] == ["ada", "bob", "cy"]
    assert [r["score"] for r in rows] == ["0", "2", "0"] and {r["out_of"] for r in rows} == {"3"}
    assert (rows[1]["gae"], rows[1]["policy_loss"], rows[1]["rm_loss"]) == ("1", "1", "0")
    assert "test_gradient_sign" in rows[1]["failed_tests"] and "test_gae" not in rows[1]["failed_tests"]
    assert "not a copy" in rows[2]["error"] and rows[0]["error"] == rows[1]["error"] == ""
    assert "bob: 2/3" in capsys.readouterr().out
