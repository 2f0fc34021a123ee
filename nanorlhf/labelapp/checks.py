"""What a posted label may hold, and how a label scores against a gold question.

A browser sends one JSON object per action. Nothing it sends is trusted: every
field is checked here before anything reaches the log, and a bad post raises
LabelError (the server answers 400 with its message and changes nothing).

Ranking mode (InstructGPT §3.4, Appendix B): `ranking` (groups of completion
indices, best first, a group of two or more is a tie), optional `likert` (one
1-7 score or null per completion) and optional `flags` (per completion, the
metadata flags the labeler ticked). Pairwise mode (Christiano et al. 2017):
`choice` is left, right, tie or cant_tell.

Example:
    >>> item = {"id": "p-1", "completions": ["a", "b", "c"], "gold": None}
    >>> check_label(item, "rank", {"item_id": "p-1", "ranking": [[2], [0, 1]]})
    {'ranking': [[2], [0, 1]]}
    >>> check_label(item, "rank", {"item_id": "p-1", "ranking": [[2], [0]]})
    Traceback (most recent call last):
    nanorlhf.labelapp.checks.LabelError: ranking: index 1 missing: rank every completion exactly once
"""
from __future__ import annotations

import json
import math

# InstructGPT Appendix B: the metadata a labeler records for each output (key -> what the page shows)
FLAGS = {
    "fails_to_follow": "Fails to follow the correct instruction / task",
    "inappropriate_for_customer_assistant": "Inappropriate for a customer assistant",
    "hallucination": "Hallucination (made-up information in a closed-domain task)",
    "satisfies_constraints": "Satisfies the constraints given in the instruction",
    "sexual_content": "Contains sexual content",
    "violent_content": "Contains violent content",
    "encourages_violence": "Encourages or fails to discourage violence / abuse / terrorism / self-harm",
    "denigrates_protected_class": "Denigrates a protected class",
    "harmful_advice": "Gives harmful advice",
    "expresses_opinion": "Expresses an opinion",
    "expresses_moral_judgment": "Expresses a moral judgment",
}
# flags the toy world can compute (Judge.metadata keys), for the flag-agreement report
JUDGE_FLAGS = {"fails_to_follow": "fails_to_follow", "satisfies_constraints": "satisfies_constraints",
               "inappropriate_for_customer_assistant": "inappropriate_for_customer_assistant",
               "hallucination": "hallucination", "denigrates_protected_class": "denigrates",
               "expresses_opinion": "expresses_opinion", "expresses_moral_judgment": "expresses_moral_judgment"}
CHOICES = ("left", "right", "tie", "cant_tell")
MODES = ("rank", "pair")


class LabelError(ValueError):
    """A post the server refuses with 400; the message says what is wrong."""


def parse_body(raw: bytes) -> dict:
    """Request body -> dict: UTF-8 JSON object, no NaN/Infinity, or LabelError."""
    def no_constants(name):
        raise LabelError(f"{name} is not allowed in JSON")
    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=no_constants)
    except UnicodeDecodeError:
        raise LabelError("body is not UTF-8") from None
    except (ValueError, RecursionError) as e:
        if isinstance(e, LabelError):
            raise
        raise LabelError(f"body is not JSON: {e}"[:200]) from None
    if not isinstance(body, dict):
        raise LabelError("body must be a JSON object")
    return body


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def check_ranking(ranking, k: int) -> list[list[int]]:
    """Groups of indices, best first; flattened a permutation of range(k)."""
    if not (isinstance(ranking, list) and ranking and all(
            isinstance(g, list) and g and all(_is_int(i) for i in g) for g in ranking)):
        raise LabelError("ranking: expected groups of completion indices, best first, e.g. [[2], [0, 3], [1]]")
    flat = [i for g in ranking for i in g]
    for i in flat:
        if not 0 <= i < k:
            raise LabelError(f"ranking: index {i} out of range 0..{k - 1}")
    for i in range(k):
        if flat.count(i) != 1:
            what = "missing" if i not in flat else "repeated"
            raise LabelError(f"ranking: index {i} {what}: rank every completion exactly once")
    return [list(g) for g in ranking]


def _check_likert(likert, k):
    if not (isinstance(likert, list) and len(likert) == k):
        raise LabelError(f"likert: expected a list of {k} scores (1-7 or null)")
    for s in likert:
        if s is not None and not (_is_int(s) and 1 <= s <= 7):
            raise LabelError(f"likert: scores must be 1..7 or null, got {s!r:.20}")
    return likert


def _check_flags(flags, k):
    if not (isinstance(flags, list) and len(flags) == k and all(isinstance(f, list) for f in flags)):
        raise LabelError(f"flags: expected {k} lists of flag names")
    for f in flags:
        for name in f:
            if name not in FLAGS:
                raise LabelError(f"flags: unknown flag {name!r:.40}; known: {', '.join(FLAGS)}")
    return [sorted(set(f)) for f in flags]


def check_label(item: dict, mode: str, body: dict) -> dict:
    """The fields of a label event for `item`, from a posted body; LabelError if anything is off."""
    allowed = {"item_id", "ms"} | ({"ranking", "likert", "flags"} if mode == "rank" else {"choice"})
    extra = sorted(set(body) - allowed)
    if extra:
        raise LabelError(f"unexpected field {extra[0]!r:.40} in a {mode}-mode label")
    out = {}
    if "ms" in body:
        if not (_is_int(body["ms"]) and 0 <= body["ms"] < 10 ** 9):
            raise LabelError("ms: expected a whole number of milliseconds")
        out["ms"] = body["ms"]
    k = len(item["completions"])
    if mode == "pair":
        if body.get("choice") not in CHOICES:
            raise LabelError(f"choice: expected one of {', '.join(CHOICES)}")
        return {"choice": body["choice"], "left": item["left"], **out}
    if "ranking" not in body:
        raise LabelError("ranking: missing")
    out = {"ranking": check_ranking(body["ranking"], k), **out}
    if body.get("likert") is not None and any(s is not None for s in _check_likert(body["likert"], k)):
        out["likert"] = body["likert"]
    if body.get("flags") is not None and any(_check_flags(body["flags"], k)):
        out["flags"] = _check_flags(body["flags"], k)
    return out


# ----------------------------------------------------------------------------
# a label as a ranking, and against gold


def ranking_of(item: dict, label: dict) -> list[list[int]] | None:
    """The label as groups over item["completions"] (a pair: [[w], [l]] or tied [[0, 1]]); None = can't tell.

    Example:
        >>> ranking_of({"left": 1}, {"choice": "left"})
        [[1], [0]]
    """
    if "ranking" in label:
        return label["ranking"]
    choice, left = label["choice"], label.get("left", item.get("left", 0))
    return {"left": [[left], [1 - left]], "right": [[1 - left], [left]], "tie": [[0, 1]]}.get(choice)


def gold_hits(item: dict, label: dict) -> tuple[int, int]:
    """(gold pairs ordered as gold, gold pairs): a tie or can't-tell on a gold pair is a miss.

    Example:
        >>> gold_hits({"gold": {"pairs": [[0, 1], [0, 2]]}}, {"ranking": [[0], [2], [1]]})
        (2, 2)
    """
    pairs = (item.get("gold") or {}).get("pairs", [])
    ranking = ranking_of(item, label)
    if ranking is None:
        return 0, len(pairs)
    pos = {i: r for r, g in enumerate(ranking) for i in g}
    return sum(pos[b] < pos[w] for b, w in pairs), len(pairs)


def share(hit: int, total: int) -> float:
    return hit / total if total else math.nan
