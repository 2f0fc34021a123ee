"""The grader rejects every wrong solution and cheat and accepts every correct variant (tests/instructor/
wrong_solutions/), grading copies of the handout with the real grader.

Round r is one copy: in each region, that assignment's r-th wrong solution or cheat; once its list runs out,
its correct variants in turn. Every round's copy also holds the files that try to turn failures into passes
(conftest.py, pytest.ini, pyproject.toml, a plugin, sitecustomize.py) and an edited visible test. One grading
a round, as many rounds as the longest list; the variants of the assignments whose lists fill every round are
graded in test_assignments.py's class (IN_THE_CLASS).
"""
import re
import textwrap

import pytest

from nanorlhf.assignments import grading, handout, regions
from nanorlhf.assignments.registry import BY_NAME, REGISTRY
from nanorlhf.assignments.vetting import vet
from wrong_solutions import CHEATS, IN_THE_CLASS, RIGHT, WRONG, Cheat, drop_copy_files


def rejected(name: str) -> list[tuple[str, Cheat]]:
    """An assignment's wrong solutions (graded, must fail) then its cheats."""
    return [(label, Cheat(body, None)) for label, body in WRONG[name].items()] + list(CHEATS.get(name, {}).items())


ROUNDS = max(len(rejected(a.name)) for a in REGISTRY)


def planned(name: str, round_: int) -> tuple[bool, str, Cheat]:
    """(must pass, label, body) of one assignment in one round."""
    bad = rejected(name)
    if round_ < len(bad):
        return False, *bad[round_]
    variants = list(RIGHT[name].items())
    label, body = variants[(round_ - len(bad)) % len(variants)]
    return True, label, Cheat(body, None)


def copy_with(tmp_path, plan: dict[str, Cheat], capsys):
    """The handout with the planned bodies in its regions, their `outside` code after each file's imports, and the
    files of cheats.COPY_FILES."""
    copy = tmp_path / "copy"
    handout.make(copy)
    capsys.readouterr()
    for f, found in regions.locate(copy).items():
        text = regions.splice((copy / f).read_text(), found, {n: plan[n].body for n in found})
        outside = "".join(plan[n].outside for n in found)
        if outside:
            first_def = re.search(r"^(class|def|@)", text, re.M).start()
            text = text[:first_def] + outside + "\n\n" + text[first_def:]
        (copy / f).write_text(text)
    drop_copy_files(copy)
    return copy


def test_every_assignment_has_its_fixtures():
    """Each registered assignment has at least four wrong solutions and a correct variant, each a body that compiles
    inside a function; every cheat names a registered assignment, and each one meant to be refused is refused by
    the screen on its own, naming what it reached for, while every correct variant passes the screen."""
    assert sorted(WRONG) == sorted(RIGHT) == sorted(BY_NAME) and set(CHEATS) <= set(BY_NAME)
    assert {n for n in BY_NAME if len(rejected(n)) >= ROUNDS} <= set(IN_THE_CLASS)  # every variant graded somewhere
    bodies = [(n, b) for n in BY_NAME for b in [*WRONG[n].values(), *RIGHT[n].values()]]
    bodies += [(n, c.body) for n, cheats in CHEATS.items() for c in cheats.values()]
    for name, body in bodies:
        assert len(WRONG[name]) >= 4 and RIGHT[name], name
        compile("def f():\n" + regions.splice("# BEGIN ASSIGNMENT x\n# END ASSIGNMENT x\n", {"x": ("    ", 0, 1)},
                                              {"x": body}), name, "exec")
    course = {}
    for a in REGISTRY:
        text = (grading.ROOT / a.file).read_text()
        course[a.file] = regions.stub(text, regions.find_regions(text, a.file))
    screened = [(n, label, c) for n, cheats in CHEATS.items() for label, c in cheats.items()]
    screened += [(n, label, Cheat(body, None)) for n in RIGHT for label, body in RIGHT[n].items()]
    for name, label, c in screened:
        a = BY_NAME[name]
        begin = regions.find_regions(course[a.file], a.file)[name][1]
        why = vet(textwrap.dedent(c.body), course[a.file], begin, a.file)
        assert (why is None) if c.refused is None else (c.refused in (why or "")), (name, label, why)


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_grader_rejects_each_wrong_solution_and_cheat_and_accepts_each_variant(tmp_path, round_, capsys):
    """Each wrong solution and cheat fails its assignment (a refused cheat with a message naming what it reached
    for); each correct variant passes every visible and held-out test beside the others' bugs; the files dropped
    into the copy to pass everything, and the edited visible test, change nothing."""
    plan = {a.name: planned(a.name, round_) for a in REGISTRY}
    copy = copy_with(tmp_path, {n: c for n, (_, _, c) in plan.items()}, capsys)
    _, g = grading.grade(copy, seed=round_)
    printed = capsys.readouterr().out
    for a in REGISTRY:
        must_pass, label, cheat = plan[a.name]
        if must_pass:
            assert g.passed(a.name), f"{a.name}: the correct variant {label!r} fails\n{printed}"
            assert len(g.details[a.name]) >= len(a.tests) + len(a.heldout), (a.name, g.details[a.name])
        else:
            assert not g.passed(a.name), f"{a.name}: {label!r} passes grading\n{printed}"
            if cheat.refused:
                assert cheat.refused in g.refused.get(a.name, ""), (a.name, label, g.refused)
    assert g.heldout, "the held-out tests did not run"
    outside = sorted({BY_NAME[n].file for n, (_, _, c) in plan.items() if c.outside})
    assert g.ignored == outside, (g.ignored, outside)  # listed, not graded
