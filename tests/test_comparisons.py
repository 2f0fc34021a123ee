"""The held-out-labeler test's data flow (nanorlhf/evals/heldout.py heldout_group_eval, InstructGPT §4.1), the
agreement ceiling and RM accuracy over every ranking of the validation completions, and the sampling's split
between processes."""
import os

import pytest
import torch

import nanorlhf.evals.heldout as heldout
import nanorlhf.reward as reward
from nanorlhf.checkpoint import load_model
from nanorlhf.evals.heldout import heldout_group_eval
from nanorlhf.generate import SamplingConfig
from nanorlhf.infra.lanes import usable_cpus
from nanorlhf.model import GPT, GPTConfig
from nanorlhf.reward import RewardConfig
from nanorlhf.world.comparisons import labeler_agreement, sample_completions
from nanorlhf.world.labelers import Labeler


class FivePools:
    """A judge whose training pool has 10 labelers, L0..L9; groups(5) puts Li in group i % 5."""
    def __init__(self):
        self.pool = type("Pool", (), {})()
        labelers = [Labeler(f"L{i}", {"attempted": 1.0}, tau=1.0) for i in range(10)]
        self.pool.groups = lambda n: [labelers[g::n] for g in range(n)]


def test_heldout_rm_trains_without_the_held_out_group_and_reads_each_groups_rankings(monkeypatch):
    """Fold g trains on the comparisons of the other 4 groups only (the first max_prompts of them, in order),
    scores the held-out group's rankings as 'held-out' and the mean of the other 4 groups' as 'own'."""
    seen, read = [], []
    monkeypatch.setattr(heldout, "fit_reward_model", lambda rm, tok, cmp, hp, **kw: seen.append([c["id"] for c in cmp]))
    # accuracy = the group whose rankings were read, / 10: held-out and own are then told apart
    monkeypatch.setattr(heldout, "ranking_accuracy",
                        lambda rm, tok, val, device, key: read.append(val[0][key]) or val[0][key] / 10)
    train = [{"id": i, "labeler": f"L{i % 10}"} for i in range(40)]
    val = [{"group_rankings": [0, 1, 2, 3, 4]}]
    torch.manual_seed(0)
    sft = GPT(GPTConfig(vocab_size=32, block_size=8, n_layer=1, n_head=1, n_embd=8))
    hp = RewardConfig(lr=1e-3, epochs=1, batch_prompts=2)
    out = heldout_group_eval(sft, None, FivePools(), (train, val), hp, folds=2, seed=0, max_prompts=6)
    # fold 0 holds out L0 and L5 (ids = 0 or 5 mod 10), fold 1 holds out L1 and L6
    assert seen[0] == [1, 2, 3, 4, 6, 7] and seen[1] == [0, 2, 3, 4, 5, 7]
    assert read == [0, 1, 2, 3, 4, 1, 0, 2, 3, 4]  # held-out group first, then the 4 training groups
    assert out["heldout_group_accuracy"] == (0.0 + 0.1) / 2
    assert abs(out["own_groups_accuracy"] - ((1 + 2 + 3 + 4) / 40 + (0 + 2 + 3 + 4) / 40) / 2) < 1e-12
    heldout_group_eval(sft, None, FivePools(), (train, val), hp, folds=1, seed=0)
    assert len(seen[2]) == 32  # max_prompts 0: all 4 groups' comparisons


def test_agreement_ceiling_pools_only_pairs_of_rankings_by_two_different_labelers():
    """The ceiling pools (labeler, second labeler) and each two group rankings; the row's own labeler against a
    group's is left out (that group may hold the same labeler). Pairs pooled: a K = 3 row weighs 3 pairs."""
    up, down = [[0], [1], [2]], [[2], [1], [0]]
    row = {"ranking": up, "second_ranking": up, "group_rankings": [down, down, up]}
    # pairs: (ranking, second) 3 of 3 alike; groups (0,1) 3 of 3, (0,2) 0 of 3, (1,2) 0 of 3; ranking vs groups skipped
    assert labeler_agreement([row]) == 6 / 12
    tied = {"ranking": [[0, 1], [2]], "second_ranking": up, "group_rankings": []}   # the tied pair is not counted
    assert labeler_agreement([row, tied]) == (6 + 2) / (12 + 2)


def test_rm_accuracy_over_every_ranking_scores_each_rows_pairs_under_each_of_its_rankings(monkeypatch):
    """every=True: a row's pairs are counted under its labeler's, the second labeler's and each group's ranking,
    from one scoring of its completions; the default reads the labeler's ranking alone."""
    monkeypatch.setattr(reward, "score_texts", lambda rm, tok, prompts, texts, device: torch.tensor([3.0, 2.0, 1.0]))
    row = {"prompt": "p", "completions": ["a", "b", "c"], "ranking": [[0], [1], [2]],
           "second_ranking": [[2], [1], [0]], "group_rankings": [[[0], [1, 2]]]}
    assert reward.ranking_accuracy(None, None, [row], "cpu") == 1.0
    assert reward.ranking_accuracy(None, None, [row], "cpu", every=True) == (3 + 0 + 2) / (3 + 3 + 2)


@pytest.mark.skipif(len(usable_cpus()) < 2, reason="needs two cores to run two processes")
def test_two_processes_sample_the_same_completions_as_one(stages):
    """Each batch's noise is its own (seeded by the batch's index), so splitting the batches between
    processes (one thread each, as here) changes nothing: the same texts, prompt by prompt, in order."""
    sft, tok, _ = load_model(os.path.join(stages["out"], "sft", "ckpt.pt"), "cpu", dropout=0.0)
    prompts = [f"Tell me about item {i}." for i in range(9)]
    ks = [4, 5, 6, 4, 9, 4, 5, 7, 4]
    kw = dict(sampling=SamplingConfig(max_new_tokens=8, temperature=1.0), batch=8, seed=3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = sample_completions(sft, tok, prompts, ks, **kw)
    finally:
        torch.set_num_threads(threads)
    assert [len(c) for c in one] == ks
    assert sample_completions(sft, tok, prompts, ks, procs=2, **kw) == one
    assert sample_completions(sft, tok, prompts, ks, **dict(kw, seed=4)) != one
