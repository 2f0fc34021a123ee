"""The row schemas of nanorlhf's data files, and the one function that checks a row against them.

A schema is a tuple of `Field`s: each names a key, its type, whether it is
required or may be empty, and an optional check of its value. `validate_row`
raises a `DataError` naming the field and the problem; `nanorlhf/infra/jsonl.py` adds
the file and line when it reads or writes (and re-exports everything here, so
`from nanorlhf.infra.jsonl import COMPARISON` keeps working).

The schemas: CORPUS (pretraining documents), PROMPT, DEMO (a prompt and its
demonstration), COMPARISON (K = 2..9 completions of one prompt, ranked best
first, with ties), PAIR ({prompt, chosen, rejected} interop).

Who labeled a comparison is its `source`, one of SOURCES:
  "sim"    a simulated labeler from the pool (nanorlhf/world/labelers.py): stands in for the paper's contractors
  "human"  a person, through label.py or imported pairs
  "ai"     the feedback model (nanorlhf/world/feedback.py; Constitutional AI / RLAIF): an LM answering a
           multiple-choice question under a written principle
Stages train on all three alike (train_rm.py, train_dpo.py, experiments/iterated.py's hybrid preference model);
`label_counts` keeps the human (sim or person) and AI label budgets apart for the lineage's accounting.

Example:
    >>> validate_row({"id": "p1", "org": "acme", "category": "qa", "prompt": "Hi?"}, PROMPT)
    >>> label_counts([{"source": "sim"}, {"source": "ai"}, {"source": "human"}])
    (2, 1)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

RANKING = "ranking"  # field type: groups of completion indices, best group first
SOURCES = ("sim", "human", "ai")  # who labeled a comparison: simulated labeler, person, feedback model


class DataError(ValueError):
    """A data file or row breaks its schema; knows `path`, `line`, `field` when it can.

    Example:
        >>> str(DataError("empty string", path="p.jsonl", line=3, field="prompt"))
        "p.jsonl:3: field 'prompt': empty string"
    """

    def __init__(self, problem, *, path=None, line=None, field=None):
        self.problem, self.path, self.line, self.field = problem, path, line, field
        where = "" if path is None else f"{path}: " if line is None else f"{path}:{line}: "
        what = "" if field is None else f"field '{field}': "
        super().__init__(f"{where}{what}{problem}")

    def at(self, path, line):  # the same problem, located at path:line
        return type(self)(self.problem, path=path, line=line, field=self.field)


_TYPES = (str, int, float, bool, dict, list[str], list[int], list[dict], RANKING)


@dataclass(frozen=True)
class Field:
    """One key of a row. A schema is a tuple of Fields; keys not named are kept unchecked.

    name: the key.
    type: str, int, float (finite), bool, dict, list[str], list[int], list[dict] or RANKING.
      bool is not an int here, and an int is accepted where a float is expected.
    required: a missing key is an error; an optional key that is present is still checked.
    nonempty: a str needs a non-whitespace character, a list or dict an item
      (and every string inside a list[str] is nonempty too).
    check: optional `check(value, row) -> str | None`: what is wrong, or None. Runs
      after the type check, so it may trust the type of the value.

    Example:
        >>> validate_row({"score": 0.5}, (Field("score", float),))
    """
    name: str
    type: object
    required: bool = True
    nonempty: bool = True
    check: Callable | None = None

    def __post_init__(self):
        if self.type not in _TYPES:
            raise TypeError(f"Field {self.name!r}: unsupported type {self.type!r}")


def json_type_name(value) -> str:
    """A value's type as error messages name it: "null" for None, else the Python type's name."""
    return "null" if value is None else type(value).__name__


def _check_value(value, t, nonempty, name):
    """Raise DataError(field=name) unless `value` has type `t` (and content, if nonempty)."""
    if t == RANKING:
        if not (isinstance(value, list) and value and all(
                isinstance(g, list) and g and all(_is_int(i) for i in g) for g in value)):
            raise DataError("expected a ranking, a list of groups of completion indices best "
                            f"first, e.g. [[2], [0, 3], [1]]; got {value!r:.80}", field=name)
        return
    item_type = getattr(t, "__args__", None)
    if item_type:  # list[X]
        if not isinstance(value, list):
            raise DataError(f"expected {t}, got {json_type_name(value)}", field=name)
        if nonempty and not value:
            raise DataError("empty list", field=name)
        for i, item in enumerate(value):
            _check_value(item, item_type[0], nonempty, f"{name}[{i}]")
        return
    ok = (_is_int(value) if t is int else
          (_is_int(value) or isinstance(value, float)) if t is float else isinstance(value, t))
    if not ok:
        raise DataError(f"expected {t.__name__}, got {json_type_name(value)} ({value!r:.40})", field=name)
    if t is float and not math.isfinite(value):
        raise DataError(f"{value} is not a finite number", field=name)
    if nonempty and t is str and not value.strip():
        raise DataError("empty string", field=name)
    if nonempty and t is dict and not value:
        raise DataError("empty object", field=name)


def _is_int(value):  # bool is not an int here
    return isinstance(value, int) and not isinstance(value, bool)


def validate_row(row, schema) -> None:
    """Raise DataError naming the field and the problem unless `row` fits `schema`.

    Example:
        >>> validate_row({"id": "c1", "kind": "wiki", "text": ""}, CORPUS)
        Traceback (most recent call last):
        nanorlhf.infra.schemas.DataError: field 'text': empty string
    """
    if not isinstance(row, dict):
        raise DataError(f"expected a JSON object, got {json_type_name(row)}")
    for f in schema:
        if f.name not in row:
            if f.required:
                raise DataError("missing key", field=f.name)
            continue
        _check_value(row[f.name], f.type, f.nonempty, f.name)
        problem = f.check(row[f.name], row) if f.check else None
        if problem:
            raise DataError(problem, field=f.name)


def _ranking_is_permutation(ranking, row):
    """Flattened, the ranking must be a permutation of range(len(completions))."""
    k = len(row["completions"])
    flat = [i for group in ranking for i in group]
    problems = [f"index {i} missing" for i in range(k) if i not in flat]
    problems += [f"index {i} duplicated" for i in sorted(set(flat)) if flat.count(i) > 1]
    problems += [f"index {i} out of range" for i in sorted(set(flat)) if not 0 <= i < k]
    if problems:
        return f"not a permutation of range({k}) (the {k} completions): " + ", ".join(problems)


def _two_to_nine(completions, row):  # InstructGPT §3.5: K = 4..9 ranked; K = 2 is a pair
    return None if 2 <= len(completions) <= 9 else f"has {len(completions)} items, expected 2..9"


def _likert(scores, row):  # one 1..7 score per completion
    k, bad = len(row["completions"]), [s for s in scores if not 1 <= s <= 7]
    return (f"has {len(scores)} scores for {k} completions" if len(scores) != k else
            f"scores must be 1..7, got {bad[0]}" if bad else None)


def _known_source(source, row):
    return None if source in SOURCES else f"must be one of {', '.join(map(repr, SOURCES))}, got {source!r}"


CORPUS = (Field("id", str), Field("kind", str), Field("text", str))
PROMPT = (Field("id", str), Field("org", str), Field("category", str), Field("prompt", str))
DEMO = PROMPT + (Field("response", str),)
COMPARISON = (
    Field("id", str), Field("prompt_id", str), Field("prompt", str),
    # an empty completion is data (the policy may end at once), so strings inside may be empty
    Field("completions", list[str], nonempty=False, check=_two_to_nine),
    Field("ranking", RANKING, check=_ranking_is_permutation),
    Field("labeler", str), Field("source", str, check=_known_source),
    Field("likert", list[int], required=False, check=_likert),
    Field("flags", list[dict], required=False, nonempty=False),
)
# as in COMPARISON, an empty answer is data (a policy may end at once); the prompt is not
PAIR = (Field("prompt", str), Field("chosen", str, nonempty=False), Field("rejected", str, nonempty=False))


def label_counts(comparisons) -> tuple[int, int]:
    """(human, AI) labels among comparison rows: "sim" and "human" rows count as human feedback, "ai" as AI."""
    ai = sum(1 for c in comparisons if c.get("source") == "ai")
    return len(comparisons) - ai, ai
