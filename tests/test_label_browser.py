"""The labeling page in a real browser: headless Chromium driven over the DevTools pipe
(nanorlhf/labelapp/browser.py, no extra Python package). Skipped, with the reason, where chromium is absent."""
import warnings

import pytest

from nanorlhf.infra.jsonl import read_jsonl
from nanorlhf.labelapp.browser import Browser, find_chromium
from test_label import HOSTILE, queue, running, world  # noqa: F401  (world is a fixture)


@pytest.fixture(scope="module")
def browser():
    if not find_chromium():
        reason = "chromium not found: browser test skipped (apt-get install chromium to run it)"
        warnings.warn(reason)
        pytest.skip(reason)
    with Browser() as b:
        yield b


def events(path, kind):
    return [e for e in read_jsonl(path, (), allow_torn_tail=True) if e["type"] == kind]


def test_rank_by_keyboard_and_hostile_text_stays_text(world, browser, tmp_path):
    """Ranking mode in Chromium: hostile completions render as text (no element, no script run, no CSP error);
    typing an order with a tie and Enter logs that ranking; u undoes it; the order parser and drag helpers work."""
    b, path = browser, str(tmp_path / "alice.jsonl")
    with running(path, queue(world, n=3)) as server:
        b.goto(server.url)
        b.wait_for("document.getElementById('prompt').textContent.length > 0")
        texts = b.eval("[...document.querySelectorAll('#cards .card > .text')].map(e => e.textContent)")
        assert HOSTILE in texts
        assert b.eval("document.querySelectorAll('#task img, #task script').length") == 0
        assert b.eval("window.__pwned === undefined") and b.errors() == []
        assert b.eval("document.activeElement.id") == "order"
        k = len(texts)
        # e.g. K = 5: "5=4 3 2" -> [[4, 3], [2], [1]] and 1 is implied last -> [[4, 3], [2], [1], [0]]
        b.type_text(f"{k}={k - 1}" + "".join(str(i) for i in range(k - 2, 1, -1)) + "\n")
        b.wait_for("document.getElementById('progress').textContent.startsWith('2 /')")
        label = events(path, "label")[-1]
        assert label["ranking"] == [[k - 1, k - 2]] + [[i] for i in range(k - 3, -1, -1)] and label["ms"] >= 0
        b.key("u")  # the order box is empty again: u is undo
        b.wait_for("document.getElementById('progress').textContent.startsWith('1 /')")
        assert events(path, "retract")[-1]["target"] == label["id"]
        app = "window.labelApp"
        assert b.eval(f"{app}.parseOrder('3=1 4 2', 4).ranking") == [[2, 0], [3], [1]]
        assert b.eval(f"{app}.parseOrder('31 4', 4).ranking") == [[2], [0], [3], [1]]  # the last is implied
        assert "twice" in b.eval(f"{app}.parseOrder('33', 4).error")
        assert b.eval(f"{app}.moveTo([[0], [1], [2]], 2, 0, 'before')") == [[2], [0], [1]]
        b.eval("document.getElementById('order').focus()")
        b.type_text("12")
        b.eval("document.querySelector('#chips .sep').click()")  # click ">" between 1 and 2: tie them
        assert b.eval("document.getElementById('order').value") == "1=2"
        assert b.errors() == []


def test_pair_mode_by_keyboard(world, browser, tmp_path):
    """Pairwise mode in Chromium: ← prefers the left text, t ties, c can't tell; each key logs one label with the side order."""
    b, path = browser, str(tmp_path / "bob.jsonl")
    with running(path, queue(world, mode="pair", labeler="bob", n=4), mode="pair", labeler="bob") as server:
        b.goto(server.url)
        b.wait_for("document.getElementById('left').textContent.length > 0")
        left = b.eval("document.getElementById('left').textContent")
        for n, key in enumerate(["ArrowLeft", "t", "c"]):
            b.key(key)
            b.wait_for(f"document.getElementById('progress').textContent.startsWith('{n + 2} /')")
        labels = events(path, "label")
        assert [e["choice"] for e in labels] == ["left", "tie", "cant_tell"]
        first = server.log.items[labels[0]["item_id"]]
        assert first["completions"][labels[0]["left"]] == left
        assert b.errors() == []
