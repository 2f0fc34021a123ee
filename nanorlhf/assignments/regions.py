"""Assignment regions: find them in a file, read their bodies, put other bodies (or stubs) in their place.

A region is the lines between `# BEGIN ASSIGNMENT <name>` and `# END ASSIGNMENT <name>`, both at the
indent of the code they wrap. `make` stubs every region of the handout (stub); `grade` reads each
region's body from a student's file (bodies) and splices it into a fresh stubbed tree (splice).
"""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

from nanorlhf.assignments.registry import BY_NAME, REGISTRY, AssignmentError

MARKER = re.compile(r"^(?P<indent>[ \t]*)# (?P<kind>BEGIN|END) ASSIGNMENT (?P<name>\w+)[ \t]*$")
Regions = dict[str, tuple[str, int, int]]  # {name: (indent, begin_line, end_line)}, 0-based marker lines


def find_regions(text: str, where: str) -> Regions:
    """One file's regions; a marker without its pair, or a repeated name, raises AssignmentError."""
    regions, open_ = {}, None
    for i, line in enumerate(text.splitlines()):
        m = MARKER.match(line)
        if not m:
            continue
        kind, name, indent = m["kind"], m["name"], m["indent"]
        if kind == "BEGIN":
            if open_ or name in regions:
                why = f"ASSIGNMENT {open_[0]} (line {open_[2] + 1}) has no END before it" if open_ else "repeated"
                raise AssignmentError(f"{where}:{i + 1}: BEGIN ASSIGNMENT {name}: {why}")
            open_ = (name, indent, i)
        elif not open_ or (open_[0], open_[1]) != (name, indent):
            raise AssignmentError(f"{where}:{i + 1}: END ASSIGNMENT {name} has no BEGIN at the same indent")
        else:
            regions[name], open_ = (indent, open_[2], i), None
    if open_:
        raise AssignmentError(f"{where}:{open_[2] + 1}: BEGIN ASSIGNMENT {open_[0]} has no END")
    return regions


def locate(repo: Path, files: list[str] | None = None) -> dict[str, Regions]:
    """{file: its regions} over `files` (default: the registry's files); every assignment found in its file."""
    files = sorted(set(files if files is not None else [a.file for a in REGISTRY]))
    found = {}
    for f in files:
        path = repo / f
        if f.endswith(".py") and path.is_file():
            regions = find_regions(path.read_text(encoding="utf-8"), f)
            for name in regions:
                if name not in BY_NAME or BY_NAME[name].file != f:
                    raise AssignmentError(f"{f}: region {name!r} is not in the registry for this file")
            if regions:
                found[f] = regions
    for a in REGISTRY:
        if a.name not in found.get(a.file, {}):
            raise AssignmentError(f"{a.file}: no '# BEGIN/END ASSIGNMENT {a.name}' markers (assignment {a.name})")
    return found


def bodies(text: str, regions: Regions) -> dict[str, str]:
    """{name: the dedented source between the region's markers}."""
    lines = text.splitlines()
    return {name: textwrap.dedent("\n".join(lines[b + 1:e])) for name, (_, b, e) in regions.items()}


def splice(text: str, regions: Regions, new: dict[str, str]) -> str:
    """The text with the lines between each named region's markers replaced by its body (dedented source,
    indented here to the markers' indent); regions not in `new` are left as they are."""
    lines = text.splitlines(keepends=True)
    for name, (indent, b, e) in sorted(regions.items(), key=lambda kv: -kv[1][1]):  # bottom up
        if name in new:
            body = textwrap.dedent(new[name]).strip("\n").splitlines()
            lines[b + 1:e] = [f"{indent}{ln}\n" if ln.strip() else "\n" for ln in body]
    return "".join(lines)


def stub_body(name: str) -> str:
    """The one line a handout's region holds: a raise with the level-1 hint."""
    return f"raise NotImplementedError({BY_NAME[name].message!r})"


def stub(text: str, regions: Regions) -> str:
    """The text with each region's lines between its markers replaced by one raise at the marker's indent."""
    return splice(text, regions, {name: stub_body(name) for name in regions})
