"""One pytest process over chosen test ids, its results read from its JUnit XML: the grader's engine.

    results = run_tests(repo, ["tests/test_ppo.py::test_policy_loss_clips"], timeout=300)
    results["tests/test_ppo.py::test_policy_loss_clips"]   # (passed, first error line)
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path


class PytestRunError(Exception):
    """The test run gave no results (a timeout, or pytest wrote no report)."""


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


def run_tests(repo: Path, node_ids: list[str], timeout: float) -> dict[str, tuple[bool, str]]:
    """{"file::test[params]": (passed, first error line)}, plus {file: (False, import error)} per broken file."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "results.xml"
        (Path(tmp) / "nanorlhf_grade_select.py").write_text(_SELECT_PLUGIN)
        files = list(dict.fromkeys(n.split("::")[0] for n in node_ids))
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "nanorlhf_grade_select",
               "--continue-on-collection-errors", "-o", "junit_family=xunit2", f"--junitxml={xml}", *files]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), tmp]),  # the repo's own nanorlhf
               "NANORLHF_GRADE_NODES": " ".join(node_ids)}
        try:
            proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise PytestRunError(f"the grading tests did not finish in {timeout:.0f} s (an endless loop?); "
                                  "grade one at a time with --only=NAME") from None
        if not xml.exists():
            raise PytestRunError(f"pytest wrote no results (exit {proc.returncode}):\n{proc.stdout[-3000:]}")
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
