"""Course assignments: solution regions in the library, a student copy, an autograder.

The assignment API (names, files, signatures, grading tests, commands) is REGISTRY
below and nowhere else; API_VERSION names it and CHANGELOG.md records each change,
so a course written against one version keeps working. Student sheet: docs/assignments.md.

    python -m nanorlhf.assignments make OUT_DIR                       # a student copy
    python -m nanorlhf.assignments hint NAME [--level=N]              # hints 1..N (of 3)
    python -m nanorlhf.assignments grade [--repo=DIR] [--only=NAME]   # a score per assignment
    python -m nanorlhf.assignments grade --class=DIR --csv=FILE       # a folder of copies, one CSV

A region is the lines between `# BEGIN ASSIGNMENT <name>` and `# END ASSIGNMENT <name>`,
both at the indent of the code they wrap; `make` copies the git-tracked files and puts
`raise NotImplementedError("<name>: <level-1 hint> ...")` between the markers (nanorlhf/assignments/hints.py
holds the hints). Grading is nanorlhf/assignments/grading.py. Exit codes: 0 all pass, 1 some fail, 2 usage
error (unknown name, bad marker, OUT_DIR not empty, edited grading tests, no results).
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

from nanorlhf.assignments.hints import HINTS

API_VERSION = "1.2"
ROOT = Path(__file__).resolve().parents[2]
STUDENT_STAMP = ".student_copy.json"  # written by `make` at the top of a student copy


@dataclass(frozen=True)
class Assignment:
    name: str               # stable id: the markers' name, the --only value, the stub message's prefix
    file: str               # the library file holding the region, relative to the repository root
    function: str           # the function (Class.method) whose body, or a block of it, the region is
    signature: str          # its `def` line without `def ` and the colon, exactly as in the file
    hints: tuple[str, ...]  # level 1 (the stub's message): what and why; 2: the tools; 3: close to pseudocode
    tests: tuple[str, ...]  # pytest node ids grading it; a name without [params] covers every param
    note: str = ""          # how its grading tests avoid the other assignments' regions

    @property
    def message(self) -> str:
        """The stub's NotImplementedError message: the level-1 hint, and where the next level is."""
        return f"{self.name}: {self.hints[0]} (more: python -m nanorlhf.assignments hint {self.name} --level=2)"


def _tests(file: str, *names: str) -> tuple[str, ...]:
    return tuple(f"tests/{file}.py::{n}" for n in names)


REGISTRY: tuple[Assignment, ...] = (
    Assignment(
        "bpe_merge", "nanorlhf/tokenizer.py", "_merge_word",
        "_merge_word(word: list[int], pair: tuple[int, int], new_id: int) -> list[int]",
        HINTS["bpe_merge"],
        _tests("test_tokenizer", "test_merge_word_by_hand", "test_merges_match_hand_computation",
               "test_merges_never_cross_pretokens", "test_incremental_trainer_matches_naive_reference")),
    Assignment(
        "attention", "nanorlhf/model.py", "CausalSelfAttention.forward",
        "forward(self, x, mask, causal_only, kv_cache=None)",
        HINTS["attention"],
        _tests("test_model", "test_manual_attention_equals_hand_computation", "test_manual_and_sdpa_agree",
               "test_left_padding_does_not_change_real_logits[manual]", "test_fully_padded_rows_are_finite"),
        "its tests run without a KV cache, so they do not need kv_cache"),
    Assignment(
        "kv_cache", "nanorlhf/model.py", "KVCache.update",
        "update(self, layer, k, v)",
        HINTS["kv_cache"],
        _tests("test_model", "test_kv_cache_equals_full_forward[sdpa]")
        + _tests("test_generate", "test_cache_and_naive_loop_give_identical_tokens[True-sdpa]",
                 "test_cache_and_naive_loop_give_identical_tokens[False-sdpa]"),
        "its tests use attn='sdpa', so they do not need attention"),
    Assignment(
        "response_mask", "nanorlhf/sft.py", "collate",
        "collate(examples: list[tuple[list[int], list[int]]], pad_id: int)",
        HINTS["response_mask"],
        _tests("test_sft", "test_collate_shifts_targets_and_masks_prompt_and_padding")),
    Assignment(
        "rm_loss", "nanorlhf/reward.py", "rm_ranking_loss",
        "rm_ranking_loss(rewards, ranks)",
        HINTS["rm_loss"],
        _tests("test_reward", "test_equal_rewards_give_log2", "test_k_way_loss_is_mean_of_pairwise_losses",
               "test_tied_pairs_are_dropped", "test_all_tied_raises", "test_gradient_sign")),
    Assignment(
        "kl_reward", "nanorlhf/ppo.py", "kl_penalized_rewards",
        'kl_penalized_rewards(score, logprobs, ref_logprobs, response_mask, beta, estimator="k1")',
        HINTS["kl_reward"],
        _tests("test_ppo", "test_kl_penalized_rewards_token_by_token",
               "test_kl_penalized_rewards_use_the_chosen_estimator", "test_logged_kl_equals_kl_in_reward")),
    Assignment(
        "gae", "nanorlhf/ppo.py", "gae",
        "gae(rewards, values, response_mask, gamma=1.0, lam=0.95)",
        HINTS["gae"],
        _tests("test_ppo", "test_gae_equals_brute_force_mixed_lengths", "test_gae_hand_computed",
               "test_gae_ignores_values_and_rewards_off_mask")),
    Assignment(
        "policy_loss", "nanorlhf/ppo.py", "policy_loss",
        "policy_loss(logprobs, old_logprobs, advantages, response_mask, clip=0.2)",
        HINTS["policy_loss"],
        _tests("test_ppo", "test_policy_loss_identity_at_start", "test_policy_loss_clips",
               "test_policy_loss_both_signs_of_advantage")),
    Assignment(
        "dpo_loss", "nanorlhf/dpo.py", "dpo_loss",
        "dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta: float)",
        HINTS["dpo_loss"],
        _tests("test_dpo", "test_dpo_loss_is_log2_at_the_reference",
               "test_dpo_gradient_raises_chosen_and_lowers_rejected", "test_dpo_loss_matches_the_formula_by_hand"),
        "its tests call dpo_loss, not dpo_ranking_loss, so they do not need rm_loss"),
    Assignment(
        "steering", "nanorlhf/steering.py", "steer",
        "steer(model, layer: int, vector: torch.Tensor, multiplier: float, start=None)",
        HINTS["steering"],
        _tests("test_steering", "test_hook_adds_exactly_multiplier_times_vector_after_the_layer_from_start",
               "test_multiplier_zero_gives_identical_logits_and_the_hook_is_removed"),
        "its tests use attn='sdpa' and no KV cache, so they need neither attention nor kv_cache"),
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


def splice(text: str, regions: dict[str, tuple[str, int, int]], bodies: dict[str, str]) -> str:
    """The text with the lines between each named region's markers replaced by its body (dedented source,
    indented here to the markers' indent); regions not in bodies are left as they are."""
    lines = text.splitlines(keepends=True)
    for name, (indent, b, e) in sorted(regions.items(), key=lambda kv: -kv[1][1]):  # bottom up
        if name in bodies:
            body = textwrap.dedent(bodies[name]).strip("\n").splitlines()
            lines[b + 1:e] = [f"{indent}{ln}\n" if ln.strip() else "\n" for ln in body]
    return "".join(lines)


def stub(text: str, regions: dict[str, tuple[str, int, int]]) -> str:
    """The text with each region's lines between its markers replaced by one raise at the marker's indent."""
    return splice(text, regions, {name: f"raise NotImplementedError({BY_NAME[name].message!r})" for name in regions})


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def grading_files(repo: Path) -> list[str]:
    """The test files the grader runs, and the tests' conftest.py: what a student must not be able to change."""
    files = {n.split("::")[0] for a in REGISTRY for n in a.tests} | {"tests/conftest.py"}
    return sorted(f for f in files if (repo / f).is_file())


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
    tracked = set(ls.stdout.decode().split("\0")) | {"docs/assignments.md"}
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
             "grading_tests": {f: sha256(repo / f) for f in grading_files(repo)}}
    (out / STUDENT_STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
    n = sum(len(r) for r in regions.values())
    print(f"wrote {len(files)} files to {out}; {n} regions stubbed (assignment API {API_VERSION})")
    print(f"grade with: cd {out} && python -m nanorlhf.assignments grade; "
          "more hints: python -m nanorlhf.assignments hint NAME --level=2")
    return 0

def hint(name: str, level: int) -> str:
    """Hints 1..level of one assignment, one numbered paragraph each."""
    a = select(name)[0]
    if not 1 <= level <= len(a.hints):
        raise AssignmentError(f"--level must be 1..{len(a.hints)}, got {level}")
    return "\n".join(f"{name} hint {i + 1}/{len(a.hints)}: {h}" for i, h in enumerate(a.hints[:level]))
