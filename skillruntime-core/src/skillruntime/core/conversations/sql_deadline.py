"""Client-side deadlines for SQL store calls: sockets of a call that outlives it are shut down.

A database server bounds statements (``statement_timeout``, lock waits), but nothing on the
server bounds a network that has gone silent: a request sent into a dead link, or a connection
the server accepted and never answered, blocks the client for as long as TCP keeps trying. A
:class:`CallDeadline` holds the sockets one store call uses; one watchdog thread per process
shuts them down (``shutdown(SHUT_RDWR)``) when the call's deadline passes, so the blocked driver
call returns at once with a connection error. The watchdog works on duplicates of the sockets'
descriptors, so a driver closing its own descriptor meanwhile is harmless.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time

__all__ = ["CallDeadline", "start_deadline"]


class CallDeadline:
    """The deadline of one call and the sockets it uses (see :func:`start_deadline`)."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._expired = False
        self._finished = False

    @property
    def expired(self) -> bool:
        """Whether the deadline passed while the call ran (its sockets were shut down)."""
        with self._lock:
            return self._expired or time.monotonic() >= self.deadline

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    def watch(self, descriptor: int) -> None:
        """Shut the socket behind ``descriptor`` down when the deadline passes (at once if it
        already has)."""
        try:
            duplicate = socket.socket(fileno=os.dup(descriptor))
        except OSError:
            return  # not a socket (or already closed): nothing that could block
        with self._lock:
            if self._finished:
                duplicate.close()
                return
            self._sockets.append(duplicate)
            expired = self._expired
        if expired:
            _shut(duplicate)

    def expire(self) -> None:
        """Mark the call as late and shut its sockets down (called by the watchdog)."""
        with self._lock:
            if self._finished:
                return
            self._expired = True
            sockets = list(self._sockets)
        for item in sockets:
            _shut(item)

    def finish(self) -> None:
        """The call is over: forget its sockets (the driver's own sockets stay open)."""
        with self._lock:
            self._finished = True
            sockets, self._sockets = self._sockets, []
        for item in sockets:
            with contextlib.suppress(OSError):
                item.close()


def _shut(item: socket.socket) -> None:
    with contextlib.suppress(OSError):
        item.shutdown(socket.SHUT_RDWR)


class _Watchdog:
    """One daemon thread that expires :class:`CallDeadline` objects in deadline order."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._heap: list[tuple[float, int, CallDeadline]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, call: CallDeadline) -> None:
        with self._condition:
            heapq.heappush(self._heap, (call.deadline, next(self._order), call))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="skillruntime-sql-deadlines", daemon=True
                )
                self._thread.start()
            self._condition.notify()

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._heap:
                    self._condition.wait()
                deadline, _, call = self._heap[0]
                delay = deadline - time.monotonic()
                if delay > 0:
                    self._condition.wait(delay)
                    continue
                heapq.heappop(self._heap)
            call.expire()


_WATCHDOG = _Watchdog()


def start_deadline(seconds: float) -> CallDeadline:
    """A deadline ``seconds`` from now, watched by the process's watchdog thread.

    Call :meth:`CallDeadline.finish` when the call is over; a finished deadline that passes
    later does nothing.
    """
    call = CallDeadline(seconds)
    _WATCHDOG.add(call)
    return call
