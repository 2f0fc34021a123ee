"""The grader rejects wrong-but-plausible solutions (tests/wrong_solutions/) and passes the right ones.

Round r puts every assignment's r-th wrong solution into one copy of the solutions and grades the
copy with the real grader: one pytest process a round, as many rounds as the longest list (seven).
"""
import shutil
import subprocess

import pytest

from nanorlhf.assignments import registry as A
from nanorlhf.assignments import grading
from wrong_solutions import WRONG

IN_STUDENT_COPY = (A.ROOT / A.STUDENT_STAMP).exists()
ROUNDS = max(len(bugs) for bugs in WRONG.values())


def test_every_assignment_has_its_wrong_solutions():
    """Each registered assignment has at least four wrong solutions, each a body that compiles inside a function."""
    assert sorted(WRONG) == sorted(A.BY_NAME)
    for name, bugs in WRONG.items():
        assert len(bugs) >= 4, name
        for bug, body in bugs.items():
            compile("def f():\n" + A.splice("# BEGIN ASSIGNMENT x\n# END ASSIGNMENT x\n",
                                            {"x": ("    ", 0, 1)}, {"x": body}), f"{name}/{bug}", "exec")


def solutions_with(tree, bodies):
    """A copy of the repository's tracked files with the given regions' bodies replaced."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=A.ROOT, capture_output=True, check=True).stdout.decode()
    for f in filter(None, files.split("\0")):
        if (A.ROOT / f).is_file():
            (tree / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(A.ROOT / f, tree / f)
    for f, regions in A.locate(tree).items():
        text = (tree / f).read_text(encoding="utf-8")
        (tree / f).write_text(A.splice(text, regions, {n: bodies[n] for n in regions if n in bodies}))
    return tree


@pytest.mark.skipif(IN_STUDENT_COPY, reason="a student copy holds stubs, not solutions")
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_grader_fails_each_wrong_solution(tmp_path, round_, capsys):
    """Each wrong solution fails its assignment's grading; an assignment with fewer wrong solutions keeps the
    right one in the later rounds and must pass there, beside the others' bugs (its tests do not lean on them)."""
    bugs = {name: list(b.items())[round_] for name, b in WRONG.items() if round_ < len(b)}
    tree = solutions_with(tmp_path / "tree", {name: body for name, (_, body) in bugs.items()})
    _, details = grading.grade(tree)
    printed = capsys.readouterr().out
    for a in A.REGISTRY:
        passed = all(ok for _, ok, _ in details[a.name])
        if a.name in bugs:
            assert not passed, f"{a.name}: the wrong solution {bugs[a.name][0]!r} passes grading\n{printed}"
        else:
            assert passed, f"{a.name}: the right solution fails beside the other assignments' bugs\n{printed}"
