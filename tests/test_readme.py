"""README.md is the front door: short, its smoke run runs as written in a fresh copy, its test command is the one CI
runs, and every command, flag and link it (and the docs it sends readers to) names exists."""
import os
import re

from doccheck import ROOT, check_commands, code_blocks, fast_blocks, read_doc, run_fast_blocks

LINKED_DOCS = ("README.md", os.path.join("docs", "guide.md"), os.path.join("docs", "results.md"))


def test_readme_is_short_and_has_the_two_commands():
    """At most 150 lines; the main job and the test command are there, the latter exactly as .ci/run runs it."""
    text = read_doc("README.md")
    assert len(text.splitlines()) <= 150
    bodies = [body.strip() for info, body in code_blocks(text) if info == "bash"]
    assert any(b.endswith("python pipeline.py --preset=small") for b in bodies)
    ci = read_doc(os.path.join(".ci", "run"))
    test_command = next(b for b in bodies if b.endswith("python -m pytest -q"))
    assert test_command in ci


def test_smoke_run_runs_as_written_in_a_fresh_copy(tmp_path):
    """The README's `# fast` block (the tiny pipeline) exits 0 in a fresh copy and writes the report and findings."""
    blocks = fast_blocks(read_doc("README.md"))
    assert blocks and "pipeline.py --preset=tiny" in blocks[0]
    repo = str(tmp_path / "repo")
    run_fast_blocks(blocks, repo)
    for name in ("report.md", "findings.json"):
        assert os.path.exists(os.path.join(repo, "out", "tiny", name)), name


def test_every_command_names_a_real_script_and_real_flags():
    """Each `python ...` command of the README and the docs it links for running the code parses with its script's
    Config (a slow command cannot carry a stale flag)."""
    checked = set()
    for doc in LINKED_DOCS:
        checked |= set(check_commands(read_doc(doc)))
    assert {"pipeline", "sample", "train_rm", "train_ppo", "evaluate", "label", "nanorlhf.interop.export",
            "nanorlhf.interop.pairs"} <= checked


def test_every_relative_link_exists():
    """Links and images of the README and the docs it links resolve to files of the repository."""
    missing = []
    for doc in LINKED_DOCS:
        base = os.path.dirname(os.path.join(ROOT, doc))
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", read_doc(doc)):
            if "://" not in target and not os.path.exists(os.path.join(base, target)):
                missing.append(f"{doc}: {target}")
    assert missing == []
