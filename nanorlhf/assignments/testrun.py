"""One pytest process over chosen test ids of a graded tree, its results read from its JUnit XML: the grader's engine.

    results = run_tests(tree, ["tests/test_ppo.py::test_policy_loss_clips"], cpu_seconds=120, seed=7)
    results["tests/test_ppo.py::test_policy_loss_clips"]   # (passed, first error line)

The child runs in the tree (its working directory), with a scrubbed environment (no PYTHONPATH, no
PYTEST_ADDOPTS, no plugins autoloaded, one thread), Python's -E -s flags, the grader's own pytest.ini
and no conftest.py, and a CPU-time limit (RLIMIT_CPU), not a wall-clock one: a loaded machine slows a
run down without failing it. A wall-clock backstop of WALL_FACTOR times the CPU limit stops a run that
waits on nothing.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

try:
    import resource
except ImportError:  # not POSIX: the CPU limit becomes the wall-clock one
    resource = None

WALL_FACTOR = 10


class PytestRunError(Exception):
    """The test run gave no results (out of CPU time, or pytest wrote no report)."""


def _first_line(s: str | None) -> str:
    return next((ln.strip() for ln in (s or "").splitlines() if ln.strip()), "")


# With named node ids pytest stops everything when one of their files fails to import;
# so it is given the files, and this plugin keeps only the grading tests.
_SELECT_PLUGIN = """
import os
NODES = os.environ["NANORLHF_GRADE_NODES"].split()

def pytest_collection_modifyitems(config, items):
    keep = [i for i in items if any(i.nodeid == n or ("[" not in n and i.nodeid.startswith(n + "[")) for n in NODES)]
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep
"""
_INI = "[pytest]\npythonpath = .\naddopts =\n"


def _cpu_limit(seconds: float):
    def limit():
        resource.setrlimit(resource.RLIMIT_CPU, (int(seconds), int(seconds) + 2))
    return limit if resource else None


def _read(xml: Path) -> dict[str, tuple[bool, str]]:
    results = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        bad = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        msg = "" if bad is None else ("skipped: " if bad.tag == "skipped" else "") + _first_line(bad.get("message"))
        if not case.get("classname"):  # a test file that failed to import: keep its error line
            errors = [ln[1:].strip() for ln in (bad.text or "").splitlines() if ln.startswith("E ")]
            results[case.get("name").replace(".", "/") + ".py"] = (False, errors[-1] if errors else msg)
            continue
        key = case.get("classname").replace(".", "/") + ".py::" + case.get("name")
        ok, old_msg = results.get(key, (True, ""))  # a test may appear twice (call, then teardown)
        results[key] = (ok and bad is None, old_msg or msg)
    return results


def run_tests(tree: Path, node_ids: list[str], cpu_seconds: float, seed: int = 0) -> dict[str, tuple[bool, str]]:
    """{"file::test[params]": (passed, first error line)}, plus {file: (False, import error)} per broken file."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "results.xml"
        (tree / "_grade_select.py").write_text(_SELECT_PLUGIN)
        (tree / "pytest.ini").write_text(_INI)
        files = list(dict.fromkeys(n.split("::")[0] for n in node_ids))
        cmd = [sys.executable, "-E", "-s", "-m", "pytest", "-q", "-c", str(tree / "pytest.ini"), "--rootdir", str(tree),
               "-p", "no:cacheprovider", "-p", "_grade_select", "--continue-on-collection-errors",
               "-o", "junit_family=xunit2", f"--junitxml={xml}", f"--basetemp={tmp}/pytest", *files]
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8",
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
               "NANORLHF_GRADE_NODES": " ".join(node_ids), "NANORLHF_GRADE_SEED": str(seed)}
        wall = cpu_seconds * (WALL_FACTOR if resource else 1)
        try:
            proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=wall,
                                  preexec_fn=_cpu_limit(cpu_seconds))
        except subprocess.TimeoutExpired:
            raise PytestRunError(f"the grading tests did not finish in {wall:.0f} s of wall-clock time, the backstop "
                                 "(waiting on something?); grade one at a time with --only=NAME") from None
        if resource and proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
            raise PytestRunError(f"the grading tests used up their {cpu_seconds:.0f} s of CPU time (an endless "
                                 "loop?); grade one at a time with --only=NAME") from None
        if not xml.exists():
            raise PytestRunError(f"pytest wrote no results (exit {proc.returncode}):\n{proc.stdout[-3000:]}")
        return _read(xml)
