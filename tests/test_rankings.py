"""The ranking vocabulary (nanorlhf/rankings.py): ranking <-> ranks <-> pairs, TRL pairs, agreement."""
import math
from itertools import combinations

import torch

from nanorlhf.rankings import (comparisons_to_two_way, pair_agreement, ranking_to_pairs, ranking_to_ranks,
                               ranks_to_pairs, scores_to_ranking, usable)


def test_ranks_to_pairs_hand_made_with_ties():
    """ranks_to_pairs lists every untied pair once as (winner, loser) and drops tied pairs."""
    # completion 0 best, 1 worst, 2 and 3 tied in the middle
    assert ranks_to_pairs([0, 2, 1, 1]) == [(0, 1), (0, 2), (0, 3), (2, 1), (3, 1)]
    assert ranks_to_pairs(torch.tensor([1, 0])) == [(1, 0)]
    assert ranks_to_pairs([3, 3, 3]) == []


def test_no_ties_gives_all_C_K_2_pairs():
    """Without ties the normaliser is the paper's C(K, 2): every pair appears exactly once."""
    for k in range(2, 10):
        pairs = ranks_to_pairs(torch.randperm(k))
        assert len(pairs) == math.comb(k, 2)
        assert {frozenset(p) for p in pairs} == {frozenset(p) for p in combinations(range(k), 2)}


def test_comparisons_to_two_way_keeps_every_untied_pair_once():
    """The pairs ablation: a K-way ranking becomes its untied pairs, winner first, weight carried over."""
    c = {"prompt": "p", "completions": ["a", "b", "c"], "ranking": [[2], [0, 1]], "weight": 2.0}
    pairs = comparisons_to_two_way([c])
    assert sorted((p["completions"][0], p["completions"][1]) for p in pairs) == [("c", "a"), ("c", "b")]
    assert all(p["ranking"] == [[0], [1]] and p["weight"] == 2.0 and p["prompt"] == "p" for p in pairs)



def test_ranking_ranks_and_pairs_agree_by_hand():
    """A ranking, its ranks and its pairs say the same thing: [[2], [0, 3], [1]] is ranks [1, 2, 0, 1]."""
    ranking = [[2], [0, 3], [1]]
    assert ranking_to_ranks(ranking) == [1, 2, 0, 1]
    assert ranking_to_pairs(ranking) == ranks_to_pairs([1, 2, 0, 1]) == [(0, 1), (2, 0), (2, 1), (3, 1), (2, 3)]
    assert ranking_to_ranks(scores_to_ranking([0.3, -1.0, 2.0, 0.3])) == [1, 2, 0, 1]


def test_pair_agreement_by_hand():
    """Agreement counts pairs untied in both rankings that are ordered alike."""
    assert pair_agreement([[0], [1], [2]], [[0], [1], [2]]) == 1.0
    assert pair_agreement([[0], [1], [2]], [[2], [1], [0]]) == 0.0
    assert pair_agreement([[0, 1], [2]], [[1], [0], [2]]) == 1.0   # the tied pair (0, 1) is skipped
    assert scores_to_ranking([0.5, 2.0, 0.5]) == [[1], [0, 2]]
    assert math.isnan(pair_agreement([[0, 1]], [[0], [1]]))   # no pair untied in both


def test_usable_drops_all_tied_comparisons():
    """A comparison whose ranking is one tie group teaches nothing and is dropped."""
    rows = [{"ranking": [[0, 1, 2]]}, {"ranking": [[1], [0, 2]]}]
    assert usable(rows) == rows[1:]
