"""JSONL data files: read with validation, write atomically (schemas: schemas.py; pairs interop: pairs.py).

Every data file in nanorlhf (corpus, prompts, demonstrations, comparisons) is
JSON Lines: one JSON object per line, UTF-8. A clear error beats a silent bad
batch, so `read_jsonl` checks every line against a small declarative schema
(nanorlhf/infra/schemas.py) and stops at the first problem, naming `file:line`, the
field and what is wrong. Writers never leave half a
file and never write NaN.

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
from typing import Iterator

from nanorlhf.infra.fileio import atomic_write
# the schemas live in schemas.py, re-exported here: `from nanorlhf.infra.jsonl import COMPARISON, read_jsonl`
from nanorlhf.infra.schemas import (COMPARISON, CORPUS, DEMO, PAIR, PROMPT, RANKING, SOURCES, DataError,  # noqa: F401
                              Field, json_type_name, label_counts, validate_row)


class _BrokenLine(DataError):  # not UTF-8 JSON at all: the only error a torn tail causes
    pass


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
        raise DataError(f"expected a JSON object, got {json_type_name(obj)}")
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
               allow_torn_tail=False, nonempty: str = "") -> list[dict]:
    """Read a JSONL file into a list of dicts, raising DataError at the first bad line.

    Checked: UTF-8, line length, JSON syntax, no NaN/Infinity, one object per line,
    no key twice in an object, the schema, and `unique_key` unique across the file
    (None turns that off; rows without the key are not checked). Blank lines are
    skipped. With `allow_torn_tail`, a last line with no trailing newline that does
    not parse (a crash mid-append) is skipped with a warning instead of raising. With
    `nonempty` (what the rows are, e.g. "demonstrations"), a file without rows is a DataError.

    Example:
        >>> read_jsonl("/tmp/nanorlhf_doc.jsonl", PROMPT)[0]["prompt"]
        'Hi?'
    """
    rows = list(iter_jsonl(path, schema, max_line_bytes=max_line_bytes,
                           unique_key=unique_key, allow_torn_tail=allow_torn_tail))
    if nonempty and not rows:
        raise DataError(f"{path}: no {nonempty} in it (the file is empty)")
    return rows

# ----------------------------------------------------------------------------
# writing


def _dumps(row, schema) -> bytes:
    """One row as one line of UTF-8 JSON (no newline); DataError if it cannot be."""
    if schema is not None:
        validate_row(row, schema)
    elif not isinstance(row, dict):
        raise DataError(f"expected a dict, got {json_type_name(row)}")
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
        nanorlhf.infra.schemas.DataError: /tmp/nanorlhf_doc.jsonl:1: cannot be written as JSON: Out of range float values are not JSON compliant
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
