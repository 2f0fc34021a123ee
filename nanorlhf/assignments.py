"""Course assignments: solution regions in the library, a student copy, an autograder.

The assignment API (names, files, signatures, hints, grading tests) is REGISTRY
below and nowhere else; API_VERSION names it and CHANGELOG.md records each change,
so a course written against one version keeps working. Student sheet: docs/assignments.md.

    python -m nanorlhf.assignments make OUT_DIR                       # a student copy
    python -m nanorlhf.assignments grade [--repo=DIR] [--only=NAME]   # a score per assignment

A region is the lines between `# BEGIN ASSIGNMENT <name>` and `# END ASSIGNMENT <name>`,
both at the indent of the code they wrap; `make` copies the git-tracked files and puts
`raise NotImplementedError("<name>: <hint>")` between the markers. `grade` runs all
grading tests in ONE pytest process and reads its JUnit XML, with the grading tests as handed out:
graded from another installation (`grade --repo=STUDENT_COPY`) the grader's own test files replace the
student's; in the copy itself, edited ones (hashed by `make`) refuse grading. Exit codes: 0 all pass,
1 some fail, 2 usage error (unknown name, bad marker, OUT_DIR not empty, no results).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from nanorlhf.testrun import PytestRunError, run_tests

API_VERSION = "1.0"
ROOT = Path(__file__).resolve().parents[1]
STUDENT_STAMP = ".student_copy.json"  # written by `make` at the top of a student copy


@dataclass(frozen=True)
class Assignment:
    name: str               # stable id: the markers' name, the --only value, the stub message's prefix
    file: str               # the library file holding the region, relative to the repository root
    function: str           # the function (Class.method) whose body, or a block of it, the region is
    signature: str          # its `def` line without `def ` and the colon, exactly as in the file
    hint: str               # one line: what to compute; the student copy's NotImplementedError says it
    tests: tuple[str, ...]  # pytest node ids grading it; a name without [params] covers every param
    note: str = ""          # how its grading tests avoid the other assignments' regions


def _tests(file: str, *names: str) -> tuple[str, ...]:
    return tuple(f"tests/{file}.py::{n}" for n in names)


REGISTRY: tuple[Assignment, ...] = (
    Assignment(
        "bpe_merge", "nanorlhf/tokenizer.py", "_merge_word",
        "_merge_word(word: list[int], pair: tuple[int, int], new_id: int) -> list[int]",
        "scan left to right; where (word[i], word[i+1]) == pair append new_id and step 2, "
        "else append word[i] and step 1; return a new list",
        _tests("test_tokenizer", "test_merge_word_by_hand", "test_merges_match_hand_computation",
               "test_merges_never_cross_pretokens", "test_incremental_trainer_matches_naive_reference")),
    Assignment(
        "attention", "nanorlhf/model.py", "CausalSelfAttention.forward",
        "forward(self, x, mask, causal_only, kv_cache=None)",
        "the manual path: att = q @ k^T / sqrt(hs); -inf where ~mask; softmax over keys; "
        "self.attn_dropout; y = att @ v, shape (B, nh, T, hs)",
        _tests("test_model", "test_manual_and_sdpa_agree", "test_left_padding_does_not_change_real_logits[manual]",
               "test_fully_padded_rows_are_finite"),
        "its tests run without a KV cache, so they do not need kv_cache"),
    Assignment(
        "kv_cache", "nanorlhf/model.py", "KVCache.update",
        "update(self, layer, k, v)",
        "write k and v (B, nh, T, hs) into self.kv[layer, 0] and self.kv[layer, 1] at positions "
        "[pos, pos+T); return both for positions [0, pos+T); leave pos alone (GPT moves it)",
        _tests("test_model", "test_kv_cache_equals_full_forward[sdpa]")
        + _tests("test_generate", "test_cache_and_naive_loop_give_identical_tokens[True-sdpa]",
                 "test_cache_and_naive_loop_give_identical_tokens[False-sdpa]"),
        "its tests use attn='sdpa', so they do not need attention"),
    Assignment(
        "response_mask", "nanorlhf/sft.py", "collate",
        "collate(examples: list[tuple[list[int], list[int]]], pad_id: int)",
        "x = ids[:-1] and y = ids[1:], right-padded with pad_id to the longest; loss_mask[b, t] = rmask[t+1] "
        "(the target is a response token), 0 on padding; attention_mask 1 on real inputs",
        _tests("test_sft", "test_collate_shifts_targets_and_masks_prompt_and_padding")),
    Assignment(
        "rm_loss", "nanorlhf/reward.py", "rm_ranking_loss",
        "rm_ranking_loss(rewards, ranks)",
        "ranks_to_pairs(ranks) lists the untied (winner, loser) pairs; loss = mean over them of "
        "-logsigmoid(r_w - r_l); ValueError('... no untied pair ...') when there is none",
        _tests("test_reward", "test_equal_rewards_give_log2", "test_k_way_loss_is_mean_of_pairwise_losses",
               "test_tied_pairs_are_dropped", "test_all_tied_raises", "test_gradient_sign")),
    Assignment(
        "kl_reward", "nanorlhf/ppo.py", "kl_penalized_rewards",
        'kl_penalized_rewards(score, logprobs, ref_logprobs, response_mask, beta, estimator="k1")',
        "kl = per_token_kl(logprobs, ref_logprobs, response_mask, estimator); rewards = -beta * kl, "
        "plus score at last_token_index(response_mask); return (rewards, kl)",
        _tests("test_ppo", "test_kl_penalized_rewards_token_by_token", "test_logged_kl_equals_kl_in_reward")),
    Assignment(
        "gae", "nanorlhf/ppo.py", "gae",
        "gae(rewards, values, response_mask, gamma=1.0, lam=0.95)",
        "for t from T-1 down to 0: delta = r_t + gamma*V_next - V_t, A_t = delta + gamma*lam*A_next; "
        "V_next and A_next are 0 after a row's last response token; 0 off the mask; returns = A + V",
        _tests("test_ppo", "test_gae_equals_brute_force_mixed_lengths", "test_gae_hand_computed",
               "test_gae_ignores_values_and_rewards_off_mask")),
    Assignment(
        "policy_loss", "nanorlhf/ppo.py", "policy_loss",
        "policy_loss(logprobs, old_logprobs, advantages, response_mask, clip=0.2)",
        "ratio = exp(logprobs - old_logprobs); loss = masked_mean of max(-A*ratio, -A*clamp(ratio, 1-clip, "
        "1+clip)); stats ratio_mean, clipfrac, approx_kl = mean((ratio-1) - log ratio)",
        _tests("test_ppo", "test_policy_loss_identity_at_start", "test_policy_loss_clips")),
    Assignment(
        "dpo_loss", "nanorlhf/dpo.py", "dpo_loss",
        "dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta: float)",
        "margin = implicit reward of chosen - of rejected, beta * (log pi - log pi_ref) each; loss = mean of "
        "-logsigmoid(margin); stats margin, accuracy, chosen_reward, rejected_reward",
        _tests("test_dpo", "test_dpo_loss_is_log2_at_the_reference", "test_dpo_gradient_raises_chosen_and_lowers_rejected",
               "test_dpo_loss_matches_the_formula_by_hand"),
        "its tests call dpo_loss, not dpo_ranking_loss, so they do not need rm_loss"),
)
BY_NAME = {a.name: a for a in REGISTRY}


class AssignmentError(Exception):
    """A usage error with a message for the user (exit code 2)."""


def select(only: str | None) -> list[Assignment]:
    """The assignments named by --only (comma-separated), or all of them."""
    if not only:
        return list(REGISTRY)
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise AssignmentError(f"unknown assignment {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    return [BY_NAME[n] for n in names]

# -----------------------------------------------------------------------------
# regions and stubs


MARKER = re.compile(r"^(?P<indent>[ \t]*)# (?P<kind>BEGIN|END) ASSIGNMENT (?P<name>\w+)[ \t]*$")


def find_regions(text: str, where: str) -> dict[str, tuple[str, int, int]]:
    """{name: (indent, begin_line, end_line)} (0-based marker lines) of one file's regions."""
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


def locate(repo: Path, files: list[str] | None = None) -> dict[str, dict[str, tuple[str, int, int]]]:
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


def stub(text: str, regions: dict[str, tuple[str, int, int]]) -> str:
    """The text with each region's lines between its markers replaced by one raise at the marker's indent."""
    lines = text.splitlines(keepends=True)
    for name, (indent, b, e) in sorted(regions.items(), key=lambda kv: -kv[1][1]):  # bottom up
        msg = f"{name}: {BY_NAME[name].hint}"
        lines[b + 1:e] = [f"{indent}raise NotImplementedError({msg!r})\n"]
    return "".join(lines)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def grading_files(repo: Path) -> list[str]:
    """The test files the grader runs, and the tests' conftest.py: what a student must not be able to change."""
    files = {n.split("::")[0] for a in REGISTRY for n in a.tests} | {"tests/conftest.py"}
    return sorted(f for f in files if (repo / f).is_file())


def grading_tree(repo: Path, tmp: Path) -> tuple[Path, list[str]]:
    """The tree to grade and the student files the grader's own tests replaced in it.

    Graded from this installation (the student grading their own copy): the grading tests must still
    hash as `make` wrote them, or grading is refused. Graded from another one (the instructor's, with
    --repo=STUDENT_COPY): a copy of the student's tree with this installation's grading tests put back
    over the student's, so an edited test changes nothing.
    """
    stamp = repo / STUDENT_STAMP
    if repo.resolve() == ROOT:
        made = json.loads(stamp.read_text()).get("grading_tests", {}) if stamp.exists() else {}
        edited = [f for f, h in made.items() if not (repo / f).is_file() or _sha256(repo / f) != h]
        if edited:
            raise AssignmentError(f"grading tests edited since the copy was made: {', '.join(edited)}; "
                                  "grading runs them as handed out (restore them to grade)")
        return repo, []
    tree = tmp / "graded"
    shutil.copytree(repo, tree, ignore=shutil.ignore_patterns(".git", ".venv", "out", "data", "labels",
                                                              "__pycache__", ".pytest_cache"))
    replaced = []
    for f in grading_files(ROOT):
        if not (tree / f).is_file() or _sha256(tree / f) != _sha256(ROOT / f):
            replaced.append(f)
        (tree / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, tree / f)
    return tree, replaced


def make(out: Path, repo: Path = ROOT) -> int:
    """Write the student copy of repo's git-tracked files into out (absent or empty)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise AssignmentError(f"{out} exists and is not an empty folder; pick a new OUT_DIR")
    locate(repo)  # every registry region present and well formed, before anything is written
    try:
        ls = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as e:
        raise AssignmentError(f"{repo} is not a git checkout ({e}); make copies the git-tracked files") from None
    tracked = set(ls.stdout.decode().split("\0")) | {"nanorlhf/assignments.py", "docs/assignments.md"}
    files = sorted(f for f in tracked if f and (repo / f).is_file())
    regions = locate(repo, files)
    for f in files:
        dst = out / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        if f in regions:
            dst.write_text(stub((repo / f).read_text(encoding="utf-8"), regions[f]), encoding="utf-8")
            shutil.copymode(repo / f, dst)
        else:
            shutil.copy2(repo / f, dst)
    stamp = {"api_version": API_VERSION, "made_from": commit, "assignments": [a.name for a in REGISTRY],
             "grading_tests": {f: _sha256(repo / f) for f in grading_files(repo)}}
    (out / STUDENT_STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
    n = sum(len(r) for r in regions.values())
    print(f"wrote {len(files)} files to {out}; {n} regions stubbed (assignment API {API_VERSION})")
    print(f"grade with: cd {out} && python -m nanorlhf.assignments grade")
    return 0

# -----------------------------------------------------------------------------
# grading: one pytest process, results read from its JUnit XML


def grade_results(results: dict, a: Assignment) -> list[tuple[str, bool, str]]:
    """[(test, passed, message)] over a's node ids; a node id that did not run fails, saying why."""
    out = []
    for node in a.tests:
        cases = [(k, *v) for k, v in results.items() if k == node or ("[" not in node and k.startswith(node + "["))]
        why = results.get(node.split("::")[0], (False, "not collected"))[1]
        out += cases or [(node, False, f"did not run: {why}")]
    return out


def grade(repo: Path = ROOT, only: str | None = None, timeout: float = 300) -> tuple[int, dict]:
    """Run the selected assignments' grading tests; print a score each. Returns (exit code, {name: tests})."""
    chosen = select(only)
    nodes = list(dict.fromkeys(n for a in chosen for n in a.tests))
    stamp = repo / STUDENT_STAMP
    kind = f"student copy of {json.loads(stamp.read_text())['made_from'][:10]}" if stamp.exists() else "solutions"
    print(f"nanorlhf assignments, API {API_VERSION}: grading {repo} ({kind}), {len(nodes)} test ids")
    with tempfile.TemporaryDirectory() as tmp:
        tree, replaced = grading_tree(repo, Path(tmp))
        if replaced:
            print(f"  the grader's own tests replaced {len(replaced)} edited or missing student files: "
                  f"{', '.join(replaced)}")
        try:
            results = run_tests(tree, nodes, timeout)
        except PytestRunError as e:
            raise AssignmentError(str(e)) from None
    details, width = {}, max(len(a.name) for a in chosen)
    for a in chosen:
        tests = details[a.name] = grade_results(results, a)
        ok = sum(t[1] for t in tests)
        why = "" if ok == len(tests) else "  " + next(msg for _, good, msg in tests if not good)
        print(f"  {a.name:<{width}}  {'PASS' if ok == len(tests) else 'FAIL'}  {ok}/{len(tests)} tests{why}")
    n_pass = sum(all(t[1] for t in tests) for tests in details.values())
    print(f"score: {n_pass}/{len(chosen)} assignments passed")
    return (0 if n_pass == len(chosen) else 1), details


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m nanorlhf.assignments", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="write a student copy with every region stubbed")
    m.add_argument("out_dir", help="new or empty folder for the student copy")
    m.add_argument("--repo", default=str(ROOT), help="the solution repository (a git checkout)")
    g = sub.add_parser("grade", help="run the grading tests and print a score per assignment")
    g.add_argument("--repo", default=str(ROOT), help="the repository to grade (default: this one)")
    g.add_argument("--only", default=None, help="grade only these assignments (comma-separated names)")
    g.add_argument("--timeout", type=float, default=300, help="seconds before the whole test run is stopped")
    args = p.parse_args(argv)
    try:
        if args.cmd == "make":
            return make(Path(args.out_dir), Path(args.repo))
        return grade(Path(args.repo).resolve(), args.only, args.timeout)[0]
    except AssignmentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
