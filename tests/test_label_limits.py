"""The labeling server under odd and hostile clients: a non-ASCII or absurdly long Content-Length, a client that
resets its connection, one that trickles its request, and a burst of 200 clients at once (bounded, on 127.0.0.1)."""
import socket
import struct
import threading
import time

from nanorlhf.labelapp.server import Handler
from tests.test_label import call, queue, read_bytes, running, state, world  # noqa: F401  (world: a fixture)


def test_a_non_ascii_content_length_gets_400(world, tmp_path):
    """'²' is a digit to str.isdigit but not to int(): the handler answers 400 instead of dying silently."""
    with running(str(tmp_path / "a.jsonl"), queue(world)) as server:
        before = read_bytes(server.log.path)
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.sendall(b"POST /api/label HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: \xc2\xb2\r\n"
                  b"Content-Type: application/json\r\nX-Token: %s\r\nOrigin: %s\r\n\r\n{}"
                  % (server.port, server.token.encode(), server.origin.encode()))
        reply = s.recv(4096)
        s.close()
        assert reply.startswith(b"HTTP/1.0 400") or reply.startswith(b"HTTP/1.1 400"), reply[:80]
        assert read_bytes(server.log.path) == before


def test_an_absurd_content_length_gets_400(world, tmp_path):
    """A Content-Length of 5,000 digits (int() refuses over 4,300): a 400 answer, not a handler dying without one."""
    with running(str(tmp_path / "a.jsonl"), queue(world)) as server:
        before = read_bytes(server.log.path)
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.sendall(b"POST /api/label HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %s\r\n"
                  b"Content-Type: application/json\r\nX-Token: %s\r\nOrigin: %s\r\n\r\n{}"
                  % (server.port, b"9" * 5000, server.token.encode(), server.origin.encode()))
        reply = s.recv(4096)
        s.close()
        assert reply.split(b"\r\n")[0].endswith(b" 400 Bad Request"), reply[:80]
        assert read_bytes(server.log.path) == before


def test_a_client_reset_is_one_line_not_a_traceback(world, tmp_path, capsys):
    """A client that resets its connection mid-request (RST, not FIN) is logged as one line on stderr; the server
    goes on answering."""
    with running(str(tmp_path / "a.jsonl"), queue(world)) as server:
        capsys.readouterr()
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.sendall(b"POST /api/label HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % server.port)
        port = s.getsockname()[1]
        time.sleep(0.2)                                              # the handler is reading the headers
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()                                                    # linger 0: the close sends a reset
        deadline, err = time.monotonic() + 5, ""
        while "dropped the connection" not in err and time.monotonic() < deadline:
            time.sleep(0.05)
            err += capsys.readouterr().err
        assert err.strip().splitlines() == [f"label server: client 127.0.0.1:{port} dropped the connection "
                                            "(ConnectionResetError)"], err
        assert state(server)["progress"]["done"] == 0


def test_a_client_trickling_its_headers_is_cut_off(world, tmp_path, monkeypatch):
    """One byte every 0.2 s never trips a per-read timeout; the request deadline (here 1 s) closes the socket."""
    monkeypatch.setattr(Handler, "request_seconds", 1.0)
    with running(str(tmp_path / "a.jsonl"), queue(world)) as server:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        t0, closed = time.monotonic(), False
        for b in b"GET /api/state HTTP/1.1\r\nX-Padding: " + b"a" * 200:
            try:
                s.sendall(bytes([b]))
            except OSError:
                closed = True
                break
            s.settimeout(0.2)
            try:
                if s.recv(1) == b"":
                    closed = True
                    break
            except socket.timeout:
                pass
            if time.monotonic() - t0 > 8:
                break
        s.close()
        assert closed and time.monotonic() - t0 < 5
        assert state(server)["progress"]["done"] == 0                # the server still answers others


def test_a_burst_of_200_clients_is_served_without_resets(world, tmp_path):
    """200 clients connect at once: the listen backlog queues them; each gets its answer, none is reset."""
    with running(str(tmp_path / "a.jsonl"), queue(world)) as server:
        results, go = [], threading.Barrier(200)

        def one():
            go.wait()                                                # all 200 connect at the same moment
            try:
                results.append(call(server, "GET", "/api/state")[0])
            except OSError as e:
                results.append(repr(e))

        threads = [threading.Thread(target=one) for _ in range(200)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert results.count(200) == 200, [r for r in results if r != 200][:5]
