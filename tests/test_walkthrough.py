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
import os
import re

from doccheck import (FILE_EXT, MADE_BY_RUNNING, ROOT, check_commands, check_quoted, code_blocks, fast_blocks,
                      prose, quoted_outputs, read_doc, resolve, run_fast_blocks)


def doc_text() -> str:
    return read_doc(os.path.join("docs", "walkthrough.md"))


def test_fast_blocks_run_as_written_and_print_the_quoted_figures(tmp_path):
    """Every `# fast` block of the walkthrough exits 0, run in order as written in a fresh copy of the repo;
    together they run the world, every stage script and evaluate.py (so the marker is not lost silently); and
    every figure quoted in an `output` block is printed by its block, within the block's stated tolerance."""
    text = doc_text()
    blocks = fast_blocks(text)
    joined = "\n".join(blocks)
    for needed in ("nanorlhf.world", "pretrain.py", "train_sft.py", "train_rm.py", "train_ppo.py", "evaluate.py"):
        assert needed in joined, f"no fast block runs {needed}"
    repo = str(tmp_path / "repo")
    printed = run_fast_blocks(blocks, repo)
    assert os.path.exists(os.path.join(repo, "out", "tiny", "ppo_ptx_a", "ckpt.pt"))  # written in the copy
    quoted = quoted_outputs(text)
    assert len({i for i, *_ in quoted}) >= 8, "most fast blocks quote what they print"
    problems = [f"fast block {i + 1}: {p}" for i, lines, a, r in quoted for p in check_quoted(lines, printed[i], a, r)]
    assert problems == [], "\n".join(problems)


def test_a_drifted_figure_fails_the_check():
    """The quoted-output check compares words exactly and numbers within the tolerance: a figure moved past it,
    a changed word or a missing line fails; `...` and extra printed lines do not."""
    printed = "bpe: done\nRM validation pairwise accuracy 0.507 (ratio 0.86)\nppo  2/2 (100%) score -0.2192 eps 95\n"
    good = ["RM validation pairwise accuracy 0.55 (ratio 0.90)", "ppo 2/2 (100%) score -0.20 ..."]
    assert check_quoted(good, printed, 0.05, 0) == []
    assert check_quoted(["RM validation pairwise accuracy 0.62 (ratio 0.86)"], printed, 0.05, 0) != []
    assert check_quoted(["RM validation pairwise accuracy 0.507 (ratio 0.86)"], printed, 0, 0) == []
    assert check_quoted(["RM test pairwise accuracy 0.507 (ratio 0.86)"], printed, 0.05, 0) != []
    assert check_quoted(["RM validation pairwise accuracy 0.507 (ratio 1.0)"], printed, 0.01, 0.2) == []  # 20% of 1.0
    assert check_quoted(good[::-1], printed, 0.05, 0) != []  # in order


def test_measured_figures_sit_in_output_blocks():
    """The prose says "we saw" only of what an output block quotes (checked above) or of docs/results.md's run,
    so a figure measured once cannot drift silently in a sentence."""
    bad = [m.group(0) for m in re.finditer(r"[Ww]e saw[^.\n]*\d[^.\n]*", prose(doc_text()))
           if "results.md" not in m.group(0)]
    assert bad == []


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


def test_every_python_command_names_a_real_script_and_real_flags():
    """Each `python X.py --a=b` / `python -m X --a=b` in the walkthrough, run or not, names an existing script or
    module, and its flags parse with that script's Config (so a slow command cannot carry a stale flag)."""
    checked = check_commands(doc_text())
    assert {"pretrain", "train_sft", "train_rm", "train_ppo", "evaluate", "pipeline", "label"} <= set(checked)


def worked_row(text: str) -> tuple[dict, dict[str, list[str]]]:
    """The parameters in the worked row's marker, and its table's rows by their first words."""
    m = re.search(r"<!-- worked row: beta ([\d.]+), score ([\d.]+), gamma ([\d.]+), lambda ([\d.]+) -->\n((?:\|.*\n)+)",
                  text)
    params = dict(zip(("beta", "score", "gamma", "lam"), map(float, m.groups()[:4])))
    rows = {}
    for line in m.group(5).splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows[cells[0].split()[0].split("_")[0]] = cells[1:]
    return params, rows


def test_the_worked_row_is_what_the_library_computes():
    """§3.5c's row of r, V, delta, A and the return over prompt, response and padding columns is what
    nanorlhf.ppo.kl_penalized_rewards and nanorlhf.ppo.gae give for its kl, V and mask (to the table's rounding);
    its prompt and padding columns hold 0."""
    import torch

    from nanorlhf import ppo
    p, rows = worked_row(doc_text())
    num = {k: torch.tensor([[float(x) for x in v]], dtype=torch.float64) for k, v in rows.items()
           if k not in ("column", "token", "---")}
    mask = num["response"].bool()
    rewards, _ = ppo.kl_penalized_rewards(torch.tensor([p["score"]], dtype=torch.float64), num["kl"],
                                          torch.zeros_like(num["kl"]), mask, p["beta"])
    adv, ret = ppo.gae(rewards, num["V"], mask, p["gamma"], p["lam"])
    v_next = torch.where(mask[:, 1:], num["V"][:, 1:], 0.0)
    delta = torch.where(mask, rewards + p["gamma"] * torch.cat([v_next, torch.zeros(1, 1)], 1) - num["V"], 0.0)
    for name, got in (("r", rewards), ("delta", delta), ("A", adv), ("return", ret)):
        torch.testing.assert_close(num[name], got, atol=6e-5, rtol=0, msg=f"row {name}")
    assert (num["A"][~mask] == 0).all() and mask.any(dim=1).all() and not mask[0, 0] and not mask[0, -1]


def test_each_assignment_is_called_out_where_the_walkthrough_meets_it():
    """The glossary is linked before the first section; every registered assignment has an "Assignment:" callout
    whose link names a section of docs/assignments.md; the data-flow block says what each stage reads and writes."""
    from nanorlhf.assignments.registry import BY_NAME
    text = doc_text()
    assert "(#glossary)" in text[:text.index("## Setup")] and "\n## Glossary\n" in text
    docs = read_doc(os.path.join("docs", "assignments.md"))
    anchors = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^## (.+)$", docs, re.M)}
    called = re.findall(r"\[`(\w+)`\]\(assignments\.md#([\w-]+)\)", "\n".join(
        ln for ln in text.splitlines() if ln.startswith(">")))
    assert sorted({n for n, _ in called}) == sorted(BY_NAME) and all(a in anchors for _, a in called), called
    flow = next(body for info, body in code_blocks(text) if info == "text" and "writes" in body)
    stages = ("python -m nanorlhf.world", "pretrain.py", "train_sft.py", "train_rm.py", "train_ppo.py", "evaluate.py")
    assert all(stage in flow for stage in stages), flow
