"""The labeling app's queue, gold questions, pairwise mode, agreement report and exports (label.py,
nanorlhf/labelapp): labels are given over HTTP to a server on a free loopback port, then read back."""
import json
import os

import pytest

import label
from nanorlhf.infra.config import parse_config
from nanorlhf.infra.jsonl import COMPARISON, PAIR, read_jsonl
from nanorlhf.labelapp.agreement import cohen_kappa, export, report_text
from nanorlhf.labelapp.events import human_comparisons
from nanorlhf.rankings import scores_to_ranking
from nanorlhf.world.judge import Judge
from test_label import call, queue, running, state, world  # noqa: F401  (world is a fixture)


def rank_by(server, score, wrong_gold=False):
    """Label every item best first by score(item, text), equal scores tied; gold answered backwards if wrong_gold."""
    while (st := state(server))["item"]:
        item = server.log.items[st["item"]["id"]]
        ranking = scores_to_ranking([score(item, t) for t in item["completions"]])
        if item.get("gold") and wrong_gold:
            best = item["gold"]["pairs"][0][0]
            ranking = [[i] for i in range(len(item["completions"])) if i != best] + [[best]]
        status, reply, _ = call(server, "POST", "/api/label", {"item_id": item["id"], "ranking": ranking})
        assert status == 200, reply


def test_queue_mixes_gold_at_the_rate_and_overlaps_across_labelers(world):
    """Gold questions come at the set rate (never first), with the demonstration as the known winner;
    real items are the same for two labelers, shown in a per-labeler order that is recorded."""
    a, b = queue(world, labeler="alice", n=20, gold_rate=0.1), queue(world, labeler="bob", n=20, gold_rate=0.1)
    golds = [it for it in a if it["gold"]]
    assert len(a) == 20 and len(golds) == 2 and not a[0]["gold"]
    demos = {d["id"]: d["response"] for d in world["demos"]}
    for g in golds:
        winner = {w for w, _ in g["gold"]["pairs"]}
        assert len(winner) == 1 and g["completions"][winner.pop()] == demos[g["prompt_id"]]
    real_a, real_b = [it for it in a if not it["gold"]], [it for it in b if not it["gold"]]
    assert [it["id"] for it in real_a] == [it["id"] for it in real_b]
    assert all(sorted(x["completions"]) == sorted(y["completions"]) for x, y in zip(real_a, real_b))
    assert any(x["order"] != y["order"] for x, y in zip(real_a, real_b))
    src = {r["id"]: r["completions"] for r in world["rows"]}
    assert all([src[it["prompt_id"]][i] for i in it["order"]] == it["completions"] for it in real_a)


def test_gold_agreement_is_shown_and_low_scorers_are_marked(world, tmp_path):
    """The page state shows agreement with gold so far; under 75% it is flagged, the report marks the labels, and the
    pairs exports leave them out unless asked (then marked)."""
    path = str(tmp_path / "dave.jsonl")
    with running(path, queue(world, labeler="dave", n=8, gold_rate=0.25), labeler="dave") as server:
        rank_by(server, lambda item, t: len(t), wrong_gold=True)
        gold = state(server)["gold"]
        assert gold["total"] > 0 and gold["agree"] < 0.75 * gold["total"] and gold["below_cutoff"]
    assert "BELOW 75% CUTOFF" in report_text([path])
    rows = human_comparisons([path])
    assert len(rows) == 6 and all(r["below_cutoff"] and r["gold_agreement"] < 0.75 for r in rows)
    counts = export([path], str(tmp_path / "out"))
    assert counts["comparisons.jsonl"] == 6 and counts["pairs.jsonl"] == counts["hh.jsonl"] == 0  # left out
    export([path], str(tmp_path / "kept"), keep_below_cutoff=True)
    pairs = read_jsonl(tmp_path / "kept" / "pairs.jsonl", PAIR, unique_key=None)
    assert pairs and all(p["below_cutoff"] for p in pairs)


def test_pairwise_mode_records_sides_and_keeps_ties_apart(world, tmp_path):
    """Pairwise mode: left/right map to the completion shown there (order recorded); a tie is [[0, 1]];
    can't-tell is dropped; ties and can't-tells go to ties.jsonl, never to pairs or HH."""
    path = str(tmp_path / "erin.jsonl")
    shown = {}
    with running(path, queue(world, mode="pair", labeler="erin", n=4), mode="pair", labeler="erin") as server:
        bad = call(server, "POST", "/api/label", {"item_id": state(server)["item"]["id"], "choice": "up"})
        assert bad[0] == 400 and "choice" in bad[1]["error"]
        for choice in ("left", "right", "tie", "cant_tell"):
            item = state(server)["item"]
            shown[item["id"]] = (choice, item["completions"])
            assert len(item["completions"]) == 2
            assert call(server, "POST", "/api/label", {"item_id": item["id"], "choice": choice})[0] == 200
    rows = {r["prompt_id"]: r for r in human_comparisons([path])}
    assert len(rows) == 3
    for item_id, (choice, (left, right)) in shown.items():
        row = rows.get(item_id[2:])
        if choice == "cant_tell":
            assert row is None
            continue
        best = [row["completions"][i] for i in row["ranking"][0]]
        assert best == {"left": [left], "right": [right], "tie": sorted(row["completions"], key=row["completions"].index)}[choice]
    counts = export([path], str(tmp_path / "out"))
    assert counts["comparisons.jsonl"] == 3 and counts["pairs.jsonl"] == 2 and counts["ties.jsonl"] == 2
    ties = read_jsonl(tmp_path / "out" / "ties.jsonl", (), unique_key=None)
    assert sorted(t["label"] for t in ties) == ["cant_tell", "tie"]
    tied_texts = {t["a"] for t in ties} | {t["b"] for t in ties}
    for p in read_jsonl(tmp_path / "out" / "pairs.jsonl", PAIR, unique_key=None):
        assert not {p["chosen"], p["rejected"]} <= tied_texts


def test_human_comparisons_keep_rankings_for_train_rm(world, tmp_path):
    """human_comparisons: COMPARISON rows, source "human", K-way rankings kept with ties, likert only when complete,
    flags kept, gold and undone labels left out; exports are valid in every format and leave no temp files."""
    path = str(tmp_path / "fay.jsonl")
    with running(path, queue(world, labeler="fay", n=5, gold_rate=0.2), labeler="fay") as server:
        real, full = [], set()
        while (st := state(server))["item"]:
            k, item = len(st["item"]["completions"]), server.log.items[st["item"]["id"]]
            complete = len(real) % 2 == 1
            body = {"item_id": item["id"], "ranking": [[0, 1]] + [[i] for i in range(2, k)],
                    "likert": [4] * k if complete else [4] + [None] * (k - 1),
                    "flags": [["hallucination", "expresses_opinion"]] + [[]] * (k - 1)}
            assert call(server, "POST", "/api/label", body)[0] == 200
            if not item["gold"]:
                real.append(item["prompt_id"])
                full |= {item["prompt_id"]} if complete else set()
            last = item
        call(server, "POST", "/api/undo", {})  # takes back the last label
    rows = human_comparisons([path])
    assert [r["prompt_id"] for r in rows] == [p for p in real if p != last["prompt_id"]]
    for r in rows:
        assert r["source"] == "human" and r["ranking"][0] == [0, 1] and r["labeler"] == "fay"
        assert r["flags"][0] == {"expresses_opinion": True, "hallucination": True}
        assert r.get("likert") == ([4] * len(r["completions"]) if r["prompt_id"] in full else None)
    out = tmp_path / "out"
    assert all(r["below_cutoff"] for r in rows)  # fay ranks without reading, so the pairs are kept only when asked
    export([path], str(out), keep_below_cutoff=True)
    assert read_jsonl(out / "comparisons.jsonl", COMPARISON) == rows
    # every pair but the tie (0, 1), and none between two identical texts (the world may sample one twice)
    n_pairs = sum(1 for r in rows for i in range(len(r["completions"])) for j in range(i + 1, len(r["completions"]))
                  if (i, j) != (0, 1) and r["completions"][i] != r["completions"][j])
    hh = read_jsonl(out / "hh.jsonl", (), unique_key=None)
    assert len(read_jsonl(out / "pairs.jsonl", PAIR, unique_key=None)) == len(hh) == n_pairs
    assert all(h["chosen"].startswith("\n\nHuman: ") and "\n\nAssistant: " in h["rejected"] for h in hh)
    assert sorted(os.listdir(out)) == ["comparisons.jsonl", "hh.jsonl", "labelers.jsonl", "pairs.jsonl", "ties.jsonl"]


def test_report_agreement_kappa_and_simulated_labelers(world, tmp_path):
    """Two labelers with the same taste agree 100% (kappa 1) on overlapping items, opposite tastes 0%; ranking by the
    world's gold score agrees with the simulated labelers more than ranking against it."""
    assert cohen_kappa(["a", "a", "b", "b"], ["a", "a", "b", "a"]) == 0.5
    judge = Judge(world["data"])
    gold = lambda item, t: judge.gold(item["row"], t)
    paths = {}
    for name, score in (("gil", gold), ("hal", gold), ("ivy", lambda item, t: -gold(item, t))):
        paths[name] = str(tmp_path / f"{name}.jsonl")
        with running(paths[name], queue(world, labeler=name, n=8), labeler=name) as server:
            rank_by(server, score)
    text = report_text(list(paths.values()), data_dir=world["data"])
    assert "gil vs hal:" in text and "agreement 100.0%, Cohen's kappa 1.00" in text.split("gil vs hal:")[1].splitlines()[0]
    assert "agreement 0.0%" in text.split("gil vs ivy:")[1].splitlines()[0]
    sim = {line.split(":")[0].strip(): float(line.split("on ")[1].split("%")[0])
           for line in text.splitlines() if "agrees with simulated labelers" in line}
    assert sim["gil"] > 60 > sim["ivy"]


def test_label_py_report_and_export_flags(world, tmp_path, capsys):
    """`label.py --report=A B --export=DIR` prints the table and writes the exports; serving without a source is refused."""
    path = str(tmp_path / "jo.jsonl")
    with running(path, queue(world, labeler="jo", n=3), labeler="jo") as server:
        item = state(server)["item"]
        call(server, "POST", "/api/label", {"item_id": item["id"], "ranking": [[i] for i in range(len(item["completions"]))]})
    label.main(parse_config(label.Config, [f"--report={path}", f"--export={tmp_path / 'ex'}"]), [path])
    out = capsys.readouterr().out
    assert "jo" in out and "comparisons.jsonl (2 rows)" in out  # the same log twice: both kept, ids unique
    with pytest.raises(Exception, match="completions"):
        label.main(parse_config(label.Config, ["--labeler=kim", f"--log={tmp_path / 'none.jsonl'}"]))
    assert json.loads((tmp_path / "ex" / "labelers.jsonl").read_text().splitlines()[0])["labels"] == 2
