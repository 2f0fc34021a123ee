"""Every `python -m` entry point and script answers --help with its flags, and does nothing else."""
import os
import re
import runpy
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def entry_points() -> list[str]:
    """Dotted names of the modules that run as a program: every file outside tests/ with a `__main__` guard."""
    names = []
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x not in ("tests", "out", "data", "docs",
                                                                         "__pycache__")]
        for f in files:
            path = os.path.join(d, f)
            text = open(path, encoding="utf-8").read() if f.endswith(".py") else ""
            if re.search(r'^if __name__ == "__main__":', text, re.M):
                name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                names.append(name.removesuffix(".__main__"))
    return sorted(names)


def test_the_entry_points_are_found():
    """The discovery sees the stage scripts, the package's commands and the experiments (so the next test is real)."""
    found = entry_points()
    assert {"pipeline", "sample", "nanorlhf.tokenizer", "nanorlhf.labelapp.browser", "nanorlhf.interop.export",
            "nanorlhf.world", "nanorlhf.assignments", "experiments.ablate"} <= set(found)


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")  # runpy re-runs imported modules
@pytest.mark.parametrize("name", entry_points())
def test_help_prints_the_purpose_and_does_nothing_else(name, tmp_path, monkeypatch, capsys):
    """`python -m NAME --help` (or `python NAME.py --help`) exits 0, prints its flags, and writes no file (run from
    an empty folder, which stays empty; docs/ is unchanged)."""
    docs = sorted(os.listdir(os.path.join(ROOT, "docs")))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [name, "--help"])
    with pytest.raises(SystemExit) as e:
        runpy.run_module(name, run_name="__main__", alter_sys=True)
    out = capsys.readouterr().out
    assert e.value.code in (0, None), out
    assert out.strip() and "--" in out, name
    assert os.listdir(tmp_path) == [] and sorted(os.listdir(os.path.join(ROOT, "docs"))) == docs
