"""JSONL data files: read with validation, write atomically (pairs interop: pairs.py).

Every data file in nanorlhf (corpus, prompts, demonstrations, comparisons) is
JSON Lines: one JSON object per line, UTF-8. A clear error beats a silent bad
batch, so `read_jsonl` checks every line against a small declarative schema and
stops at the first problem, naming `file:line`, the field and what is wrong
(reliability.md check 5). Writers never leave half a file and never write NaN.

Example:
    >>> rows = [{"id": "p1", "org": "acme", "category": "qa", "prompt": "Hi?"}]
    >>> write_jsonl("/tmp/nanorlhf_doc.jsonl", rows, PROMPT)
    >>> read_jsonl("/tmp/nanorlhf_doc.jsonl", PROMPT) == rows
    True
"""
import json
import math
import os
import warnings
from dataclasses import dataclass
from typing import Callable, Iterator

from nanorlhf.fileio import atomic_write

RANKING = "ranking"  # field type: groups of completion indices, best group first


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


class _BrokenLine(DataError):  # not UTF-8 JSON at all: the only error a torn tail causes
    pass


# ----------------------------------------------------------------------------
# schema

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


def _json_name(value):  # a value's type, as messages name it
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
            raise DataError(f"expected {t}, got {_json_name(value)}", field=name)
        if nonempty and not value:
            raise DataError("empty list", field=name)
        for i, item in enumerate(value):
            _check_value(item, item_type[0], nonempty, f"{name}[{i}]")
        return
    ok = (_is_int(value) if t is int else
          (_is_int(value) or isinstance(value, float)) if t is float else isinstance(value, t))
    if not ok:
        raise DataError(f"expected {t.__name__}, got {_json_name(value)} ({value!r:.40})", field=name)
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
        nanorlhf.jsonl.DataError: field 'text': empty string
    """
    if not isinstance(row, dict):
        raise DataError(f"expected a JSON object, got {_json_name(row)}")
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


def _sim_or_human(source, row):
    return None if source in ("sim", "human") else f"must be 'sim' or 'human', got {source!r}"


CORPUS = (Field("id", str), Field("kind", str), Field("text", str))
PROMPT = (Field("id", str), Field("org", str), Field("category", str), Field("prompt", str))
DEMO = PROMPT + (Field("response", str),)
COMPARISON = (
    Field("id", str), Field("prompt_id", str), Field("prompt", str),
    # an empty completion is data (the policy may end at once), so strings inside may be empty
    Field("completions", list[str], nonempty=False, check=_two_to_nine),
    Field("ranking", RANKING, check=_ranking_is_permutation),
    Field("labeler", str), Field("source", str, check=_sim_or_human),
    Field("likert", list[int], required=False, check=_likert),
    Field("flags", list[dict], required=False, nonempty=False),
)
PAIR = (Field("prompt", str), Field("chosen", str), Field("rejected", str))

# ----------------------------------------------------------------------------
# reading


class _NonFinite(str):  # stands in for NaN/Infinity while parsing, so its field can be named
    pass


class _DuplicateKey(Exception):
    pass


def _parse_float(text):
    x = float(text)
    return x if math.isfinite(x) else _NonFinite(text)  # 1e999 overflows to inf


def _no_duplicate_keys(pairs):
    obj = dict(pairs)
    if len(obj) < len(pairs):
        raise _DuplicateKey(next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i])))
    return obj


def _find_nonfinite(obj):
    """(field path, original text) of the first NaN/Infinity in `obj`, else None."""
    stack = [("", obj)]  # a loop, not recursion: JSON may nest ~1000 deep
    while stack:
        where, value = stack.pop()
        if isinstance(value, _NonFinite):
            return where, str(value)
        if isinstance(value, dict):
            stack += reversed([(f"{where}.{k}" if where else k, v) for k, v in value.items()])
        elif isinstance(value, list):
            stack += reversed([(f"{where}[{i}]", v) for i, v in enumerate(value)])
    return None


def _parse_line(raw: bytes) -> dict:
    """bytes of one line -> dict, or DataError (without a location)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _BrokenLine(f"not valid UTF-8: byte 0x{raw[e.start]:02x} at byte {e.start + 1}") from None
    try:
        obj = json.loads(text, parse_constant=_NonFinite, parse_float=_parse_float,
                         object_pairs_hook=_no_duplicate_keys)
    except _DuplicateKey as e:
        raise DataError("key appears twice in one object", field=e.args[0]) from None
    except (ValueError, RecursionError) as e:  # also an int of 5000 digits, [[[[...]]]]
        where = f" at column {e.colno}" if isinstance(e, json.JSONDecodeError) else ""
        raise _BrokenLine(f"broken JSON{where}: {getattr(e, 'msg', e)}"[:200]) from None
    if not isinstance(obj, dict):
        raise DataError(f"expected a JSON object, got {_json_name(obj)}")
    hit = _find_nonfinite(obj)
    if hit:
        raise DataError(f"{hit[1]} is not allowed (JSON numbers must be finite)", field=hit[0])
    return obj


def iter_jsonl(path, schema, *, max_line_bytes=1_000_000, unique_key="id",
               allow_torn_tail=False) -> Iterator[dict]:
    """Yield the rows of a JSONL file one by one, each checked; see `read_jsonl`."""
    path = os.fspath(path)
    first_seen = {}  # unique key (as JSON) -> line number
    with open(path, "rb") as f:
        lineno = 0
        while raw := f.readline(max_line_bytes + 2):  # bounded: a huge line never sits in memory
            lineno += 1
            body = raw.rstrip(b"\r\n")
            if len(body) > max_line_bytes:
                raise DataError(f"line is longer than max_line_bytes={max_line_bytes}", path=path, line=lineno)
            if not body.strip():
                continue  # blank line
            try:
                row = _parse_line(body)
                validate_row(row, schema)
            except _BrokenLine as e:
                if allow_torn_tail and not raw.endswith(b"\n"):  # no newline: the last line
                    warnings.warn(f"{path}:{lineno}: skipping torn last line ({e.problem})", stacklevel=2)
                    return
                raise e.at(path, lineno) from None
            except DataError as e:
                raise e.at(path, lineno) from None
            if unique_key is not None and unique_key in row:
                key = json.dumps(row[unique_key], sort_keys=True)
                if key in first_seen:
                    raise DataError(f"duplicate value {row[unique_key]!r:.80}, first seen on line "
                                    f"{first_seen[key]}", path=path, line=lineno, field=unique_key)
                first_seen[key] = lineno
            yield row


def read_jsonl(path, schema, *, max_line_bytes=1_000_000, unique_key="id",
               allow_torn_tail=False) -> list[dict]:
    """Read a JSONL file into a list of dicts, raising DataError at the first bad line.

    Checked: UTF-8, line length, JSON syntax, no NaN/Infinity, one object per line,
    no key twice in an object, the schema, and `unique_key` unique across the file
    (None turns that off; rows without the key are not checked). Blank lines are
    skipped. With `allow_torn_tail`, a last line with no trailing newline that does
    not parse (a crash mid-append) is skipped with a warning instead of raising.

    Example:
        >>> read_jsonl("/tmp/nanorlhf_doc.jsonl", PROMPT)[0]["prompt"]
        'Hi?'
    """
    return list(iter_jsonl(path, schema, max_line_bytes=max_line_bytes,
                           unique_key=unique_key, allow_torn_tail=allow_torn_tail))

# ----------------------------------------------------------------------------
# writing


def _dumps(row, schema) -> bytes:
    """One row as one line of UTF-8 JSON (no newline); DataError if it cannot be."""
    if schema is not None:
        validate_row(row, schema)
    elif not isinstance(row, dict):
        raise DataError(f"expected a dict, got {_json_name(row)}")
    try:  # allow_nan=False: NaN/Infinity raise ValueError, never reach the disk
        return json.dumps(row, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (ValueError, TypeError) as e:  # also lone surrogates, non-JSON objects
        raise DataError(f"cannot be written as JSON: {e}") from None


def write_jsonl(path, rows, schema=None) -> None:
    """Write rows as JSONL atomically: a reader sees the old file or the new one, never half.

    Every row is serialised (and checked against `schema`, if given) before the
    disk is touched; then temp file in the same folder, flush, fsync, os.replace.
    A DataError names the line the row would have had.

    Example:
        >>> write_jsonl("/tmp/nanorlhf_doc.jsonl", [{"x": float("nan")}])
        Traceback (most recent call last):
        nanorlhf.jsonl.DataError: /tmp/nanorlhf_doc.jsonl:1: cannot be written as JSON: Out of range float values are not JSON compliant
    """
    path = os.fspath(path)
    lines = []
    for i, row in enumerate(rows):
        try:
            lines.append(_dumps(row, schema) + b"\n")
        except DataError as e:
            raise e.at(path, i + 1) from None
    data = b"".join(lines)
    atomic_write(path, lambda f: f.write(data))


def _end_torn_tail(path):
    """Before appending: end a complete last record that lacks its newline, drop a torn one."""
    try:
        f = open(path, "r+b")
    except FileNotFoundError:
        return
    with f:
        data = f.read()  # DEVIATION: reads the whole log; fine at toy scale
        if not data or data.endswith(b"\n"):
            return
        start = data.rfind(b"\n") + 1
        try:
            _parse_line(data[start:])
            f.write(b"\n")  # a complete record that only lacked its newline: keep it
        except _BrokenLine:
            warnings.warn(f"{path}: dropping torn last line ({len(data) - start} bytes)", stacklevel=3)
            f.truncate(start)
        except DataError:
            f.write(b"\n")  # complete JSON but bad: keep it, so the reader reports it
        f.flush()
        os.fsync(f.fileno())


def append_jsonl(path, row, schema=None) -> None:
    """Append one row as one line to an append-only log; flushed and fsynced on return.

    If a crash left a torn last line, it is dropped first (with a warning) so the new
    line starts on a line of its own. One writer per file.

    Example:
        >>> append_jsonl("/tmp/nanorlhf_doc.jsonl", {"id": "p2", "org": "acme",
        ...     "category": "qa", "prompt": "Bye?"}, PROMPT)
    """
    path = os.fspath(path)
    try:
        line = _dumps(row, schema) + b"\n"
    except DataError as e:
        raise e.at(path, None) from None
    _end_torn_tail(path)
    with open(path, "ab") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())
