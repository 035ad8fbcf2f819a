"""Host lock files built on ``flock``: shared leases and exclusive build/evict locks.

A lock is an open file description holding ``flock``; the kernel drops it when the process
dies, so a crashed process never leaves a stale lease. Acquirers verify after locking that the
path still names the locked inode (a lock file may be unlinked by an evictor that held it
exclusively) and retry otherwise. Waiting polls with a short backoff up to a deadline.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from .errors import LockTimeoutError

__all__ = ["HostLock", "LockTimeoutError"]

_POLL_START = 0.002
_POLL_MAX = 0.05


class HostLock:
    """One held ``flock`` on a lock file; :meth:`release` is idempotent."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def try_acquire(cls, path: Path, *, shared: bool) -> HostLock | None:
        """The lock if it is free right now, else ``None``."""
        operation = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, operation)
            except BlockingIOError:
                os.close(fd)
                return None
            except BaseException:
                os.close(fd)
                raise
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return cls(path, fd)
            os.close(fd)

    @classmethod
    def acquire(cls, path: Path, *, shared: bool, timeout: float) -> HostLock:
        """Wait up to ``timeout`` seconds for the lock; :class:`LockTimeoutError` otherwise."""
        deadline = time.monotonic() + timeout
        delay = _POLL_START
        while True:
            held = cls.try_acquire(path, shared=shared)
            if held is not None:
                return held
            if time.monotonic() >= deadline:
                raise LockTimeoutError(f"lock {path.name} still held after {timeout:g} s")
            time.sleep(delay)
            delay = min(delay * 2, _POLL_MAX)

    def unlink(self) -> None:
        """Remove the lock file while holding it exclusively (other acquirers then retry)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def release(self) -> None:
        """Drop the lock."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> HostLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
