"""The labeling app (label.py, nanorlhf/labelapp): safe on a shared machine
and the log loses nothing, at the HTTP level with a server on a free loopback port, plus the queue,
gold questions, agreement, exports and human_comparisons for train_rm.py."""
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

import label
from nanorlhf.infra.jsonl import read_jsonl, write_jsonl
from nanorlhf.labelapp.events import LabelLog, LogError
from nanorlhf.labelapp.items import build_queue, demo_rows
from nanorlhf.labelapp.page import page_html
from nanorlhf.labelapp.server import LabelServer
from nanorlhf.world import build_world, write_world

HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> & "q"'


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Tiny world; rows of stand-in SFT samples (the first holds a hostile completion); its demos."""
    root = tmp_path_factory.mktemp("labelworld")
    data = str(root / "data")
    write_world(build_world("tiny", 0), data)
    rows = demo_rows(data, n=24, k_min=4, k_max=6)
    rows[0]["completions"][1] = HOSTILE
    demos = read_jsonl(os.path.join(data, "sft.jsonl"), (), unique_key=None)
    path = str(root / "samples.jsonl")
    write_jsonl(path, rows)
    return {"data": data, "rows": rows, "demos": demos, "samples": path}


def queue(world, mode="rank", labeler="alice", n=10, gold_rate=0.0):
    return build_queue(world["rows"], world["demos"], n=n, mode=mode, gold_rate=gold_rate, seed=0, labeler=labeler)


@contextmanager
def running(path, items=None, mode="rank", labeler="alice", **kw):
    """A LabelServer on a free loopback port, in a thread."""
    log = LabelLog(path)
    log.start(labeler, mode, "train", items)
    server = LabelServer(log, **kw)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        log.close()


def call(server, method, path, body=None, headers=None, token=True, origin=True, raw=None):
    """(status, parsed JSON or text, headers) of one request made with http.client."""
    h = {"Content-Type": "application/json"} if method == "POST" else {}
    if token:
        h["X-Token"] = server.token
    if origin and method == "POST":
        h["Origin"] = server.origin
    h.update(headers or {})
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request(method, path, body=data, headers=h)
    r = conn.getresponse()
    text = r.read().decode("utf-8", "replace")
    conn.close()
    is_json = r.getheader("Content-Type", "").startswith("application/json")
    return r.status, json.loads(text) if is_json else text, dict(r.getheaders())


def state(server):
    return call(server, "GET", "/api/state")[1]


def rank(server, ranking=None, **extra):
    item = state(server)["item"]
    ranking = ranking or [[i] for i in range(len(item["completions"]))]
    return call(server, "POST", "/api/label", {"item_id": item["id"], "ranking": ranking, **extra})


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


# ----------------------------------------------------------------------------
# check 10: safe on a shared machine


def test_binds_loopback_and_refuses_foreign_host(world, tmp_path):
    """Default bind is 127.0.0.1; a foreign Host header (DNS rebinding) gets 421 on GET and POST, logging nothing."""
    assert label.Config().host == "127.0.0.1"
    with running(str(tmp_path / "a.jsonl"), queue(world)) as server:
        assert server.server_address[0] == "127.0.0.1"
        before = read_bytes(server.log.path)
        for method in ("GET", "POST"):
            status, reply, _ = call(server, method, "/api/state" if method == "GET" else "/api/undo", {},
                                    headers={"Host": f"evil.example:{server.port}"})
            assert status == 421 and "not this server" in reply["error"]
        assert call(server, "GET", "/api/state", headers={"Host": f"localhost:{server.port}"})[0] == 200
        assert read_bytes(server.log.path) == before


def test_page_needs_url_token_and_has_strict_csp(world, tmp_path):
    """The page needs the printed URL's token; its CSP forbids inline script; the token is embedded for the JS."""
    with running(str(tmp_path / "a.jsonl"), queue(world)) as server:
        assert call(server, "GET", "/", token=False)[0] == 403
        assert call(server, "GET", "/?token=wrong", token=False)[0] == 403
        status, page, headers = call(server, "GET", f"/?token={server.token}", token=False)
        assert status == 200 and f'content="{server.token}"' in page and "helpfulness first" in page
        assert "truthfulness and harmlessness first" in page_html("t", "eval", "pair")
        csp = headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
        assert page.count("<script") == page.count('<script src="/static/app.js" defer></script>') == 1
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert call(server, "GET", "/static/app.js", token=False)[0] == 200
        assert call(server, "GET", "/static/../events.py", token=False)[0] == 404
        assert call(server, "GET", "/api/state", token=False)[0] == 403


def test_posts_need_token_and_matching_origin(world, tmp_path):
    """A POST without the session token, with a wrong one, or with a missing/foreign Origin is refused (403), logging nothing."""
    with running(str(tmp_path / "a.jsonl"), queue(world)) as server:
        item = state(server)["item"]
        body = {"item_id": item["id"], "ranking": [[i] for i in range(len(item["completions"]))]}
        before = read_bytes(server.log.path)
        assert call(server, "POST", "/api/label", body, token=False)[0] == 403
        assert call(server, "POST", "/api/label", body, token=False, headers={"X-Token": "x" * 43})[0] == 403
        assert call(server, "POST", "/api/label", body, origin=False)[0] == 403
        assert call(server, "POST", "/api/label", body, headers={"Origin": "http://evil.example"})[0] == 403
        assert call(server, "POST", "/api/label", body, headers={"Origin": f"http://127.0.0.1:{server.port + 1}"})[0] == 403
        assert read_bytes(server.log.path) == before
        assert call(server, "POST", "/api/label", body)[0] == 200


def test_model_text_never_enters_html(world, tmp_path):
    """A completion holding <script>/<img onerror> reaches the page only as JSON data (app.js renders it with textContent)."""
    with running(str(tmp_path / "a.jsonl"), queue(world)) as server:
        status, page, _ = call(server, "GET", f"/?token={server.token}", token=False)
        assert "__pwned" not in page and "onerror" not in page
        status, st, headers = call(server, "GET", "/api/state")
        assert HOSTILE in st["item"]["completions"]
        assert headers["Content-Type"].startswith("application/json") and headers["X-Content-Type-Options"] == "nosniff"
        js = read_bytes(os.path.join(os.path.dirname(label.__file__), "nanorlhf/labelapp/static/app.js")).decode()
        assert "innerHTML" not in js.replace("never innerHTML", "") and "insertAdjacentHTML" not in js


def test_body_over_cap_gets_413(world, tmp_path):
    """A request body over max_body bytes gets 413 before it is read, and nothing is logged."""
    with running(str(tmp_path / "a.jsonl"), queue(world), max_body=1000) as server:
        before = read_bytes(server.log.path)
        item = state(server)["item"]
        big = {"item_id": item["id"], "ranking": [[0]], "pad": "x" * 5000}
        status, reply, _ = call(server, "POST", "/api/label", big)
        assert status == 413 and "cap" in reply["error"]
        assert read_bytes(server.log.path) == before


BAD_BODIES = [
    (b"{not json", "not JSON"), (b"\xff\xfe", "not UTF-8"), (b"[1, 2]", "JSON object"),
    (b'{"item_id": "ID", "ranking": [[NaN]]}', "NaN"), (b'{"item_id": "ID"}', "ranking: missing"),
    (b'{"item_id": 3, "ranking": [[0]]}', "item_id"), (b'{"item_id": "ID", "ranking": [[0], [0]]}', "ranking"),
    (b'{"item_id": "ID", "ranking": [[99]]}', "out of range"), (b'{"item_id": "ID", "ranking": [[true]]}', "ranking"),
    (b'{"item_id": "ID", "ranking": "3142"}', "ranking"), (b'{"item_id": "ID", "RANK": [[0]], "ranking": [[0]]}', "unexpected"),
    (b'{"item_id": "ID", "ranking": FULL, "likert": [8, 1, 1, 1, 1, 1]}', "likert"),
    (b'{"item_id": "ID", "ranking": FULL, "flags": [["rude"], [], [], [], [], []]}', "unknown flag"),
    (b'{"item_id": "ID", "ranking": FULL, "ms": -5}', "ms"),
]


def test_malformed_posts_get_400_and_change_nothing(world, tmp_path):
    """Every malformed label post gets a 400 JSON error naming the problem; the log stays byte-identical."""
    with running(str(tmp_path / "a.jsonl"), queue(world)) as server:
        item = state(server)["item"]
        k = len(item["completions"])
        full = json.dumps([[i] for i in range(k)]).encode()
        before = read_bytes(server.log.path)
        for raw, words in BAD_BODIES:
            raw = raw.replace(b"ID", item["id"].encode()).replace(b"FULL", full)
            raw = raw.replace(b"[8, 1, 1, 1, 1, 1]", json.dumps([8] + [1] * (k - 1)).encode())
            raw = raw.replace(b'[["rude"], [], [], [], [], []]', json.dumps([["rude"]] + [[]] * (k - 1)).encode())
            status, reply, _ = call(server, "POST", "/api/label", raw=raw)
            assert status == 400 and words in reply["error"], (raw, reply)
        status, reply, _ = call(server, "POST", "/api/label", raw=b"{}", headers={"Content-Type": "text/plain"})
        assert status == 400 and "Content-Type" in reply["error"]
        assert call(server, "POST", "/api/undo", {"x": 1})[0] == 400
        assert call(server, "POST", "/api/label", {"item_id": "not-current", "ranking": [[0]]})[0] == 409
        assert read_bytes(server.log.path) == before
        assert state(server)["progress"]["done"] == 0


# ----------------------------------------------------------------------------
# check 11: the log loses nothing


def test_label_and_undo_only_append(world, tmp_path):
    """Each action appends one event; undo appends a retract naming the undone event; earlier bytes never change."""
    with running(str(tmp_path / "a.jsonl"), queue(world)) as server:
        first = state(server)["item"]["id"]
        before = read_bytes(server.log.path)
        status, reply, _ = rank(server, likert=[5] + [None] * (len(state(server)["item"]["completions"]) - 1))
        assert status == 200 and reply["state"]["progress"]["done"] == 1 and reply["state"]["item"]["id"] != first
        after_label = read_bytes(server.log.path)
        assert after_label.startswith(before) and after_label.count(b"\n") == before.count(b"\n") + 1
        status, undo, _ = call(server, "POST", "/api/undo", {})
        assert status == 200 and undo["retracted"] == reply["event"]
        assert undo["state"]["item"]["id"] == first and undo["state"]["progress"]["done"] == 0
        events = read_jsonl(server.log.path, ())
        assert [e["type"] for e in events[-2:]] == ["label", "retract"] and events[-1]["target"] == reply["event"]
        assert read_bytes(server.log.path).startswith(after_label)
        assert call(server, "POST", "/api/undo", {})[0] == 409  # nothing left to undo


def test_restart_replays_progress_and_torn_tail(world, tmp_path):
    """A restart on the same log restores progress and the current item without re-adding items; a torn last line is skipped."""
    path = str(tmp_path / "a.jsonl")
    items = queue(world)
    with running(path, items) as server:
        for _ in range(3):
            assert rank(server)[0] == 200
        call(server, "POST", "/api/undo", {})
        current, n_items = state(server)["item"]["id"], len(server.log.items)
    with open(path, "ab") as f:
        f.write(b'{"id": "ev-torn", "type": "label", "ti')  # a crash mid-append
    with pytest.warns(UserWarning, match="torn"):
        log = LabelLog(path)
    assert log.progress() == (2, n_items) and log.current()["id"] == current
    with pytest.warns(UserWarning, match="torn"), running(path, items) as server:
        st = state(server)
        assert st["progress"] == {"done": 2, "total": n_items} and st["item"]["id"] == current
        assert rank(server)[0] == 200
    assert b"ev-torn" not in read_bytes(path) and LabelLog(path).progress()[0] == 3


def test_log_belongs_to_one_labeler_and_one_server(world, tmp_path):
    """A log cannot be resumed by another labeler or mode, nor served twice at once."""
    path = str(tmp_path / "a.jsonl")
    with running(path, queue(world)):
        with pytest.raises(LogError, match="in use"):
            LabelLog(path).start("alice", "rank", "train", None)
    with pytest.raises(LogError, match="belongs to"):
        LabelLog(path).start("bob", "rank", "train", None)
    with pytest.raises(LogError, match="belongs to"):
        LabelLog(path).start("alice", "pair", "train", None)


def _start_label_py(args):
    """label.py in a subprocess; returns (process, an object `call` can talk to)."""
    root = os.path.dirname(os.path.abspath(label.__file__))
    p = subprocess.Popen([sys.executable, "label.py", *args], cwd=root, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    seen = []
    for line in p.stdout:
        seen.append(line)
        if line.startswith("open "):
            url = urlsplit(line.split()[1])
            return p, SimpleNamespace(port=url.port, token=url.query.split("=", 1)[1],
                                      origin=f"http://127.0.0.1:{url.port}")
    p.wait()
    raise AssertionError("label.py did not start:\n" + "".join(seen))


def test_sigkill_keeps_every_acknowledged_event(world, tmp_path):
    """SIGKILL the server after acknowledged posts, tear the tail by hand, restart: every acknowledged event is there."""
    path = str(tmp_path / "crash.jsonl")
    args = [f"--completions={world['samples']}", "--labeler=carol", f"--log={path}", "--n=8"]
    p, server = _start_label_py(args)
    try:
        acked = []
        for _ in range(4):
            status, reply, _ = rank(server)
            assert status == 200
            acked.append(reply["event"])
        status, reply, _ = call(server, "POST", "/api/undo", {})
        acked.append(reply["event"])
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    with open(path, "ab") as f:
        f.write(b'{"id": "ev-half", "type": "lab')
    p, server = _start_label_py(args)
    try:
        assert state(server)["progress"] == {"done": 3, "total": 8}
        ids = [e["id"] for e in read_jsonl(path, ())]
        assert set(acked) <= set(ids) and "ev-half" not in ids
        assert rank(server)[0] == 200
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    assert LabelLog(path).progress() == (4, 8)
