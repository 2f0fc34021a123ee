"""Checks shared by the tests of the documents a user follows (docs/walkthrough.md, README.md): their code blocks,
the `# fast` ones run as written in a fresh copy of the repository, and every `python ...` command's script and flags.

Convention: a fenced code block whose info string is `bash` and whose first line is exactly `# fast` is a *fast*
block: it runs in seconds on the tiny world, from the repository root, and may use what earlier fast blocks wrote.
A block whose info string is `output` quotes what the fast block before it printed. Its first line states the
tolerance, `# printed by the block above; numbers within A` (or `within A or P%`, whichever is larger); each
later line must match one printed line, in order, with its numbers within that tolerance and its words equal
(runs of spaces are ignored, `...` stands for anything).
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

from nanorlhf.infra.config import parse_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
FILE_EXT = (".py", ".md", ".jsonl", ".json", ".pt", ".png", ".tiktoken", ".txt", ".toml")
MADE_BY_RUNNING = ("out", "data", "labels")  # folders the commands create; absent from a fresh clone


def read_doc(rel: str) -> str:
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced code block, in order."""
    return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(text)]


def fast_blocks(text: str) -> list[str]:
    return [body for info, body in code_blocks(text)
            if info == "bash" and body.splitlines() and body.splitlines()[0].strip() == "# fast"]


def prose(text: str) -> str:
    """A document without its code blocks."""
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


OUTPUT_NOTE = re.compile(r"^# printed by the block above; numbers within ([\d.]+)(?: or ([\d.]+)%)?")
NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?"


def quoted_outputs(text: str) -> list[tuple[int, list[str], float, float]]:
    """(index of the fast block it follows, quoted lines, absolute tolerance, relative tolerance) per output block."""
    out, n_fast = [], 0
    for info, body in code_blocks(text):
        if info == "bash" and body.splitlines() and body.splitlines()[0].strip() == "# fast":
            n_fast += 1
        elif info == "output":
            lines = body.splitlines()
            m = OUTPUT_NOTE.match(lines[0]) if lines else None
            assert m and n_fast, f"an output block needs a fast block before it and a tolerance line: {lines[:1]}"
            out.append((n_fast - 1, [ln for ln in lines[1:] if ln.strip()], float(m[1]), float(m[2] or 0) / 100))
    return out


def _line_pattern(quoted: str) -> re.Pattern:
    parts = re.split(rf"(\.\.\.|{NUMBER}|\s+)", quoted.strip())
    rx = "".join(r".*?" if p == "..." else rf"({NUMBER})" if re.fullmatch(NUMBER, p) else r"\s*" if p.isspace()
                 else re.escape(p) for p in parts if p)
    return re.compile(rx)


def check_quoted(lines: list[str], printed: str, abs_tol: float, rel_tol: float) -> list[str]:
    """The quoted lines that no printed line matches (in order), each with the closest printed figures seen."""
    printed_lines, i, problems = [ln.strip() for ln in printed.splitlines()], 0, []
    for quoted in lines:
        rx, want = _line_pattern(quoted), [float(x.replace(",", "")) for x in re.findall(NUMBER, quoted)]
        near = []
        for j in range(i, len(printed_lines)):
            m = rx.fullmatch(printed_lines[j])
            if not m:
                continue
            got = [float(x.replace(",", "")) for x in m.groups()]
            if all(abs(g - w) <= max(abs_tol, rel_tol * abs(w)) for g, w in zip(got, want)):
                i = j + 1
                break
            near.append(printed_lines[j])
        else:
            problems.append(f"quoted {quoted.strip()!r}; printed {near[:2] or 'no line of that shape'}")
    return problems


def run_fast_blocks(blocks: list[str], repo: str) -> list[str]:
    """Run each fast block in order, as one `bash -euo pipefail` script, in a fresh copy of the repo at `repo`;
    what each printed (stdout and stderr)."""
    fresh_copy(repo)
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    env.setdefault("OMP_NUM_THREADS", "1")  # tiny models gain nothing from threads; a shared CPU loses a lot
    printed = []
    for i, block in enumerate(blocks, 1):
        res = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=repo, env=env, capture_output=True,
                             text=True, timeout=600)
        assert res.returncode == 0, (f"fast block {i} of {len(blocks)} exited {res.returncode}:\n{block}\n"
                                     f"--- output (end) ---\n{(res.stdout + res.stderr)[-4000:]}")
        printed.append(res.stdout + res.stderr)
    return printed


def check_commands(text: str) -> list[str]:
    """Each `python X.py --a=b` / `python -m X --a=b` in a document, run or not, names an existing script or module
    and its flags parse with that script's Config (so a slow command cannot carry a stale flag); the modules."""
    checked = []
    for argv in commands(text):
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
    return checked
