"""Tests for nanorlhf/infra/jsonl.py: bad data gets a clear error,
writes are atomic and NaN-free, and comparisons <-> pairs round-trips."""
import json
import os

import pytest
import torch

from nanorlhf.infra import jsonl
from nanorlhf.infra.jsonl import (COMPARISON, CORPUS, DEMO, PAIR, PROMPT, DataError, Field, append_jsonl,
                            iter_jsonl, read_jsonl, validate_row, write_jsonl)
from nanorlhf.rankings import comparisons_to_trl_pairs, export_trl_pairs, import_trl_pairs, trl_pairs_to_comparisons


def comparison(**over):
    row = {"id": "c1", "prompt_id": "p1", "prompt": "Name a fruit.",
           "completions": ["apple", "rock", "pear", "banana"], "ranking": [[0], [2, 3], [1]],
           "labeler": "L1", "source": "sim", "likert": [7, 1, 6, 6], "flags": [{"toxic": False}]}
    row.update(over)
    return row


def write_lines(tmp_path, *lines, name="data.jsonl"):
    """Write raw lines (str or bytes), each followed by a newline."""
    path = tmp_path / name
    path.write_bytes(b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines))
    return path


def expect_error(path, schema, line, field, *words, **kw):
    """read_jsonl must raise DataError naming path:line, the field and the given words."""
    with pytest.raises(DataError) as info:
        read_jsonl(path, schema, **kw)
    msg = str(info.value)
    assert f"{path}:{line}:" in msg, msg
    assert info.value.line == line
    if field is not None:
        assert f"'{field}'" in msg and info.value.field == field, msg
    for w in words:
        assert w in msg, msg
    return msg


GOOD = json.dumps(comparison())

# ----------------------------------------------------------------------------
# reading: the valid case


def test_valid_files_read_back_for_every_schema(tmp_path):
    """Valid rows of each schema read back unchanged; blank lines skipped; extra keys kept."""
    prompt = {"id": "p1", "org": "acme", "category": "qa", "prompt": "Hi?", "world": {"x": 1}}
    cases = [(CORPUS, {"id": "d1", "kind": "wiki", "text": "Ünïcode ✓"}), (PROMPT, prompt),
             (DEMO, {**prompt, "response": "Hello."}), (COMPARISON, comparison()),
             (PAIR, {"prompt": "Q", "chosen": "a", "rejected": "b"})]
    for schema, row in cases:
        path = write_lines(tmp_path, "", json.dumps(row), "   ", json.dumps(row | {"id": "z"}))
        assert read_jsonl(path, schema) == [row, row | {"id": "z"}]
        assert list(iter_jsonl(path, schema)) == [row, row | {"id": "z"}]


def test_last_line_without_newline_is_read_if_complete(tmp_path):
    """A complete last record lacking its newline is data, not a torn tail."""
    path = tmp_path / "a.jsonl"
    path.write_text(GOOD + "\n" + json.dumps(comparison(id="c2")))
    assert [r["id"] for r in read_jsonl(path, COMPARISON)] == ["c1", "c2"]

# ----------------------------------------------------------------------------
# reading: one test per failure, each naming file:line and the field


def test_non_utf8_bytes(tmp_path):
    """Non-UTF-8 bytes are reported with file:line and the offending byte."""
    path = write_lines(tmp_path, GOOD, b'{"id": "c\xff2"}')
    expect_error(path, COMPARISON, 2, None, "not valid UTF-8", "0xff")


def test_over_long_line(tmp_path):
    """A line over max_line_bytes is refused (and never read whole into memory)."""
    path = write_lines(tmp_path, GOOD, json.dumps(comparison(id="c2", prompt="x" * 5000)))
    expect_error(path, COMPARISON, 2, None, "max_line_bytes=1000", max_line_bytes=1000)
    assert len(read_jsonl(path, COMPARISON, max_line_bytes=len(GOOD) + 5000)) == 2


def test_broken_json_names_the_column(tmp_path):
    """Broken JSON names file:line and the JSON error's column."""
    path = write_lines(tmp_path, GOOD, json.dumps(comparison(id="c2")), '{"id": "c3", "prompt": oops}')
    expect_error(path, COMPARISON, 3, None, "broken JSON", "column 24")


@pytest.mark.parametrize("const", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_and_infinity_are_refused(tmp_path, const):
    """NaN, Infinity, -Infinity (and overflowing 1e999) are refused, naming the field."""
    path = write_lines(tmp_path, GOOD, GOOD.replace('"id": "c1"', '"id": "c2"')
                       .replace('"likert": [7, 1, 6, 6]', f'"likert": [7, 1, {const}, 6]'))
    expect_error(path, COMPARISON, 2, "likert[2]", const, "finite")


def test_non_object_line(tmp_path):
    """A line holding a JSON array (or number, string) instead of an object is refused."""
    path = write_lines(tmp_path, GOOD, '["c2", "not", "an", "object"]')
    expect_error(path, COMPARISON, 2, None, "expected a JSON object, got list")


def test_missing_key(tmp_path):
    """A missing required key is named."""
    row = comparison(id="c2")
    del row["labeler"]
    expect_error(write_lines(tmp_path, GOOD, json.dumps(row)), COMPARISON, 2, "labeler", "missing key")


@pytest.mark.parametrize("field,value,words", [
    ("prompt", 42, ["expected str, got int"]),
    ("completions", "apple", ["expected list[str], got str"]),
    ("completions[1]", None, ["expected str, got null"]),
    ("likert[0]", True, ["expected int, got bool"]),  # bool is not an int here
    ("flags", {"toxic": True}, ["expected list[dict], got dict"]),
    ("ranking", [0, 1, 2, 3], ["expected a ranking"]),
])
def test_wrong_type(tmp_path, field, value, words):
    """A value of the wrong type is named with what was expected and what was found."""
    row = comparison(id="c2")
    name, _, index = field.partition("[")
    if index:
        row[name][int(index[:-1])] = value
    else:
        row[name] = value
    expect_error(write_lines(tmp_path, GOOD, json.dumps(row)), COMPARISON, 2, field, *words)


def test_float_field_accepts_ints_but_not_bools_or_nan():
    """float fields take finite ints and floats; bool and NaN are refused by validate_row."""
    schema = (Field("score", float),)
    validate_row({"score": 0.5}, schema)
    validate_row({"score": 2}, schema)
    for bad in (True, float("nan"), float("inf"), "0.5"):
        with pytest.raises(DataError, match="'score'"):
            validate_row({"score": bad}, schema)


@pytest.mark.parametrize("field,value", [("prompt", ""), ("labeler", "   ")])
def test_empty_string(tmp_path, field, value):
    """Empty (or whitespace-only) strings and empty lists are refused in nonempty fields."""
    row = comparison(id="c2", **{field: value})
    expect_error(write_lines(tmp_path, GOOD, json.dumps(row)), COMPARISON, 2, field, "empty")


def test_empty_completion_is_data_but_too_few_completions_are_not(tmp_path):
    """A policy may answer with nothing, so an empty completion is kept; fewer than 2 completions is refused."""
    row = comparison(id="c2", completions=["apple", "", "pear", "banana"])
    assert len(read_jsonl(write_lines(tmp_path, GOOD, json.dumps(row)), COMPARISON)) == 2
    row = comparison(id="c3", completions=[], ranking=[])
    with pytest.raises(DataError, match="completions"):
        read_jsonl(write_lines(tmp_path, GOOD, json.dumps(row)), COMPARISON)


def test_ranking_not_a_permutation(tmp_path):
    """A ranking that is not a permutation says which index is missing / duplicated."""
    row = comparison(id="c2", ranking=[[0], [2, 0], [1]])
    msg = expect_error(write_lines(tmp_path, GOOD, json.dumps(row)), COMPARISON, 2, "ranking",
                       "not a permutation of range(4)")
    assert "index 3 missing" in msg and "index 0 duplicated" in msg
    row = comparison(id="c2", ranking=[[0], [1], [2], [3], [4]])
    expect_error(write_lines(tmp_path, json.dumps(row)), COMPARISON, 1, "ranking", "index 4 out of range")


def test_duplicate_id_names_first_line(tmp_path):
    """A duplicate id names the line of its first occurrence; unique_key=None allows it."""
    path = write_lines(tmp_path, GOOD, json.dumps(comparison(id="c2")), "", GOOD)
    expect_error(path, COMPARISON, 4, "id", "'c1'", "first seen on line 1")
    assert len(read_jsonl(path, COMPARISON, unique_key=None)) == 3


def test_duplicate_key_in_one_object(tmp_path):
    """A key given twice in one object (JSON keeps the last silently) is refused."""
    path = write_lines(tmp_path, GOOD[:-1] + ', "labeler": "L2"}')
    expect_error(path, COMPARISON, 1, "labeler", "twice")


@pytest.mark.parametrize("over,field,words", [
    ({"completions": ["a"], "ranking": [[0]], "likert": [1]}, "completions", ["1 items, expected 2..9"]),
    ({"source": "robot"}, "source", ["'sim', 'human', 'ai'", "'robot'"]),
    ({"likert": [7, 1, 6]}, "likert", ["3 scores for 4"]),
    ({"likert": [7, 1, 6, 8]}, "likert", ["1..7, got 8"]),
])
def test_comparison_field_checks(tmp_path, over, field, words):
    """COMPARISON's own rules: 2..9 completions, source sim/human/ai, likert 1..7 per completion."""
    path = write_lines(tmp_path, json.dumps(comparison(**over)))
    expect_error(path, COMPARISON, 1, field, *words)


def test_ai_feedback_comparisons_are_valid_and_counted_apart(tmp_path):
    """A feedback-model row (source "ai", K = 2, an extra ai_prob key) passes COMPARISON on write and read,
    and label_counts keeps it apart from the sim and human rows."""
    from nanorlhf.world.feedback import ai_comparisons
    rows = ai_comparisons([({"id": "p9", "prompt": "Name a fox."}, "Pip.", "Pip, you fool.")],
                          torch.tensor([0.8]), "ai1")
    mixed = [comparison(), comparison(id="c2", source="human"), *rows]
    write_jsonl(tmp_path / "mixed.jsonl", mixed, COMPARISON)
    back = read_jsonl(tmp_path / "mixed.jsonl", COMPARISON)
    assert back == mixed and back[2]["source"] == "ai" and back[2]["ranking"] == [[0], [1]]
    assert jsonl.label_counts(back) == (2, 1) and jsonl.SOURCES == ("sim", "human", "ai")


def test_optional_fields_may_be_absent():
    """likert and flags are optional; flags may be an empty list."""
    row = comparison(flags=[])
    del row["likert"]
    validate_row(row, COMPARISON)

# ----------------------------------------------------------------------------
# torn tail (the labeling app's append-only log)


def test_torn_tail_raises_by_default_and_is_skipped_when_allowed(tmp_path):
    """A torn last line fails by default; allow_torn_tail skips it with a warning, keeping the rest."""
    path = tmp_path / "log.jsonl"
    path.write_bytes((GOOD + "\n" + GOOD.replace("c1", "c2")[:37]).encode())
    expect_error(path, COMPARISON, 2, None, "broken JSON")
    with pytest.warns(UserWarning, match="torn last line"):
        assert [r["id"] for r in read_jsonl(path, COMPARISON, allow_torn_tail=True)] == ["c1"]


def test_torn_line_in_the_middle_is_never_skipped(tmp_path):
    """allow_torn_tail only forgives the last line: a broken line with a newline after it is an error."""
    path = write_lines(tmp_path, GOOD, GOOD[:30], json.dumps(comparison(id="c3")))
    expect_error(path, COMPARISON, 2, None, "broken JSON", allow_torn_tail=True)


def test_append_after_torn_tail_drops_it_and_keeps_every_event(tmp_path):
    """append_jsonl after a crash: the torn tail is dropped, complete events kept, file reads clean."""
    path = tmp_path / "log.jsonl"
    append_jsonl(path, comparison(), COMPARISON)
    with open(path, "ab") as f:
        f.write(GOOD.encode()[:25])  # crash mid-append
    with pytest.warns(UserWarning, match="dropping torn"):
        append_jsonl(path, comparison(id="c2"), COMPARISON)
    assert [r["id"] for r in read_jsonl(path, COMPARISON)] == ["c1", "c2"]
    path.write_text(GOOD)  # complete record lacking its newline: kept, not dropped
    append_jsonl(path, comparison(id="c2"))
    assert [r["id"] for r in read_jsonl(path, COMPARISON)] == ["c1", "c2"]


def test_append_fsyncs_and_refuses_nan(tmp_path, monkeypatch):
    """Each append is fsynced; a NaN row raises before anything is written."""
    calls = []
    real_fsync = os.fsync
    monkeypatch.setattr(jsonl.os, "fsync", lambda fd: calls.append(fd) or real_fsync(fd))
    path = tmp_path / "log.jsonl"
    append_jsonl(path, {"id": "e1", "x": 1.0})
    assert len(calls) == 1
    with pytest.raises(DataError, match="log.jsonl"):
        append_jsonl(path, {"id": "e2", "x": float("nan")})
    assert path.read_text() == '{"id": "e1", "x": 1.0}\n'

# ----------------------------------------------------------------------------
# atomic writes


def test_write_is_atomic_utf8_and_leaves_no_temp_file(tmp_path):
    """write_jsonl writes raw UTF-8 (not \\u escapes), one row per line, and no temp file remains."""
    rows = [{"id": "d1", "kind": "wiki", "text": "naïve café ✓"}, {"id": "d2", "kind": "x", "text": "b"}]
    path = tmp_path / "corpus.jsonl"
    write_jsonl(path, rows, CORPUS)
    assert "naïve café ✓" in path.read_text(encoding="utf-8")
    assert read_jsonl(path, CORPUS) == rows
    assert os.listdir(tmp_path) == ["corpus.jsonl"]


def test_write_never_writes_nan_and_keeps_the_old_file(tmp_path):
    """A NaN anywhere refuses the whole write (naming the row's line); the old file is untouched."""
    path = tmp_path / "out.jsonl"
    write_jsonl(path, [{"a": 1}])
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(DataError, match=r"out.jsonl:2: .*not JSON compliant"):
            write_jsonl(path, [{"a": 2}, {"a": [1.0, bad]}])
    assert path.read_text() == '{"a": 1}\n'
    assert os.listdir(tmp_path) == ["out.jsonl"]


def test_write_failing_half_way_leaves_old_file_and_no_temp(tmp_path, monkeypatch):
    """If the write fails after the temp file exists, the old file survives and the temp is removed."""
    path = tmp_path / "out.jsonl"
    write_jsonl(path, [{"a": 1}])

    def boom(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(jsonl.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_jsonl(path, [{"a": 2}])
    assert path.read_text() == '{"a": 1}\n'
    assert os.listdir(tmp_path) == ["out.jsonl"]


def test_write_checks_schema_before_touching_disk(tmp_path):
    """With a schema, a bad row raises DataError naming line and field; nothing is written."""
    path = tmp_path / "p.jsonl"
    rows = [{"prompt": "x", "chosen": "a", "rejected": "b"}, {"chosen": "a", "rejected": "b"}]
    with pytest.raises(DataError, match=r"p.jsonl:2: field 'prompt': missing key"):
        write_jsonl(path, rows, PAIR)
    assert not path.exists()

# ----------------------------------------------------------------------------
# comparisons <-> pairs


def test_k4_with_one_tie_gives_five_pairs():
    """K=4 has C(4,2)=6 pairs; one tie removes one: 5 (chosen, rejected) pairs, best first."""
    pairs = comparisons_to_trl_pairs([comparison()])  # ranking [[0], [2, 3], [1]]
    got = {(p["chosen"], p["rejected"]) for p in pairs}
    assert len(pairs) == 5 and got == {("apple", "pear"), ("apple", "banana"), ("apple", "rock"),
                                       ("pear", "rock"), ("banana", "rock")}
    assert all(p["prompt"] == "Name a fruit." for p in pairs)


def test_pairs_round_trip_through_files(tmp_path):
    """export_trl_pairs then import_trl_pairs then comparisons_to_trl_pairs gives back the same pair set."""
    comps = [comparison(), comparison(id="c2", prompt="Q2", completions=["x", "y"], ranking=[[1], [0]],
                                      likert=[2, 5])]
    path = tmp_path / "pairs.jsonl"
    assert export_trl_pairs(comps, path) == 6
    imported = import_trl_pairs(path)
    for c in imported:
        validate_row(c, COMPARISON)
        assert c["ranking"] == [[0], [1]] and c["source"] == "human" and c["labeler"] == "import"
    assert comparisons_to_trl_pairs(imported) == comparisons_to_trl_pairs(comps) == read_jsonl(path, PAIR)
    assert [c["id"] for c in import_trl_pairs(path)] == [c["id"] for c in imported]  # deterministic


def test_repeated_pairs_get_distinct_ids():
    """Two identical pairs become two comparisons with distinct, deterministic ids."""
    p = {"prompt": "Q", "chosen": "a", "rejected": "b"}
    comps = trl_pairs_to_comparisons([p, p, p | {"chosen": "c"}])
    ids = [c["id"] for c in comps]
    assert len(set(ids)) == 3 and ids[1] == ids[0] + "-2"
    assert comps[0]["prompt_id"] == comps[2]["prompt_id"]


def test_field_rejects_unknown_type():
    """A schema typo (an unsupported type) fails when the schema is defined, not when data is read."""
    with pytest.raises(TypeError):
        Field("x", list)
