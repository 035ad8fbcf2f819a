"""The process tree of one command, and how it is signalled: its group, its mark, its descendants.

A command's shell leads a process group of its own, but a process can leave the group
(``setsid``, ``setpgid``) and keep running after the shell is killed. So every command also
carries a **mark** in its environment, ``SKILLRUNTIME_TREE_<token>=1`` (a variable name of its
own: a command that runs another local runtime passes its mark on to that runtime's commands,
which get theirs on top). Signalling a command's tree (:meth:`CommandTree.signal`) reads
``/proc`` first, while the tree is whole, then sends the signal to:

* the **process group** (``killpg``): every process still in it, whatever its environment;
* every process whose ``/proc/<pid>/environ`` holds the **mark**: what left the group with
  ``setsid``, double-forked or was orphaned, as long as it did not start again with a cleared
  environment (``env -i``) — the environment is inherited through ``fork`` and ``exec``;
* every **descendant** (``/proc/<pid>/stat`` parent links) of the shell and of the marked
  processes, whatever its group or environment, as long as the chain of parents is unbroken at
  that moment (an orphan is adopted by init and falls out of it).

Only a process that left the group, cleared its environment *and* lost its parent link
escapes all three. A child subreaper (``PR_SET_CHILD_SUBREAPER`` on the shell) would keep such
orphans below the shell while it lives, but setting it in the child needs a ``preexec_fn``,
which makes ``subprocess`` fork instead of vfork (measured: each start took 1.5 to 7 ms more,
double to four times the cost, the more so the larger this process) and is unsafe in a process
with threads; it is not used.

The ``/proc`` pass costs a few milliseconds per hundred processes. Passes asked for at the same
time are combined: while one pass runs, the requests that arrive (from any thread, or queued
from an event loop with :func:`submit_signal`) wait for it to end and are all served by the
next pass, so a burst of timeouts costs a few passes, not one each. The final ``SIGKILL`` of a
stop makes a second pass only when a process the first one found outside the group still runs
(:meth:`CommandTree.outside_alive`). Without ``/proc`` (not Linux) only the group is signalled.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor, Future
from signal import Signals

__all__ = ["MARK_PREFIX", "CommandTree", "marked_environment", "signal_trees", "submit_signal"]

MARK_PREFIX = "SKILLRUNTIME_TREE_"
"""Prefix of the environment variable that marks the processes of one command."""

_MARK_NEEDLE = b"\0" + MARK_PREFIX.encode()
_READ_SIZE = 65536


def _signal_group(pgid: int, signum: Signals) -> None:
    """Send ``signum`` to the process group ``pgid``; a group that is gone is ignored."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def marked_environment(env: Mapping[str, str] | None) -> tuple[dict[str, str], str]:
    """``env`` (``None``: this process's environment) with a new command's mark, and the mark's
    token."""
    token = uuid.uuid4().hex[:16]
    marked = dict(os.environ if env is None else env)
    marked[MARK_PREFIX + token] = "1"
    return marked, token


class CommandTree:
    """The processes of one command: the group its shell ``pid`` leads and the processes marked
    ``token`` (see the module docs). ``outside`` holds the pids the last pass signalled outside
    the group."""

    __slots__ = ("outside", "pid", "token")

    def __init__(self, pid: int, token: str) -> None:
        self.pid = pid
        self.token = token
        self.outside: tuple[int, ...] = ()

    def signal(self, signum: Signals) -> None:
        """Send ``signum`` to the whole tree (see the module docs)."""
        signal_trees([self], signum)

    def signal_group(self, signum: Signals) -> None:
        """Send ``signum`` to the process group alone (no ``/proc`` pass)."""
        _signal_group(self.pid, signum)

    def outside_alive(self) -> bool:
        """Whether a process the last pass signalled outside the group still runs: only then
        can the tree's end need another pass (what a process that ended on ``SIGTERM`` forked
        outside the group in between is the exception: it is not looked for)."""
        return any(_running(pid) for pid in self.outside)


def signal_trees(trees: Sequence[CommandTree], signum: Signals) -> None:
    """Send ``signum`` to the whole tree of each of ``trees`` and wait until it is sent: one
    ``/proc`` pass (shared with the trees other threads ask for meanwhile), then the signals.
    The shells must not have been reaped: their pids and group ids are signalled."""
    if trees:
        _SWEEPS.submit([(tree, signum) for tree in trees]).result()


def submit_signal(
    trees: Sequence[CommandTree], signum: Signals, executor: Executor
) -> Future[None]:
    """:func:`signal_trees` without waiting: the pass runs on ``executor`` (unless one is running
    already, which takes these trees too); the future is done when the signals are sent."""
    return _SWEEPS.submit([(tree, signum) for tree in trees], executor)


_Request = tuple[CommandTree, Signals]


class _Sweeps:
    """The ``/proc`` passes of this process, one at a time, each serving every request queued
    before it began. A thread that asks and finds no pass running runs them itself until none is
    left; a request from an event loop schedules that work on its executor instead. A caller
    that waits never waits for a job still queued on an executor, only for a pass under way."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: list[tuple[list[_Request], Future[None]]] = []
        self._running = False  # a thread is in _drain
        self._scheduled = False  # a _drain is queued on an executor and has not begun

    def submit(self, requests: list[_Request], executor: Executor | None = None) -> Future[None]:
        future: Future[None] = Future()
        with self._lock:
            self._queued.append((requests, future))
            if self._running or (executor is not None and self._scheduled):
                return future  # the pass under way, or the one scheduled, takes it
            if executor is None:
                self._running = True
            else:
                self._scheduled = True
        if executor is None:
            self._drain()
            return future
        try:
            executor.submit(self._scheduled_drain)
        except RuntimeError:  # the executor is shutting down: run the passes here
            self._scheduled_drain()
        return future

    def _scheduled_drain(self) -> None:
        with self._lock:
            self._scheduled = False
            if self._running:
                return
            self._running = True
        self._drain()

    def _drain(self) -> None:
        while True:
            with self._lock:
                queued, self._queued = self._queued, []
                if not queued:
                    self._running = False
                    return
            try:
                _signal_found([request for requests, _ in queued for request in requests])
            except BaseException as exc:  # a bug or an interrupt: every waiter hears of it
                for _, future in queued:
                    future.set_exception(exc)
                if not isinstance(exc, Exception):
                    with self._lock:
                        self._running = False
                    raise
            else:
                for _, future in queued:
                    future.set_result(None)


_SWEEPS = _Sweeps()


def _running(pid: int) -> bool:
    try:
        stat = _read(f"/proc/{pid}/stat")
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in {b"Z", b"X"}


def _processes() -> Iterable[tuple[int, int, int, bytes]]:
    """``(pid, parent pid, process group, environment)`` of every process in ``/proc`` but this
    one (an empty environment where it cannot be read: another user's process)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    own = os.getpid()
    for name in names:
        if not name.isdigit() or int(name) == own:
            continue
        try:
            stat = _read(f"/proc/{name}/stat")
        except OSError:  # gone meanwhile
            continue
        try:
            environ = _read(f"/proc/{name}/environ")
        except OSError:  # another user's (a setuid program), or gone meanwhile
            environ = b""
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so cut at the
        # last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split(b" ", 4)
        if len(fields) >= 4 and fields[1].isdigit() and fields[2].isdigit():
            yield int(name), int(fields[1]), int(fields[2]), environ


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, _READ_SIZE)
        if len(data) < _READ_SIZE:  # stat and environ give all they hold in one read
            return data
        chunks = [data]
        while chunk := os.read(fd, _READ_SIZE):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _marks(environ: bytes) -> Iterable[bytes]:
    """The tokens of the marks in one ``/proc/<pid>/environ``."""
    data = b"\0" + environ
    start = data.find(_MARK_NEEDLE)
    while start >= 0:
        begin = start + len(_MARK_NEEDLE)
        end = data.find(b"=", begin)
        if end < 0:
            return
        yield data[begin:end]
        start = data.find(_MARK_NEEDLE, end)


def _signal_found(requests: list[tuple[CommandTree, Signals]]) -> None:
    """One ``/proc`` pass, then the signals: each request's group, the processes marked with its
    token, and the descendants of its shell and of them get the request's signal; each tree's
    ``outside`` is what of it the pass found outside its group."""
    tokens = {tree.token.encode() for tree, _ in requests}
    children: dict[int, list[int]] = {}
    groups: dict[int, int] = {}
    marked: dict[bytes, list[int]] = {}
    for pid, parent, group, environ in _processes():
        children.setdefault(parent, []).append(pid)
        groups[pid] = group
        for token in _marks(environ):
            if token in tokens:
                marked.setdefault(token, []).append(pid)
    targets: list[tuple[int, Signals]] = []
    for tree, signum in requests:
        found = _below([tree.pid, *marked.get(tree.token.encode(), ())], children)
        tree.outside = tuple(pid for pid in found if groups.get(pid) != tree.pid)
        targets.extend((pid, signum) for pid in found)
    for tree, signum in requests:
        _signal_group(tree.pid, signum)
    for pid, signum in dict.fromkeys(targets):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _below(roots: list[int], children: Mapping[int, list[int]]) -> list[int]:
    """``roots`` and all their descendants, each once."""
    found: dict[int, None] = {}
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid not in found:
            found[pid] = None
            stack.extend(children.get(pid, ()))
    return list(found)
