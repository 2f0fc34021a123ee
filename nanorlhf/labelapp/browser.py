"""Headless Chromium driven over the DevTools protocol pipe, with no Python package beyond the stdlib.

`--remote-debugging-pipe` makes Chromium read commands on file descriptor 3 and
write replies and events on descriptor 4, each a JSON message ended by a NUL
byte. We hand it two os.pipe()s, moved to fds 3 and 4 by a three-line Python trampoline.
Used by tests/test_label_browser.py and to regenerate the docs screenshots:

    python -m nanorlhf.labelapp.browser --shots=docs      # docs/label_rank.png, docs/label_pair.png

Example:
    with Browser() as b:
        b.goto(server.url)
        b.type_text("3142\\n")
        assert b.eval("document.title") == "nanorlhf labeling"
"""
from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

# In the child: move our two pipe ends to fds 3 and 4 (via fds >= 10, so neither overwrites the other), exec chromium
TRAMPOLINE = ("import fcntl, os, sys; r, w = (fcntl.fcntl(int(x), fcntl.F_DUPFD_CLOEXEC, 10) for x in sys.argv[1:3]); "
              "os.dup2(r, 3); os.dup2(w, 4); os.execv(sys.argv[3], sys.argv[3:])")
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "/usr/bin/chromium")


class BrowserError(RuntimeError):
    pass


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


class Browser:
    """One headless Chromium with one page (a flattened DevTools session)."""

    def __init__(self, exe: str | None = None, width: int = 1280, height: int = 860, timeout: float = 20):
        exe = exe or find_chromium()
        if not exe:
            raise BrowserError("chromium not found")
        self.timeout, self.events, self.buf, self.next_id, self.session = timeout, [], b"", 0, None
        self.profile = tempfile.mkdtemp(prefix="nanorlhf-chromium-")
        to_chrome, from_chrome = os.pipe(), os.pipe()
        args = [exe, "--headless=new", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
                f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self.proc = subprocess.Popen(
            [sys.executable, "-c", TRAMPOLINE, str(to_chrome[0]), str(from_chrome[1]), *args],
            pass_fds=(to_chrome[0], from_chrome[1]), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome[0])
        os.close(from_chrome[1])
        self.wfd, self.rfd = to_chrome[1], from_chrome[0]
        try:
            target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
            self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                     session=False)["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                self.send(f"{domain}.enable")
            self.send("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        except BaseException:
            self.close()
            raise

    # -- the protocol ---------------------------------------------------------

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("timed out waiting for chromium")
            if select.select([self.rfd], [], [], left)[0]:
                chunk = os.read(self.rfd, 1 << 20)
                if not chunk:
                    raise BrowserError("chromium closed the DevTools pipe")
                self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params: dict | None = None, session: bool = True) -> dict:
        """Send one command and return its result; events read meanwhile are kept in self.events."""
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self.wfd, data):]
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise BrowserError(f"{method}: {m['error'].get('message')}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for i, m in enumerate(self.events):
                if m.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    # -- the page ---------------------------------------------------------------

    def goto(self, url: str) -> None:
        self.events = [m for m in self.events if m.get("method") != "Page.loadEventFired"]
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def eval(self, expression: str):
        """Evaluate JS in the page (promises awaited) and return its value."""
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise BrowserError(f"JS error: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.05)
        raise BrowserError(f"timed out waiting for {expression}")

    def key(self, key: str) -> None:
        """Press and release one key, as a person would: a character, Enter, Escape or Arrow*."""
        special = {"\n": ("Enter", 13, "\r"), "Enter": ("Enter", 13, "\r"), "Escape": ("Escape", 27, ""),
                   "ArrowLeft": ("ArrowLeft", 37, ""), "ArrowRight": ("ArrowRight", 39, "")}
        name, code, text = special[key] if key in special else (key, ord(key.upper()), key)
        down = {"type": "keyDown", "key": name, "windowsVirtualKeyCode": code, "text": text}
        if not text:
            down["type"] = "rawKeyDown"
            del down["text"]
        self.send("Input.dispatchKeyEvent", down)
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": name, "windowsVirtualKeyCode": code})

    def type_text(self, text: str) -> None:
        for ch in text:
            self.key(ch)

    def errors(self) -> list[str]:
        """JS exceptions, console errors and CSP violations seen so far."""
        out = []
        for m in self.events:
            p = m.get("params", {})
            if m.get("method") == "Runtime.exceptionThrown":
                out.append(p["exceptionDetails"].get("text", "exception"))
            elif m.get("method") == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(p["entry"]["text"])
            elif m.get("method") == "Runtime.consoleAPICalled" and p.get("type") == "error":
                out.append(str(p.get("args")))
        return out

    def screenshot(self, path: str) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.send("Browser.close", session=False)
        except (BrowserError, OSError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.wfd, self.rfd):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ----------------------------------------------------------------------------
# docs screenshots


def screenshots(out_dir: str) -> list[str]:
    """Serve a tiny-world queue in each mode, label a little by keyboard, save docs/label_{mode}.png."""
    from nanorlhf.labelapp.events import LabelLog
    from nanorlhf.labelapp.items import build_queue, demo_rows
    from nanorlhf.labelapp.server import LabelServer
    from nanorlhf.world import build_world, write_world
    tmp = tempfile.mkdtemp(prefix="nanorlhf-shots-")
    write_world(build_world("tiny", 0), tmp)
    rows, paths = demo_rows(tmp, n=12, k_min=6, k_max=6), []
    with Browser(width=1280, height=900) as b:
        for mode, keys in (("rank", "3=6"), ("pair", "1")):
            log = LabelLog(os.path.join(tmp, f"{mode}.jsonl"))
            log.start("alice", mode, "train", build_queue(rows, [], n=10, mode=mode, gold_rate=0, seed=0,
                                                          labeler="alice"))
            server = LabelServer(log)
            threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
            b.goto(server.url)
            b.wait_for("document.getElementById('prompt').textContent.length > 0")
            if mode == "rank":
                b.type_text("52134\n")  # label one item, then start on the next
                b.wait_for("document.getElementById('progress').textContent.startsWith('2 ')")
                b.eval("document.querySelectorAll('.score')[4].click(); document.querySelector('.flags').open = true;"
                       "document.querySelector('.flag input').click()")
                b.eval("document.getElementById('order').focus()")
            b.type_text(keys)
            if mode == "pair":
                b.wait_for("document.getElementById('progress').textContent.startsWith('2 ')")
            time.sleep(0.2)
            paths.append(os.path.join(out_dir, f"label_{mode}.png"))
            b.screenshot(paths[-1])
            server.shutdown()
            server.server_close()
            log.close()
    shutil.rmtree(tmp, ignore_errors=True)
    return paths


@dataclass
class ShotsConfig:
    shots: str = "docs"
    """folder to write the labeling page's screenshots into (label_rank.png, label_pair.png)"""


def main(cfg: ShotsConfig) -> list[str]:
    if not find_chromium():
        raise SystemExit(f"no Chromium found (looked for {', '.join(CANDIDATES)}): apt-get install chromium")
    paths = screenshots(cfg.shots)
    print("\n".join(paths))
    return paths


if __name__ == "__main__":
    from nanorlhf.infra.cli import run
    run(main, ShotsConfig, __doc__)
