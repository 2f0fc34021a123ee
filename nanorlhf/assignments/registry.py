"""Course assignments: solution regions in the library, a handout, an answer key, an autograder.

The assignment API (names, files, signatures, grading tests, commands) is REGISTRY below and
nowhere else; API_VERSION names it and CHANGELOG.md records each change, so a course written
against one version keeps working. Student sheet: docs/assignments.md.

    python -m nanorlhf.assignments make OUT_DIR                       # the handout (handout.py)
    python -m nanorlhf.assignments hint NAME [--level=2]              # hints 1..N (of 2), recorded in a copy
    python -m nanorlhf.assignments answers NAME                       # the reference body (instructors only)
    python -m nanorlhf.assignments grade [--repo=DIR] [--only=NAME]   # a score per assignment (grading.py)
    python -m nanorlhf.assignments grade --class=DIR --csv=FILE       # a folder of copies, one CSV

Regions and stubs: regions.py. Each assignment is graded by its visible tests (in the handout)
and its held-out tests (tests/instructor/, never in the handout: cases drawn at grading time).
Exit codes: 0 all pass, 1 some fail, 2 usage error (unknown name, bad marker, OUT_DIR not empty,
edited grading tests in a copy, the answer key asked for in a copy, no results).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nanorlhf.assignments.hints import HINTS

API_VERSION = "2.1"
ROOT = Path(__file__).resolve().parents[2]
HELDOUT = "tests/instructor"  # the held-out tests and the grader's fixtures: the instructor's side, never handed out


@dataclass(frozen=True)
class Assignment:
    name: str               # stable id: the markers' name, the --only value, the stub message's prefix
    file: str               # the library file holding the region, relative to the repository root
    function: str           # the function (Class.method) whose body, or a block of it, the region is
    signature: str          # its `def` line without `def ` and the colon, exactly as in the file
    hints: tuple[str, ...]    # level 1 (the stub's message): what and why; level 2: the traps
    tests: tuple[str, ...]    # visible grading tests (pytest node ids; a name without [params] covers every param)
    heldout: tuple[str, ...]  # held-out grading tests in HELDOUT (not in the handout), cases drawn at grading time
    note: str = ""            # how its grading tests avoid the other assignments' regions

    @property
    def message(self) -> str:
        """The stub's NotImplementedError message: the level-1 hint, and where the next level is."""
        return f"{self.name}: {self.hints[0]} (more: python -m nanorlhf.assignments hint {self.name} --level=2)"


def _tests(file: str, *names: str) -> tuple[str, ...]:
    return tuple(f"tests/{file}.py::{n}" for n in names)


def _heldout(file: str, *names: str) -> tuple[str, ...]:
    return tuple(f"{HELDOUT}/{file}.py::{n}" for n in names)


REGISTRY: tuple[Assignment, ...] = (
    Assignment(
        "bpe_merge", "nanorlhf/tokenizer.py", "_merge_word",
        "_merge_word(word: list[int], pair: tuple[int, int], new_id: int) -> list[int]",
        HINTS["bpe_merge"],
        _tests("test_tokenizer", "test_merge_word_by_hand", "test_merges_match_hand_computation",
               "test_merges_never_cross_pretokens"),
        _heldout("test_heldout_model", "test_bpe_merge_on_drawn_words_equals_the_reference",
                 "test_incremental_trainer_matches_naive_reference")),
    Assignment(
        "attention", "nanorlhf/model.py", "CausalSelfAttention.forward",
        "forward(self, x, mask, causal_only, kv_cache=None)",
        HINTS["attention"],
        _tests("test_model", "test_manual_and_sdpa_agree", "test_left_padding_does_not_change_real_logits[manual]",
               "test_fully_padded_rows_are_finite"),
        _heldout("test_heldout_model", "test_manual_attention_equals_hand_computation",
                 "test_attention_on_drawn_inputs_equals_hand_computation",
                 "test_attention_dropout_acts_on_the_weights_in_training"),
        "its tests run without a KV cache, so they do not need kv_cache"),
    Assignment(
        "kv_cache", "nanorlhf/model.py", "KVCache.update",
        "update(self, layer, k, v)",
        HINTS["kv_cache"],
        _tests("test_model", "test_kv_cache_equals_full_forward[sdpa]")
        + _tests("test_generate", "test_cache_and_naive_loop_give_identical_tokens[True-sdpa]",
                 "test_cache_and_naive_loop_give_identical_tokens[False-sdpa]"),
        _heldout("test_heldout_model", "test_kv_cache_update_at_drawn_positions",
                 "test_kv_cache_drawn_chunks_equal_one_full_pass"),
        "its tests use attn='sdpa', so they do not need attention"),
    Assignment(
        "response_mask", "nanorlhf/sft.py", "collate",
        "collate(examples: list[tuple[list[int], list[int]]], pad_id: int)",
        HINTS["response_mask"],
        _tests("test_sft", "test_collate_shifts_targets_and_masks_prompt_and_padding"),
        _heldout("test_heldout_model", "test_collate_on_drawn_examples_equals_the_reference")),
    Assignment(
        "rm_loss", "nanorlhf/reward.py", "rm_ranking_loss",
        "rm_ranking_loss(rewards, ranks)",
        HINTS["rm_loss"],
        _tests("test_reward", "test_equal_rewards_give_log2", "test_k_way_loss_is_mean_of_pairwise_losses",
               "test_tied_pairs_are_dropped", "test_all_tied_raises", "test_gradient_sign"),
        _heldout("test_heldout_losses", "test_rm_loss_on_drawn_rankings_equals_the_reference")),
    Assignment(
        "kl_reward", "nanorlhf/ppo.py", "kl_penalized_rewards",
        'kl_penalized_rewards(score, logprobs, ref_logprobs, response_mask, beta, estimator="k1")',
        HINTS["kl_reward"],
        _tests("test_ppo", "test_kl_penalized_rewards_token_by_token",
               "test_kl_penalized_rewards_use_the_chosen_estimator", "test_logged_kl_equals_kl_in_reward"),
        _heldout("test_heldout_losses", "test_kl_reward_on_drawn_batches_equals_the_reference")),
    Assignment(
        "gae", "nanorlhf/ppo.py", "gae",
        "gae(rewards, values, response_mask, gamma=1.0, lam=0.95)",
        HINTS["gae"],
        _tests("test_ppo", "test_gae_hand_computed", "test_gae_ignores_values_and_rewards_off_mask"),
        _heldout("test_heldout_losses", "test_gae_equals_brute_force_mixed_lengths")),
    Assignment(
        "policy_loss", "nanorlhf/ppo.py", "policy_loss",
        "policy_loss(logprobs, old_logprobs, advantages, response_mask, clip=0.2)",
        HINTS["policy_loss"],
        _tests("test_ppo", "test_policy_loss_identity_at_start", "test_policy_loss_clips",
               "test_policy_loss_both_signs_of_advantage"),
        _heldout("test_heldout_losses", "test_policy_loss_on_drawn_batches_equals_the_reference")),
    Assignment(
        "dpo_loss", "nanorlhf/dpo.py", "dpo_loss",
        "dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta: float)",
        HINTS["dpo_loss"],
        _tests("test_dpo", "test_dpo_loss_is_log2_at_the_reference",
               "test_dpo_gradient_raises_chosen_and_lowers_rejected", "test_dpo_loss_matches_the_formula_by_hand"),
        _heldout("test_heldout_losses", "test_dpo_loss_on_drawn_pairs_equals_the_reference"),
        "its tests call dpo_loss, not dpo_ranking_loss, so they do not need rm_loss"),
    Assignment(
        "steering", "nanorlhf/steering.py", "steer",
        "steer(model, layer: int, vector: torch.Tensor, multiplier: float, start=None)",
        HINTS["steering"],
        _tests("test_steering", "test_hook_adds_exactly_multiplier_times_vector_after_the_layer_from_start",
               "test_multiplier_zero_gives_identical_logits_and_the_hook_is_removed"),
        _heldout("test_heldout_model", "test_drawn_starts_steer_exactly_their_columns",
                 "test_start_none_steers_a_cached_generation_from_the_prompts_last_token"),
        "its tests use attn='sdpa' and a cache of their own, so they need neither attention nor kv_cache"),
    Assignment(
        "group_advantages", "nanorlhf/pg.py", "group_advantages",
        'group_advantages(rewards, estimator: str = "grpo", eps: float = 1e-6)',
        HINTS["group_advantages"],
        _tests("test_pg", "test_a_group_with_equal_rewards_gives_zero_advantage",
               "test_rloo_with_two_samples_uses_the_other_sample_as_the_baseline"),
        _heldout("test_heldout_critic_free", "test_group_advantages_on_drawn_rewards_equals_the_reference")),
    Assignment(
        "aggregate", "nanorlhf/pg.py", "aggregate",
        'aggregate(per_token, response_mask, mode="seq_mean", constant=None, *, n_responses=None, n_tokens=None)',
        HINTS["aggregate"],
        _tests("test_pg", "test_the_loss_is_the_same_however_a_ragged_batch_is_split_into_micro_batches"),
        _heldout("test_heldout_critic_free", "test_aggregate_on_drawn_batches_equals_the_reference")),
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
