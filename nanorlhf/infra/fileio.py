"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Temp file in the same folder, flush, fsync, os.replace, then fsync the folder so the
rename itself is durable. Used by checkpoints, JSONL data files and exports.

Example:
    atomic_write("out/x.json", lambda f: f.write(b"{}"))
"""
from __future__ import annotations

import hashlib
import os
import re
import secrets
from typing import BinaryIO, Callable


def atomic_write(path, write: Callable[[BinaryIO], None]) -> None:
    """Call write(f) on a temp file beside path, then move it into place; on any error no temp file is left."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:  # make the rename itself durable (POSIX; not possible on Windows)
        dir_fd = os.open(folder, os.O_RDONLY)
        os.fsync(dir_fd)
        os.close(dir_fd)
    except OSError:
        pass


def write_text(path, text: str) -> None:
    """atomic_write of a UTF-8 text (a report, a JSON summary, a generated doc)."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


ORPHAN = re.compile(r"^\..+\.[0-9a-f]{8}\.tmp$")  # atomic_write's temp name: .<file>.<hex>.tmp


def clean_orphans(folder) -> list[str]:
    """Remove the temp files a killed atomic_write left in folder (a SIGKILL skips its cleanup); their names."""
    if not os.path.isdir(folder):
        return []
    gone = [n for n in os.listdir(folder) if ORPHAN.match(n) and os.path.isfile(os.path.join(folder, n))]
    for n in gone:
        os.unlink(os.path.join(folder, n))
    return gone


def file_sha256(path, n_hex: int = 16) -> str:
    """Short content hash of a file: recorded for every input a stage consumed."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:n_hex]
