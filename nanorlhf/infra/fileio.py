"""Atomic file writes, and folders owned by one process at a time.

Temp file in the same folder, flush, fsync, os.replace, then fsync the folder so the
rename itself is durable. Used by checkpoints, JSONL data files and exports. A temp file's
name carries its writer's pid, so the start-up cleaner removes only those of dead writers.

A run's output folder (and the pipeline's data folder) is held by one live process at a
time: `hold` takes an flock on the folder's .lock file, which holds the owner's pid; a
second run on the folder is refused, naming that pid; a lock its dead owner left is taken
over with a message (the kernel drops a dead process's flock, so a lock is never stuck).

Example:
    atomic_write("out/x.json", lambda f: f.write(b"{}"))
    with hold("out/run"):
        ...                          # another process's hold("out/run") raises FolderBusy
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
from typing import BinaryIO, Callable

try:
    import fcntl
except ImportError:  # Windows: folders are not locked there
    fcntl = None


def atomic_write(path, write: Callable[[BinaryIO], None], before_replace: Callable[[str], None] | None = None) -> None:
    """Call write(f) on a temp file beside path, then move it into place; on any error no temp file is left.
    before_replace(tmp) runs once the temp file is complete and synced (a checkpoint records its hash there)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if before_replace is not None:
            before_replace(tmp)
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


def read_json(path) -> dict:
    """A JSON file's object; {} when the file is not there (a stage that has not run)."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def write_text(path, text: str) -> None:
    """atomic_write of a UTF-8 text (a report, a JSON summary, a generated doc)."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


ORPHAN = re.compile(r"^\..+?(?:\.(\d+))?\.[0-9a-f]{8}\.tmp$")  # atomic_write's temp name: .<file>.<pid>.<hex>.tmp


def pid_alive(pid: int) -> bool:
    """Whether a process with this id is running (this process's own id included; on Windows, always assumed)."""
    if os.name == "nt":  # os.kill there would stop the process, not probe it
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def clean_orphans(folder) -> list[str]:
    """Remove the temp files that killed atomic_writes left in folder (a SIGKILL skips their cleanup); their names.
    A temp file whose writer is still running is kept (a name without a pid: an older release's, removed)."""
    if not os.path.isdir(folder):
        return []
    gone = []
    for n in sorted(os.listdir(folder)):
        m = ORPHAN.match(n)
        if m and os.path.isfile(os.path.join(folder, n)) and not (m.group(1) and pid_alive(int(m.group(1)))):
            os.unlink(os.path.join(folder, n))
            gone.append(n)
    return gone


# -----------------------------------------------------------------------------
# one live owner per folder

LOCK = ".lock"
_held: dict[str, object] = {}  # real path of a folder this process holds -> its open lock file


class FolderBusy(RuntimeError):
    """A folder another live process holds (its .lock names the pid)."""


@contextlib.contextmanager
def hold(folder):
    """Own `folder` while the block runs: created if missing (and removed again if the block left it empty), its
    .lock flocked and holding this pid. FolderBusy if a live process holds it; re-entrant within one process."""
    folder = os.fspath(folder)
    real = os.path.realpath(folder)
    if not folder or real in _held:
        yield
        return
    made = []
    d = os.path.abspath(folder)
    while not os.path.exists(d):  # the folders this call creates, deepest first (removed if left empty)
        made.append(d)
        d = os.path.dirname(d)
    os.makedirs(folder, exist_ok=True)
    _held[real] = _lock(folder)
    try:
        yield
    finally:
        f = _held.pop(real)
        if f is not None:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, LOCK))  # while still locked: a process that opened it retries (_lock)
            f.close()
        for d in made:
            with contextlib.suppress(OSError):
                os.rmdir(d)  # only if empty: a run that wrote nothing leaves nothing


def _lock(folder: str):
    """The open, flocked lock file of folder, holding this pid; FolderBusy naming the live owner's."""
    path = os.path.join(folder, LOCK)
    if fcntl is None:  # no flock on this platform: the folder is not locked
        return None
    while True:
        f = open(path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            owner = f.read().strip() or "?"
            f.close()
            raise FolderBusy(f"{folder} is in use by process {owner} (its {LOCK}); wait for that run to end, "
                             "or give another folder") from None
        if os.path.exists(path) and os.stat(path).st_ino == os.fstat(f.fileno()).st_ino:
            break
        f.close()  # its owner removed it as we opened it: take a fresh one
    f.seek(0)
    old = f.read().strip()
    if old and old != str(os.getpid()):
        print(f"{folder}: taking it over from process {old}, which ended without releasing it")
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


def file_sha256(path, n_hex: int = 16) -> str:
    """Short content hash of a file: recorded for every input a stage consumed."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:n_hex]
