"""Liveness on SQLite (runs.ownership.liveness): an exclusive ``flock`` on a file per worker id, in a folder next
to the database (``<database>.liveness/``), which the kernel releases the moment its process ends.

``flock`` belongs to an open file description, not to a process or a thread: a checker opens the file anew, so
its try fails while any other description holds the lock, in another process or in this one (an embedded
worker's sibling). A holder's lock is exclusive; checkers and watchers take a shared one, so they never mistake
each other for a holder. A checker that gets its shared lock has found the holder gone: it removes the file and
lets go. A watcher (``wait_dead``) blocks on a shared lock, which the kernel grants the moment the holder's
process ends. A holder makes sure the file it locked is still the one at its path (a checker may have removed it
meanwhile), so two descriptions never hold the "same" worker id on two files.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["FileLiveness"]

#: How long a holder tries for its lock before saying another process holds the worker id.
_HOLD_SECONDS = 2.0


class FileLiveness:
    """The liveness tokens of the workers of the SQLite database whose files are in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, worker_id: str) -> Path:
        """The worker's file: its id made safe for a file name, and a digest so two ids never share one."""
        digest = hashlib.blake2b(worker_id.encode(), digest_size=6).hexdigest()
        return self.folder / f"{re.sub(r'[^A-Za-z0-9._-]', '_', worker_id)[:80]}-{digest}.lock"

    def hold(self, worker_id: str) -> int:
        """Lock the worker's file; the open descriptor, whose lock lasts until it is closed (or the process
        ends). Raises RuntimeError when another live process holds the id."""
        path = self.path(worker_id)
        deadline = time.monotonic() + _HOLD_SECONDS
        while True:
            self.folder.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except FileNotFoundError:  # the folder went between the two calls (a holder let go of the last file)
                if time.monotonic() > deadline:
                    raise
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() > deadline:  # a checker holds it for a moment only
                    raise RuntimeError(f"Another live process holds the worker id {worker_id!r}.") from None
                time.sleep(0.02)
                continue
            if _is_at(fd, path):
                self._sweep(path)
                return fd
            os.close(fd)  # a checker removed this file after finding its last holder gone: lock the new one

    def is_held(self, worker_id: str, fd: int, *, ping: bool = False) -> bool:
        """Whether ``fd`` still locks the worker's file at its path (someone may have removed the folder)."""
        return _is_at(fd, self.path(worker_id))

    def release(self, worker_id: str, fd: int) -> None:
        """Let go: the file is removed first (still locked, so no checker is inside it), then closed."""
        path = self.path(worker_id)
        if _is_at(fd, path):
            path.unlink(missing_ok=True)
        os.close(fd)
        try:
            self.folder.rmdir()  # the last worker of the database leaves no folder behind
        except OSError:
            pass

    def dead(self, worker_ids: Iterable[str]) -> set[str]:
        """The ids no live process holds: their file can be locked, or is gone."""
        return {worker_id for worker_id in worker_ids if _is_dead_at(self.path(worker_id))}

    def wait_dead(self, worker_id: str, *, alive: Callable[[], None], stop: threading.Event) -> bool:
        """Block until no live process holds ``worker_id`` (True at once when none does now), calling ``alive`` once
        it is known held. A blocked ``flock`` cannot be interrupted: ``stop`` is read before and after the wait (a
        stopped watch's thread ends with the holder)."""
        path = self.path(worker_id)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return True
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                pass
            alive()
            if stop.is_set():
                return False
            fcntl.flock(fd, fcntl.LOCK_SH)  # granted when the holder lets go or its process ends
            return not stop.is_set()
        finally:
            os.close(fd)  # the shared lock goes with it

    def _sweep(self, mine: Path) -> None:
        """Remove the files of dead holders that no claim looked at (they owned no running run when they died),
        so the folder holds about as many files as there are live workers."""
        for path in self.folder.glob("*.lock"):
            if path != mine:
                _is_dead_at(path)


def _is_dead_at(path: Path) -> bool:
    """Whether no live process holds the file at ``path``; a dead holder's file is removed."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # shared: another checker or a watcher is no holder
        except BlockingIOError:
            return False
        if not _is_at(fd, path):
            return False  # a new holder's file took its place: it says at the next look
        path.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def _is_at(fd: int, path: Path) -> bool:
    """Whether ``fd`` is the file at ``path`` now."""
    try:
        at = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (at.st_dev, at.st_ino) == (mine.st_dev, mine.st_ino)
