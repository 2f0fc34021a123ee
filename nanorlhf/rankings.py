"""Rankings, ranks and pairs: the one vocabulary for what labelers say, and every conversion once.

Three ways to write the same judgement of K completions of one prompt:

    ranking  list of tie groups of completion indices, best first    [[2], [0, 3], [1]]
    ranks    each completion's place, lower = better, equal = tie     [1, 2, 0, 1]
    pairs    every untied (winner, loser) index pair                  [(0, 1), (2, 0), (2, 1), (3, 1), (2, 3)]

A ranking is what comparisons.jsonl stores (schema COMPARISON in jsonl.py) and what a
labeler returns; ranks are what the RM loss reads (reward.rm_ranking_loss); pairs are
the terms of InstructGPT eq. 1. TRL pairs are rows {"prompt", "chosen", "rejected"}, the
format TRL and most RLHF tools read: a K-way comparison becomes its untied pairs and an
imported pair a K = 2 comparison.

Example:
    ranks = ranking_to_ranks([[2], [0, 3], [1]])      # [1, 2, 0, 1]
    ranks_to_pairs(ranks)                             # [(0, 1), (2, 0), (2, 1), (3, 1), (2, 3)]
    scores_to_ranking([0.1, 0.9, 0.1])                # [[1], [0, 2]]
"""
from __future__ import annotations

import hashlib
import json

from nanorlhf.infra.jsonl import COMPARISON, PAIR, read_jsonl, validate_row, write_jsonl

# -----------------------------------------------------------------------------
# ranking <-> ranks <-> pairs


def ranking_to_ranks(ranking: list[list[int]]) -> list[int]:
    """Tie groups, best first -> each completion's place (K,).

    Example: ranking_to_ranks([[2], [0, 3], [1]]) == [1, 2, 0, 1]   (2 best; 0 and 3 tie; 1 worst)
    """
    ranks = [0] * sum(len(g) for g in ranking)
    for r, group in enumerate(ranking):
        for i in group:
            ranks[i] = r
    return ranks


def scores_to_ranking(scores: list[float]) -> list[list[int]]:
    """Scores (higher = better) -> tie groups, best first; equal scores tie.

    Example: scores_to_ranking([0.1, 0.9, 0.1]) == [[1], [0, 2]]
    """
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    groups: list[list[int]] = []
    for i in order:
        if groups and scores[groups[-1][0]] == scores[i]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def ranks_to_pairs(ranks) -> list[tuple[int, int]]:
    """All untied pairs as (winner, loser), in order of (i, j) with i < j.

    Example: ranks_to_pairs([0, 2, 1, 1]) == [(0, 1), (0, 2), (0, 3), (2, 1), (3, 1)]
    """
    ranks = [int(r) for r in ranks]
    pairs = []
    for i in range(len(ranks)):
        for j in range(i + 1, len(ranks)):
            if ranks[i] < ranks[j]:
                pairs.append((i, j))
            elif ranks[j] < ranks[i]:
                pairs.append((j, i))
    return pairs


def ranking_to_pairs(ranking: list[list[int]]) -> list[tuple[int, int]]:
    """Tie groups, best first -> untied (winner, loser) pairs, as ranks_to_pairs orders them."""
    return ranks_to_pairs(ranking_to_ranks(ranking))


def pair_counts(a: list[list[int]], b: list[list[int]]) -> tuple[int, int]:
    """(pairs the two rankings order the same way, pairs untied in both)."""
    ra, rb = ranking_to_ranks(a), ranking_to_ranks(b)
    same = total = 0
    for i in range(len(ra)):
        for j in range(i + 1, len(ra)):
            da, db = ra[i] - ra[j], rb[i] - rb[j]
            if da and db:
                total += 1
                same += (da > 0) == (db > 0)
    return same, total


def pair_agreement(a: list[list[int]], b: list[list[int]]) -> float:
    """Fraction of pairs untied in both rankings that the two order the same way (nan if none)."""
    same, total = pair_counts(a, b)
    return same / total if total else float("nan")


# -----------------------------------------------------------------------------
# comparisons (rows of comparisons.jsonl) as pairs


def every_ranking(c: dict) -> list[list[list[int]]]:
    """All rankings a comparison row carries of its completions: its labeler's, then (validation rows) a second
    labeler's and one per labeler group's."""
    return [c["ranking"]] + ([c["second_ranking"]] if "second_ranking" in c else []) + c.get("group_rankings", [])


def usable(comparisons: list[dict], key: str = "ranking") -> list[dict]:
    """Comparisons with at least one untied pair (an all-tied ranking teaches nothing): what the RM and DPO train on."""
    return [c for c in comparisons if ranking_to_pairs(c[key])]


def comparisons_to_two_way(comparisons: list[dict]) -> list[dict]:
    """Each K-way comparison as its untied pairs, each a K = 2 comparison (ties dropped): the batching the paper
    warns against, kept for the ablation. Weights and other fields carry over."""
    out = []
    for c in comparisons:
        for w, l in ranking_to_pairs(c["ranking"]):
            out.append({**c, "completions": [c["completions"][w], c["completions"][l]], "ranking": [[0], [1]]})
    return out


def comparisons_to_trl_pairs(comparisons) -> list[dict]:
    """Each K-way comparison as TRL pairs {"prompt", "chosen", "rejected"}: C(K,2) minus ties, best group first.

    InstructGPT §3.5 trains the RM on all C(K,2) pairs of one ranking; a tie says
    neither is better, so it gives no pair.

    Example:
        >>> c = {"id": "c1", "prompt_id": "p1", "prompt": "Q", "completions": ["a", "b", "c"],
        ...      "ranking": [[2], [0, 1]], "labeler": "L1", "source": "sim"}
        >>> [(p["chosen"], p["rejected"]) for p in comparisons_to_trl_pairs([c])]
        [('c', 'a'), ('c', 'b')]
    """
    pairs = []
    for c in comparisons:
        validate_row(c, COMPARISON)
        groups, texts = c["ranking"], c["completions"]
        for hi, better in enumerate(groups):
            for worse in groups[hi + 1:]:
                pairs += [{"prompt": c["prompt"], "chosen": texts[a], "rejected": texts[b]}
                          for a in better for b in worse]
    return pairs


def _short_hash(*parts):
    return hashlib.sha1(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()[:12]


def trl_pairs_to_comparisons(pairs, labeler="import", source="human") -> list[dict]:
    """Each TRL pair {"prompt", "chosen", "rejected"} as a K = 2 comparison.

    Ids are a short sha1 of the content, so importing the same file twice gives
    the same ids; a repeated identical pair gets a "-2", "-3", ... suffix.

    Example:
        >>> c = trl_pairs_to_comparisons([{"prompt": "Q", "chosen": "a", "rejected": "b"}])[0]
        >>> c["completions"], c["ranking"], c["id"].startswith("pair-")
        (['a', 'b'], [[0], [1]], True)
    """
    out, seen = [], {}
    for pair in pairs:
        validate_row(pair, PAIR)
        cid = "pair-" + _short_hash(pair["prompt"], pair["chosen"], pair["rejected"])
        seen[cid] = seen.get(cid, 0) + 1
        out.append({"id": cid if seen[cid] == 1 else f"{cid}-{seen[cid]}",
                    "prompt_id": "p-" + _short_hash(pair["prompt"]), "prompt": pair["prompt"],
                    "completions": [pair["chosen"], pair["rejected"]], "ranking": [[0], [1]],
                    "labeler": labeler, "source": source})
    return out


def export_trl_pairs(comparisons, path) -> int:
    """Write the untied pairs of `comparisons` to a PAIR JSONL file; return how many."""
    pairs = comparisons_to_trl_pairs(comparisons)
    write_jsonl(path, pairs, PAIR)
    return len(pairs)


def import_trl_pairs(path, labeler="import", source="human") -> list[dict]:
    """Read a PAIR JSONL file (e.g. from TRL) as K = 2 comparisons; extra keys are ignored."""
    return trl_pairs_to_comparisons(read_jsonl(path, PAIR, unique_key=None), labeler, source)
