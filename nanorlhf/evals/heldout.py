"""The held-out-labeler test (InstructGPT §4.1): does the RM generalise to labelers whose labels it never saw?

The paper trains RMs on 4 of 5 labeler groups and finds they predict the 5th group's preferences
(69.6%) about as well as their own groups' (72.4%). train_rm.py runs it (its step 5), or the
pipeline as a stage of its own beside PPO.

Example:
    out = heldout_group_eval(sft, tok, judge, (train_cmp, val_cmp), RewardConfig(), folds=1, seed=0)
    out["heldout_group_accuracy"], out["own_groups_accuracy"]
"""
from __future__ import annotations

import torch

from nanorlhf.model import ScalarHeadModel
from nanorlhf.reward import RewardConfig, fit_reward_model, ranking_accuracy


def heldout_group_eval(sft, tok, judge, comparisons: tuple[list[dict], list[dict]], hp: RewardConfig, *, folds: int,
                       seed: int, max_prompts: int = 0) -> dict:
    """The held-out-labeler test (paper §4.1: 69.6% vs 72.4%).

    comparisons: (training, validation). Training labelers are split into 5 groups; an RM trained (hp, seed:
    the RM's own recipe) on the training comparisons of 4 groups (the first `max_prompts` of them, when > 0)
    predicts the 5th group's rankings of the validation completions ("held-out") and the 4 groups' own rankings of them ("own"), for
    `folds` of the 5 groups in turn. Both accuracies come from the same RM, so a smaller training set lowers
    both and leaves their comparison, the test's point, intact.
    """
    train_cmp, val_cmp = comparisons
    device = next(sft.parameters()).device
    groups = [{l.id for l in g} for g in judge.pool.groups(5)]
    held, own = [], []
    for g in range(folds):
        subset = [c for c in train_cmp if c["labeler"] not in groups[g]]
        subset = subset[:max_prompts] if max_prompts > 0 else subset
        # the head's init from the seed alone: the same figures whether the RM stage runs the test or a stage of
        # its own does (manual_seed reseeds the GPUs too, so they are forked as well)
        with torch.random.fork_rng(devices=range(torch.cuda.device_count())):
            torch.manual_seed(seed + g)
            rm = ScalarHeadModel.from_gpt(sft).to(device)
        print(f"held-out-labeler fold {g + 1}/{folds}: training on {len(subset)} comparisons")
        fit_reward_model(rm, tok, subset, hp, seed=seed)
        held.append(ranking_accuracy(rm, tok, [dict(c, r=c["group_rankings"][g]) for c in val_cmp], device, "r"))
        own.append(sum(ranking_accuracy(rm, tok, [dict(c, r=c["group_rankings"][o]) for c in val_cmp], device, "r")
                       for o in range(5) if o != g) / 4)
        print(f"  accuracy on the held-out group {held[-1]:.3f}, on the training groups {own[-1]:.3f}")
    return {"heldout_group_accuracy": sum(held) / len(held), "own_groups_accuracy": sum(own) / len(own),
            "folds": folds}
