"""The labeling log: one JSON event per action, appended with fsync, replayed on restart.

Nothing is ever rewritten in place, so no label is lost. Event types:

    session   a server started on this log: {labeler, mode, instructions, source}
    item      one queue item, written before it is shown: {item}
    label     a labeler's answer: {item_id, ranking, likert?, flags?} or {item_id, choice, left}, ms?
    retract   undo: {target} names the label event it takes back

Every event also has {id, type, time, labeler}. Replaying the events in order rebuilds
the queue, the live labels, the undo stack and the gold score; a torn last line (a
crash mid-append) is skipped with a warning and every complete event is kept.

Example:
    log = LabelLog("labels/alice.jsonl")
    log.start("alice", "rank", "train", queue, source="val_prompts.jsonl")   # resumes if the log exists
    ev = log.label(log.current()["id"], {"ranking": [[1], [0], [2]]})
    log.undo()                                                             # appends a retract event
    rows = human_comparisons(["labels/alice.jsonl"])                       # for train_rm.py
"""
from __future__ import annotations

import fcntl
import os
import secrets
import threading
import time

from nanorlhf.infra.cli import UserError
from nanorlhf.infra.jsonl import COMPARISON, DataError, Field, append_jsonl, read_jsonl, validate_row
from nanorlhf.labelapp.checks import CHOICES, gold_hits, ranking_of, share

TYPES = ("session", "item", "label", "retract")
EVENT = (Field("id", str), Field("type", str, check=lambda t, row: None if t in TYPES else f"unknown type {t!r}"),
         Field("time", float), Field("labeler", str))
CUTOFF = 0.75  # InstructGPT §3.4: labelers were screened at about 75% agreement with researchers


def event_problem(ev: dict, items: dict) -> str | None:
    """What is wrong with one replayed event's own fields (None if nothing); items: those replayed so far."""
    kind = ev["type"]
    if kind == "session":
        return None if isinstance(ev.get("mode"), str) else "no mode"
    if kind == "item":
        it = ev.get("item")
        if not isinstance(it, dict) or not isinstance(it.get("id"), str):
            return "no item with an id"
        c = it.get("completions")
        return None if isinstance(c, list) and 2 <= len(c) <= 9 and all(isinstance(x, str) for x in c) else \
            "the item needs 2..9 completions (strings)"
    if kind == "retract":
        return None if isinstance(ev.get("target"), str) else "no target"
    if not isinstance(ev.get("item_id"), str):
        return "no item_id"
    k = len(items[ev["item_id"]]["completions"]) if ev["item_id"] in items else None
    if "choice" in ev:
        return None if ev["choice"] in CHOICES and ev.get("left", 0) in (0, 1) else \
            f"choice must be one of {', '.join(CHOICES)} (and left 0 or 1)"
    r = ev.get("ranking")
    if not (isinstance(r, list) and r and all(isinstance(g, list) and g for g in r)
            and all(isinstance(i, int) and not isinstance(i, bool) for g in r for i in g)):
        return "ranking must be a list of groups of completion indices, e.g. [[2], [0, 1]]"
    flat = sorted(i for g in r for i in g)
    if k is not None and flat != list(range(k)):
        return f"ranking {r} is not an order of the item's {k} completions"
    return None


class LogError(UserError, RuntimeError):
    """A log that cannot be resumed as asked (another labeler's or mode's, or in use)."""


class LabelLog:
    """The replayed state of one log file; `label`/`undo` append and apply one event each."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.labeler = self.mode = self.instructions = None
        self.items: dict[str, dict] = {}       # item id -> item, in queue order
        self.labels: dict[str, dict] = {}      # item id -> its live label event
        self.stack: list[str] = []             # live label event ids, oldest first (undo pops the last)
        self.retracted = 0
        self.n_events = 0
        self.lock = threading.Lock()           # the server's request threads share one log
        self._lock_file = None
        if os.path.exists(self.path):
            for n, ev in enumerate(read_jsonl(self.path, EVENT, allow_torn_tail=True), 1):
                problem = event_problem(ev, self.items)
                if problem:  # a hand-edited or foreign log: say where, rather than fail later with a KeyError
                    raise DataError(f"{self.path}: event {n} ({ev['type']}): {problem}")
                self._apply(ev)

    # -- replay ---------------------------------------------------------------

    def _apply(self, ev: dict) -> None:
        self.n_events += 1
        kind = ev["type"]
        if kind == "session":
            self.labeler, self.mode = ev["labeler"], ev["mode"]
            self.instructions = ev.get("instructions", "train")
        elif kind == "item":
            self.items.setdefault(ev["item"]["id"], ev["item"])
        elif kind == "label" and ev["item_id"] in self.items:
            old = self.labels.get(ev["item_id"])
            if old:  # never happens through the server; the newer label wins
                self.stack.remove(old["id"])
            self.labels[ev["item_id"]] = ev
            self.stack.append(ev["id"])
        elif kind == "retract" and ev["target"] in self.stack:
            self.stack.remove(ev["target"])
            self.labels = {i: e for i, e in self.labels.items() if e["id"] != ev["target"]}
            self.retracted += 1

    def _append(self, kind: str, **fields) -> dict:
        ev = {"id": f"ev-{secrets.token_hex(8)}", "type": kind, "time": round(time.time(), 3),
              "labeler": self.labeler, **fields}
        append_jsonl(self.path, ev, EVENT)  # one line, flush + fsync before we answer the browser
        self._apply(ev)
        return ev

    # -- the server's side ----------------------------------------------------

    def start(self, labeler: str, mode: str, instructions: str, queue: list[dict] | None, source: str = "") -> None:
        """Open the log for one server: lock it, check it is this labeler's, add missing queue items.

        queue: the items to label (None: resume with the items already in the log).
        """
        if self.labeler not in (None, labeler) or self.mode not in (None, mode):
            raise LogError(f"{self.path} belongs to labeler {self.labeler!r} in {self.mode!r} mode; "
                           f"use another --log for {labeler!r} in {mode!r} mode")
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._lock_file = open(self.path, "ab")  # held until the process ends, even by SIGKILL
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise LogError(f"{self.path} is in use by another label.py") from None
        self.labeler, self.mode, self.instructions = labeler, mode, instructions
        self._append("session", mode=mode, instructions=instructions, source=source)
        for item in queue or []:
            if item["id"] not in self.items:
                self._append("item", item=item)

    def close(self) -> None:
        """Release the lock taken by `start` (a dead process releases it by itself)."""
        if self._lock_file:
            self._lock_file.close()
            self._lock_file = None

    def current(self) -> dict | None:
        """The first item in queue order without a live label (None when all are done)."""
        return next((it for i, it in self.items.items() if i not in self.labels), None)

    def label(self, item_id: str, fields: dict) -> dict:
        """Append a label event for the current item (fields already checked by checks.check_label)."""
        return self._append("label", item_id=item_id, **fields)

    def undo(self) -> dict | None:
        """Append a retract event for the newest live label; None if there is none."""
        return self._append("retract", target=self.stack[-1]) if self.stack else None

    # -- summaries --------------------------------------------------------------

    def live_labels(self) -> list[tuple[dict, dict]]:
        """(item, label event) for every live label, in the order they were given."""
        by_id = {e["id"]: e for e in self.labels.values()}
        return [(self.items[by_id[i]["item_id"]], by_id[i]) for i in self.stack]

    def gold_score(self) -> tuple[int, int]:
        """(gold pairs answered as gold, gold pairs answered) over live labels of gold questions."""
        hits = [gold_hits(it, ev) for it, ev in self.live_labels() if it.get("gold")]
        return sum(h for h, _ in hits), sum(t for _, t in hits)

    def progress(self) -> tuple[int, int]:
        return len(self.labels), len(self.items)


def below_cutoff(agree: int, total: int, cutoff: float = CUTOFF) -> bool:
    """True when a labeler has answered gold questions and agrees with gold on under `cutoff` of them."""
    return total > 0 and agree / total < cutoff


def human_comparisons(log_paths, cutoff: float = CUTOFF) -> list[dict]:
    """COMPARISON rows (source "human") from labeling logs, for train_rm.py.

    Rankings stay K-way rankings (with likert and flags when given); a pairwise label
    is a K = 2 comparison; a tie is the tied ranking [[0, 1]] (no pair is trained on it);
    can't-tell and gold questions are left out. Each row also carries `gold_agreement`
    (nan-free: null when no gold was answered) and `below_cutoff` (gold agreement < cutoff).

    Example:
        rows = human_comparisons(["labels/alice.jsonl", "labels/bob.jsonl"])
        write_jsonl("human.jsonl", rows, COMPARISON)
    """
    out, seen = [], set()
    for path in log_paths:
        log = LabelLog(path)
        agree, total = log.gold_score()
        for item, ev in log.live_labels():
            ranking = ranking_of(item, ev)
            if item.get("gold") or ranking is None:
                continue
            cid = f"human-{ev['labeler']}-{item['id']}"
            while cid in seen:
                cid += "+"
            seen.add(cid)
            row = {"id": cid, "prompt_id": item["prompt_id"], "prompt": item["prompt"],
                   "completions": list(item["completions"]), "ranking": ranking, "labeler": ev["labeler"],
                   "source": "human", "mode": log.mode, "instructions": log.instructions,
                   "gold_agreement": None if not total else round(share(agree, total), 4),
                   "below_cutoff": below_cutoff(agree, total, cutoff)}
            if ev.get("likert") and all(s is not None for s in ev["likert"]):
                row["likert"] = ev["likert"]
            if ev.get("flags"):
                row["flags"] = [{name: True for name in f} for f in ev["flags"]]
            validate_row(row, COMPARISON)
            out.append(row)
    return out
