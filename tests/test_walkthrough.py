"""docs/walkthrough.md is tried as a new user would try it.

Convention (also stated at the top of the walkthrough): a fenced code block whose info string is
`bash` and whose first line is exactly `# fast` is a *fast* block. It runs in seconds on the tiny
world, from the repository root, and may use what earlier fast blocks wrote. Other blocks are slow
(the small world) or interactive (the labeling page); they are not run, but their `python ...`
commands must still name a script or module that exists and flags its Config accepts.

The fast blocks run in order, each as one `bash -euo pipefail` script, in a copy of the working tree
(tracked files plus untracked ones git does not ignore) in a temporary folder, so the user's out/ and
data/ are never touched. `python` is the interpreter running pytest; OMP_NUM_THREADS defaults to 1.
About 30 s on 2 CPU cores (most of it six stage scripts starting torch); far longer when the cores are busy.
"""
import dataclasses
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from nanorlhf.config import parse_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "walkthrough.md")
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
FILE_EXT = (".py", ".md", ".jsonl", ".json", ".pt", ".png", ".tiktoken", ".txt", ".toml")
MADE_BY_RUNNING = ("out", "data", "labels")  # folders the commands create; absent from a fresh clone


def doc_text() -> str:
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced code block, in order."""
    return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(text)]


def fast_blocks(text: str) -> list[str]:
    return [body for info, body in code_blocks(text)
            if info == "bash" and body.splitlines() and body.splitlines()[0].strip() == "# fast"]


def prose(text: str) -> str:
    """The walkthrough without its code blocks."""
    return FENCE.sub("", text)


def fresh_copy(dst: str) -> None:
    """The files a clone would have, plus untracked work not ignored by git; never out/, data/<scale>/, .venv."""
    try:
        listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                                capture_output=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: copy all but outputs and caches
        skip = shutil.ignore_patterns(".git", ".venv", "out", "labels", "__pycache__", ".pytest_cache")
        shutil.copytree(ROOT, dst, ignore=skip, dirs_exist_ok=True)
        shutil.rmtree(os.path.join(dst, "data"), ignore_errors=True)
        return
    for rel in filter(None, listed):
        src = os.path.join(ROOT, rel)
        if os.path.isfile(src):  # a tracked file deleted in the working tree is skipped
            os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(dst, rel))


def test_fast_blocks_run_as_written_in_a_fresh_copy(tmp_path):
    """Every `# fast` block of the walkthrough exits 0, run in order as written in a fresh copy of the repo,
    and together they run the world, every stage script and evaluate.py (so the marker is not lost silently)."""
    blocks = fast_blocks(doc_text())
    joined = "\n".join(blocks)
    for needed in ("nanorlhf.world", "pretrain.py", "train_sft.py", "train_rm.py", "train_ppo.py", "evaluate.py"):
        assert needed in joined, f"no fast block runs {needed}"
    repo = str(tmp_path / "repo")
    fresh_copy(repo)
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    env.setdefault("OMP_NUM_THREADS", "1")  # tiny models gain nothing from threads; a shared CPU loses a lot
    for i, block in enumerate(blocks, 1):
        res = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=repo, env=env, capture_output=True,
                             text=True, timeout=600)
        assert res.returncode == 0, (f"fast block {i} of {len(blocks)} exited {res.returncode}:\n{block}\n"
                                     f"--- output (end) ---\n{(res.stdout + res.stderr)[-4000:]}")
    assert os.path.exists(os.path.join(repo, "out", "tiny", "ppo_ptx", "ckpt.pt"))  # written in the copy


def resolve(dotted: str):
    """Import the longest importable prefix of a dotted name, then getattr the rest; raise if anything is missing."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_named_file_and_function_exists():
    """Each `path` in the walkthrough's prose exists in the repository (outputs under out/, data/, labels/
    excepted), and each `module.function` (nanorlhf.*, experiments.* or a top-level script) imports and resolves."""
    scripts = {f[:-3] for f in os.listdir(ROOT) if f.endswith(".py")}
    spans = set(re.findall(r"`([^`\n]+)`", prose(doc_text())))
    files, names, missing = [], [], []
    for s in sorted(spans):
        if re.fullmatch(r"[\w.-]+(/[\w.-]+)*/?", s) and (s.endswith(".py") or "/" in s and s.endswith(FILE_EXT + ("/",))):
            files.append(s)  # `objective/kl` is a metric name, not a path: no extension, no trailing slash
            continue
        if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", s) and not s.endswith(FILE_EXT):
            if s.split(".")[0] in scripts | {"nanorlhf", "experiments"}:
                names.append(s)
    for f in files:
        if not os.path.exists(os.path.join(ROOT, f)) and f.split("/")[0] not in MADE_BY_RUNNING:
            missing.append(f"file {f}")
    for n in names:
        try:
            resolve(n)
        except (ImportError, AttributeError) as e:
            missing.append(f"name {n} ({e})")
    assert len(files) >= 20 and len(names) >= 40, (len(files), len(names))  # the extraction still finds them
    assert missing == []


def commands(text: str) -> list[list[str]]:
    """Every `python ...` command of every bash block (heredoc bodies skipped) and of the prose, as argv."""
    lines = []
    for info, body in code_blocks(text):
        if info != "bash":
            continue
        heredoc = None
        for line in body.replace("\\\n", " ").splitlines():
            if heredoc is not None:
                heredoc = None if line.strip() == heredoc else heredoc
                continue
            m = re.search(r"<<-?\s*'?(\w+)'?", line)
            if m:
                heredoc = m.group(1)
                continue
            lines.append(line.split(" #")[0])
    lines += re.findall(r"`(python [^`\n]+)`", prose(text))
    out = []
    for line in lines:
        for part in re.split(r"&&|\|\||;|\|", line):
            argv = shlex.split(part)
            if argv[:1] == ["python"]:
                out.append(argv)
    return out


def config_class(module_name: str):
    """The flags dataclass of a script or `python -m` module (its own dataclass named *Config), or None."""
    for name in (module_name + ".__main__", module_name):
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        found = [v for k, v in vars(mod).items() if k.endswith("Config") and dataclasses.is_dataclass(v)
                 and getattr(v, "__module__", "") == mod.__name__]
        if found:
            return found[0]
    return None


def test_every_python_command_names_a_real_script_and_real_flags():
    """Each `python X.py --a=b` / `python -m X --a=b` in the walkthrough, run or not, names an existing script or
    module, and its flags parse with that script's Config (so a slow command cannot carry a stale flag)."""
    checked = []
    for argv in commands(doc_text()):
        if argv[1] == "-":
            continue
        if argv[1] == "-m":
            module, args = argv[2], argv[3:]
            importlib.import_module(module)
        else:
            assert argv[1].endswith(".py") and os.path.exists(os.path.join(ROOT, argv[1])), argv
            module, args = argv[1][:-3], argv[2:]
        flags = [a for a in args if a.startswith("--") and a != "--help"]
        cls = config_class(module)
        if cls is None:
            assert all(a == "--bench" for a in flags), (argv, "module has no Config")
            continue
        try:
            parse_config(cls, flags)
        except Exception as e:  # ConfigError names the flag
            pytest.fail(f"{' '.join(argv)}: {e}")
        checked.append(module)
    assert {"pretrain", "train_sft", "train_rm", "train_ppo", "evaluate", "pipeline", "label"} <= set(checked)
