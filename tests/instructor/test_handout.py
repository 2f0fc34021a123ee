"""The handout reveals no reference body: it is exactly the fully stubbed tree (the git-tracked files, the
instructor's side left out, every region one raise), and no file in it holds a reference body or a near copy
of one (all its lines but one, close together), as a wrong-solution fixture one line away from the answer or
a pseudocode hint would.
"""
import subprocess

from nanorlhf.assignments import handout, regions
from nanorlhf.assignments.registry import HELDOUT, REGISTRY, ROOT
from wrong_solutions import WRONG


def stubbed_tree() -> dict[str, bytes]:
    """{path: bytes} of the fully stubbed tree, built here from git and the markers."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    tree = {}
    for f in sorted(set(filter(None, listed.split("\0"))) | {"docs/assignments.md"}):
        if f.startswith(HELDOUT + "/") or not (ROOT / f).is_file():
            continue
        data = (ROOT / f).read_bytes()
        if f.endswith(".py") and b"# BEGIN ASSIGNMENT" in data:
            text = data.decode()
            data = regions.stub(text, regions.find_regions(text, f)).encode()
        tree[f] = data
    return tree


def made(tmp_path) -> dict[str, bytes]:
    out = tmp_path / "handout"
    handout.make(out)
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def normalised(text: str) -> list[str]:
    """Significant code of a text, one statement a line: comments, blanks, spaces and quotes dropped, `;` split."""
    out = []
    for line in text.splitlines():
        code = line.split("#")[0].replace('"', "").replace("'", "")
        out += [s for s in ("".join(part.split()) for part in code.split(";")) if s]
    return out


def near_copies(text: str, body: str) -> list[int]:
    """Line numbers (normalised) where n - 1 of the body's n lines sit within n + 2 consecutive lines of text."""
    want = set(normalised(body))
    lines = normalised(text)
    width, need = len(want) + 2, len(want) - 1
    return [i for i in range(max(1, len(lines) - width + 1)) if len(want & set(lines[i:i + width])) >= need]


def reference_bodies() -> dict[str, str]:
    return {a.name: regions.bodies((ROOT / a.file).read_text(), regions.locate(ROOT)[a.file])[a.name] for a in REGISTRY}


def test_the_handout_is_the_fully_stubbed_tree(tmp_path):
    """make writes exactly the fully stubbed tree plus its stamp: no file of the instructor's side (the held-out
    tests, the wrong solutions), every other file byte for byte, every region one raise."""
    got, want = made(tmp_path), stubbed_tree()
    assert got.pop(handout.STUDENT_STAMP)
    assert sorted(got) == sorted(want)
    assert [f for f in got if got[f] != want[f]] == []
    assert not [f for f in got if f.startswith(HELDOUT)] and any(f.startswith(HELDOUT) for f in handout.INSTRUCTOR_ONLY)


def test_no_file_of_the_handout_holds_a_reference_body_or_one_line_away(tmp_path):
    """No text file of the handout holds any assignment's reference body, nor all its lines but one close
    together, nor its lines joined on one line; the check itself flags, for every assignment, its body with one
    line changed and its body written as one line of pseudocode, and not another assignment's code."""
    files = made(tmp_path)
    references = reference_bodies()
    for name, body in references.items():
        assert len(normalised(body)) >= 4, name  # enough lines for "all but one" to mean something
        hits = [f for f, data in files.items() if f.endswith((".py", ".md")) and near_copies(data.decode(), body)]
        assert hits == [], f"{name}: a near copy of the reference body in {hits}"
        lines = body.strip().splitlines()
        one_line_away = "\n".join(lines[:-1] + ["return None  # the one line a fixture changes"])
        assert near_copies("x = 1\n" + one_line_away + "\ny = 2\n", body), name
        one_line = "; ".join(line.split("#")[0].strip() for line in lines if line.split("#")[0].strip())
        assert near_copies(f'HINT = "{one_line}"', body), name
    assert not near_copies(WRONG["gae"]["no_mask"], references["attention"])
