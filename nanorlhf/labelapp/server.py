"""The HTTP layer of the labeling app: stdlib ThreadingHTTPServer, safe on a shared machine.

Safe on a machine shared with others, one guard each:
  - binds 127.0.0.1 unless told otherwise;
  - a Host header that is not this server's gets 421 (stops DNS-rebinding pages);
  - the page itself needs the URL's ?token= (other users of the machine cannot open it);
  - every API call needs the page's per-session token (X-Token header), and a POST
    also a matching Origin (stops cross-site posts);
  - a body over `max_body` bytes gets 413, a malformed one (or an absurd
    Content-Length) a 400 JSON error, and neither changes anything;
  - every response carries a Content-Security-Policy with no inline script.

Routes: GET / (page), GET /static/app.js|app.css, GET /api/state,
POST /api/label {item_id, ...}, POST /api/undo {}.

Example:
    server = LabelServer(log, host="127.0.0.1", port=0)
    print(server.url)              # http://127.0.0.1:PORT/?token=...
    server.serve_forever()
"""
from __future__ import annotations

import functools
import hmac
import json
import secrets
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from nanorlhf.labelapp.checks import FLAGS, LabelError, check_label, parse_body, share
from nanorlhf.labelapp.events import CUTOFF, LabelLog, below_cutoff
from nanorlhf.labelapp.page import CSP, STATIC, page_html, static_file

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class LabelServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the listen backlog: a burst of clients queues instead of being reset

    def __init__(self, log: LabelLog, host: str = "127.0.0.1", port: int = 0, max_body: int = 65536,
                 cutoff: float = CUTOFF, verbose: bool = False):
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), Handler)
        self.log, self.max_body, self.cutoff, self.verbose = log, max_body, cutoff, verbose
        self.token = secrets.token_urlsafe(32)
        self.port = self.server_address[1]
        name = f"[{host}]" if ":" in host else host
        self.origin = f"http://{name}:{self.port}"
        names = {name} | ({"127.0.0.1", "localhost", "[::1]"} if host in LOOPBACK else {socket.gethostname()})
        self.allowed_hosts = {f"{n}:{self.port}".lower() for n in names}
        self.static = {n: static_file(n) for n in STATIC}

    @functools.cached_property
    def page(self) -> bytes:
        """The page, built at its first request: the server is bound before the log is started (label.py)."""
        return page_html(self.token, self.log.instructions or "train", self.log.mode or "rank").encode("utf-8")

    def handle_error(self, request, client_address):
        """A client that resets or drops its connection is one line on stderr; anything else keeps its traceback."""
        err = sys.exc_info()[1]
        if isinstance(err, (ConnectionError, TimeoutError)):
            print(f"label server: client {client_address[0]}:{client_address[1]} dropped the connection "
                  f"({type(err).__name__})", file=sys.stderr)
        else:
            super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        return f"{self.origin}/?token={self.token}"

    def state(self) -> dict:
        """What the page shows: who, progress, gold agreement, and the current item (display order)."""
        log = self.log
        item, (done, total), (agree, n_gold) = log.current(), log.progress(), log.gold_score()
        shown = None
        if item:
            texts = item["completions"]
            if log.mode == "pair":
                texts = [texts[item["left"]], texts[1 - item["left"]]]
            shown = {"id": item["id"], "prompt": item["prompt"], "completions": texts}
        return {"labeler": log.labeler, "mode": log.mode, "instructions": log.instructions,
                "progress": {"done": done, "total": total},
                "gold": {"agree": agree, "total": n_gold, "cutoff": self.cutoff,
                         "share": None if not n_gold else share(agree, n_gold),
                         "below_cutoff": below_cutoff(agree, n_gold, self.cutoff)},
                "item": shown, "can_undo": bool(log.stack), "flags": list(FLAGS.items())}


class Handler(BaseHTTPRequestHandler):
    server: LabelServer
    server_version = "nanorlhf-label"
    timeout = 30  # a client that stalls mid-request is dropped
    request_seconds = 10.0  # and one that trickles its request a byte at a time, once this much time has passed

    def handle_one_request(self):
        """One request, with a watchdog: past request_seconds the socket is shut, which ends a blocked read (a
        per-read timeout alone never fires for a client that sends one byte every few seconds)."""
        watchdog = threading.Timer(self.request_seconds, self._cut)
        watchdog.daemon = True
        watchdog.start()
        try:
            super().handle_one_request()
        finally:
            watchdog.cancel()

    def _cut(self):
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- plumbing ---------------------------------------------------------------

    def log_message(self, fmt, *args):
        if self.server.verbose:
            super().log_message(fmt, *args)

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.close_connection = True

    def _json(self, code: int, obj: dict) -> None:
        self._send(code, json.dumps(obj).encode("utf-8"), "application/json; charset=utf-8")

    def _error(self, code: int, message: str) -> None:
        self._json(code, {"error": message})

    def _host_ok(self) -> bool:
        host = (self.headers.get("Host") or "").lower()
        if host not in self.server.allowed_hosts:
            self._error(421, f"Host {host!r:.80} is not this server; open {self.server.origin}")
            return False
        return True

    def _token_ok(self, given: str | None) -> bool:
        if not given or not hmac.compare_digest(given.encode(), self.server.token.encode()):
            self._error(403, "missing or wrong session token: open the URL label.py printed")
            return False
        return True

    # -- GET ----------------------------------------------------------------------

    def do_GET(self):
        if not self._host_ok():
            return
        url = urlsplit(self.path)
        if url.path == "/":
            if self._token_ok((parse_qs(url.query).get("token") or [None])[0]):
                self._send(200, self.server.page, "text/html; charset=utf-8")
        elif url.path.startswith("/static/") and url.path[8:] in STATIC:
            name = url.path[8:]
            self._send(200, self.server.static[name], STATIC[name])
        elif url.path == "/favicon.ico":
            self._send(204, b"", "image/x-icon")
        elif url.path == "/api/state":
            if self._token_ok(self.headers.get("X-Token")):
                with self.server.log.lock:
                    self._json(200, self.server.state())
        else:
            self._error(404, f"no such page: {url.path[:80]}")

    do_HEAD = do_GET

    # -- POST ---------------------------------------------------------------------

    def _read_body(self) -> dict | None:
        """The JSON body, or None after answering 400/411/413 (the body is then never read)."""
        length = self.headers.get("Content-Length")
        if length is None:
            self._error(411, "Content-Length required")
            return None
        # "²" is a digit to str.isdigit, not to int(); and int() refuses 4,301 digits or more
        if not (length.isascii() and length.isdigit()) or len(length) > 18:
            self._error(400, "Content-Length must be a decimal number of at most 18 digits")
            return None
        if int(length) > self.server.max_body:
            self._error(413, f"body of {length} bytes is over the {self.server.max_body}-byte cap")
            return None
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            self._error(400, "Content-Type must be application/json")
            return None
        try:
            return parse_body(self.rfile.read(int(length)))
        except LabelError as e:
            self._error(400, str(e))
            return None

    def do_POST(self):
        if not self._host_ok():
            return
        route = urlsplit(self.path).path
        if route not in ("/api/label", "/api/undo"):
            self._error(404, f"no such endpoint: {route[:80]}")
            return
        if self.headers.get("Origin") != self.server.origin:
            self._error(403, f"Origin {self.headers.get('Origin')!r:.80} is not {self.server.origin}")
            return
        if not self._token_ok(self.headers.get("X-Token")):
            return
        body = self._read_body()
        if body is None:
            return
        try:
            with self.server.log.lock:
                code, reply = (self._label(body) if route == "/api/label" else self._undo(body))
                reply["state"] = self.server.state()
        except LabelError as e:
            self._error(400, str(e))
        except OSError as e:  # e.g. disk full: nothing was acknowledged
            self._error(500, f"could not write the log: {e}")
        else:
            self._json(code, reply)

    def _label(self, body: dict) -> tuple[int, dict]:
        log, item = self.server.log, self.server.log.current()
        if not isinstance(body.get("item_id"), str):
            raise LabelError("item_id: expected a string")
        if item is None or body["item_id"] != item["id"]:
            return 409, {"error": f"{body['item_id']!r:.80} is not the current item; the page was reloaded"}
        ev = log.label(item["id"], check_label(item, log.mode, body))
        return 200, {"ok": True, "event": ev["id"]}

    def _undo(self, body: dict) -> tuple[int, dict]:
        if body:
            raise LabelError("undo takes an empty JSON object {}")
        ev = self.server.log.undo()
        return (200, {"ok": True, "event": ev["id"], "retracted": ev["target"]}) if ev else \
            (409, {"error": "nothing to undo"})
