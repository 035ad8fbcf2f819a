"""Run one shell command on the host with a process-tree timeout and bounded output.

The command runs as ``<shell> -c <command>`` in a new session (so it leads its own process group),
with stdin from ``/dev/null``. Both pipes are read concurrently with ``poll(2)`` (through
:mod:`selectors` where :func:`select.poll` is missing) into
:class:`~skillruntime.core.runtime.output.HeadTailBuffer` objects. The exit of the shell is learnt
through a pidfd (``os.pidfd_open``) or, where that is unavailable, a waiter thread using
``waitid(WNOWAIT)``. Neither reaps the shell, so its pid and process-group id cannot be reused
while the command's tree is being signalled; the shell is reaped last.

Lifecycle of one command:

* **Normal exit.** After the shell exits, reading continues until both pipes reach end of file.
  When a background process still holds a pipe ``drain_seconds`` after the shell exited (or at
  the deadline, whichever comes first), the command's tree is stopped with the timeout sequence
  below; the result keeps the shell's exit code and ``timed_out`` stays false. When nothing holds
  the pipes, background processes that redirected their output away
  (``nohup server >log 2>&1 &``) are left running, as a shell would leave them.
* **Timeout.** At the deadline the command's whole tree (:mod:`.tree`: its process group, the
  processes carrying its mark, their descendants) gets ``SIGTERM``; after ``kill_grace`` seconds,
  or as soon as the shell exited and the pipes closed, it gets ``SIGKILL`` (the group alone when
  nothing the ``SIGTERM`` reached outside the group still runs: no second ``/proc`` pass). The
  result has ``timed_out=True``, ``exit_code=-1`` and the output read so far.
* **Signals.** A shell killed by signal ``N`` (not by the timeout) reports exit code ``128 + N``,
  as shells do.

A process that left the group, cleared its environment and lost its parent (see :mod:`.tree`)
escapes the kill; its pipes are abandoned one second after the final ``SIGKILL``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import select
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence

from skillruntime.core.errors import ExecutionTransportError, RuntimeClosedError, printable
from skillruntime.core.models import SkillExecutionResult
from skillruntime.core.runtime.output import HeadTailBuffer

from .tree import CommandTree, marked_environment, signal_trees

__all__ = [
    "ABANDONED",
    "DEFAULT_DRAIN_SECONDS",
    "DEFAULT_KILL_GRACE_SECONDS",
    "ExitNotifier",
    "KillSchedule",
    "ProcessRegistry",
    "check_stop_seconds",
    "command_result",
    "run_command",
]

logger = logging.getLogger(__name__)

DEFAULT_KILL_GRACE_SECONDS = 2.0
"""Seconds between ``SIGTERM`` and ``SIGKILL`` of a timed-out command's tree."""

DEFAULT_DRAIN_SECONDS = 0.5
"""Seconds the pipes may stay open after the shell exited before the tree is stopped."""

ABANDONED = (
    "abandoning output pipes held by a process outside the command's tree "
    "(it left the group, cleared its environment and lost its parent)"
)
"""The warning logged when a process the tree kill cannot find keeps the pipes open."""


def check_stop_seconds(kill_grace_seconds: float, drain_seconds: float) -> None:
    """Raise :class:`ValueError` when the kill grace or the drain time of the local runtimes is
    negative."""
    if kill_grace_seconds < 0 or drain_seconds < 0:
        raise ValueError("kill_grace_seconds and drain_seconds must not be negative")


_FINAL_DRAIN_SECONDS = 1.0
_READ_SIZE = 64 * 1024

_RUNNING, _TERMINATING, _KILLED = range(3)


class ProcessRegistry:
    """The commands a runtime is running, so :meth:`close` can stop them.

    After :meth:`close` a new command is killed as soon as it registers and its run raises
    :class:`RuntimeClosedError`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[int, CommandTree] = {}
        self._cancelled: set[int] = set()
        self._closed = False

    def add(self, tree: CommandTree) -> None:
        """Register a started command; kill its tree at once when the registry is closed."""
        with self._lock:
            self._running[tree.pid] = tree
            closed = self._closed
            if closed:
                self._cancelled.add(tree.pid)
        if closed:
            tree.signal(signal.SIGKILL)

    def remove(self, tree: CommandTree) -> bool:
        """Unregister a command (before its shell is reaped); return True when close()
        cancelled it."""
        with self._lock:
            self._running.pop(tree.pid, None)
            cancelled = tree.pid in self._cancelled
            self._cancelled.discard(tree.pid)
            return cancelled

    def close(self) -> int:
        """Kill the trees of all running commands; return how many there were."""
        with self._lock:  # held throughout: no shell is reaped (its pid reused) meanwhile
            self._closed = True
            trees = list(self._running.values())
            self._cancelled.update(tree.pid for tree in trees)
            signal_trees(trees, signal.SIGKILL)
            return len(trees)


class KillSchedule:
    """When a command's tree is signalled: the timeout, drain and kill-grace rules.

    Shared by the blocking and the asyncio supervisors. ``stop_at`` is the next instant (on the
    caller's monotonic clock) at which :meth:`advance` must be called; :meth:`exit_seen` records
    the shell's exit, after which background holders of the pipes get ``drain_seconds``.
    """

    __slots__ = ("_drain", "_grace", "exited", "phase", "signalled", "stop_at", "timed_out")

    def __init__(self, deadline: float, *, kill_grace: float, drain_seconds: float) -> None:
        self._grace = kill_grace
        self._drain = drain_seconds
        self.phase = _RUNNING
        self.stop_at = deadline
        self.exited = False
        self.timed_out = False
        self.signalled = False

    def exit_seen(self, now: float) -> None:
        """The shell exited at ``now``."""
        self.exited = True
        if self.phase == _RUNNING:
            self.stop_at = min(self.stop_at, now + self._drain)

    def advance(self, now: float) -> signal.Signals | None:
        """``stop_at`` has passed: the signal to send the tree, or ``None`` to abandon pipes
        still held by processes outside it."""
        if self.phase == _RUNNING:
            self.timed_out = not self.exited
            self.signalled = True
            self.phase, self.stop_at = _TERMINATING, now + self._grace
            return signal.SIGTERM
        if self.phase == _TERMINATING:
            self.phase, self.stop_at = _KILLED, now + _FINAL_DRAIN_SECONDS
            return signal.SIGKILL
        return None


def command_result(
    *,
    timed_out: bool,
    returncode: int,
    stdout: HeadTailBuffer,
    stderr: HeadTailBuffer,
    duration_seconds: float,
) -> SkillExecutionResult:
    """The result of a finished command: ``-1`` on timeout, ``128 + N`` for signal ``N``."""
    stdout_text, stdout_truncated = stdout.text()
    stderr_text, stderr_truncated = stderr.text()
    if timed_out:
        exit_code = -1
    elif returncode < 0:
        exit_code = 128 - returncode
    else:
        exit_code = returncode
    return SkillExecutionResult(
        exit_code=exit_code,
        stdout=stdout_text,
        stderr=stderr_text,
        timed_out=timed_out,
        duration_seconds=duration_seconds,
        stdout_truncated=stdout_truncated,
        stderr_truncated=stderr_truncated,
    )


class ExitNotifier:
    """A file descriptor that becomes readable when the process exits (without reaping it)."""

    def __init__(self, pid: int, *, use_pidfd: bool) -> None:
        self._fds: list[int] = []
        self.fd = -1
        if use_pidfd and hasattr(os, "pidfd_open"):
            try:
                self.fd = os.pidfd_open(pid)
                self._fds.append(self.fd)
                return
            except OSError as exc:  # kernel without pidfd support
                logger.debug("pidfd_open unavailable (%s); using a waiter thread", exc)
        read_end, write_end = os.pipe()
        self._fds += [read_end, write_end]
        self.fd = read_end
        threading.Thread(
            target=_wait_then_notify, args=(pid, write_end), name=f"exit-waiter-{pid}", daemon=True
        ).start()

    def close(self) -> None:
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()
        self.fd = -1


def _wait_then_notify(pid: int, write_end: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    with contextlib.suppress(OSError):
        os.write(write_end, b"x")


def run_command(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str] | None,
    timeout: float,
    max_output_bytes: int,
    kill_grace: float = DEFAULT_KILL_GRACE_SECONDS,
    drain_seconds: float = DEFAULT_DRAIN_SECONDS,
    registry: ProcessRegistry | None = None,
    use_pidfd: bool = True,
) -> SkillExecutionResult:
    """Run ``argv`` in ``cwd`` with exactly ``env`` (``None``: this process's environment) and
    the command's mark (:mod:`.tree`).

    ``max_output_bytes`` bounds each stream. Raises :class:`ExecutionTransportError` when the
    process cannot be started (missing working directory, missing shell, ...) and
    :class:`RuntimeClosedError` when ``registry`` was closed while the command ran.
    """
    started = time.monotonic()
    marked, token = marked_environment(env)
    try:
        process = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=marked,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        # The child's chdir failing is reported here too; checked only now, not before every
        # start (the check would race with the start anyway).
        if not os.path.isdir(cwd):
            raise ExecutionTransportError(
                f"Working directory does not exist or is not a directory: {printable(cwd)}"
            ) from exc
        raise ExecutionTransportError(
            f"Cannot start {argv[0]} in {printable(cwd)}: {exc.strerror or exc}"
        ) from exc
    tree = CommandTree(process.pid, token)
    if registry is not None:
        registry.add(tree)
    outcome: tuple[bool, HeadTailBuffer, HeadTailBuffer] | None = None
    cancelled = False
    try:
        outcome = _supervise(
            process,
            tree,
            deadline=started + timeout,
            max_output_bytes=max_output_bytes,
            kill_grace=kill_grace,
            drain_seconds=drain_seconds,
            use_pidfd=use_pidfd,
        )
    finally:
        if outcome is None:  # interrupted (KeyboardInterrupt, ...): leave nothing behind
            tree.signal(signal.SIGKILL)
        if registry is not None:
            cancelled = registry.remove(tree)
        returncode = process.wait()
    if cancelled:
        raise RuntimeClosedError("The runtime was closed while the command was running")
    timed_out, stdout, stderr = outcome
    return command_result(
        timed_out=timed_out,
        returncode=returncode,
        stdout=stdout,
        stderr=stderr,
        duration_seconds=time.monotonic() - started,
    )


class _Poller:
    """``poll(2)`` on a few descriptors: :func:`select.poll` itself, or a :mod:`selectors`
    selector where the platform has no ``poll``. Timeouts are in seconds."""

    __slots__ = ("_poll", "_selector")

    def __init__(self) -> None:
        # poll needs no kernel object per command, unlike epoll, and select.poll none of the
        # key objects of the selectors module: three descriptors are its sweet spot.
        self._poll = select.poll() if hasattr(select, "poll") else None
        self._selector = None if self._poll is not None else selectors.DefaultSelector()

    def register(self, fd: int) -> None:
        if self._poll is not None:
            self._poll.register(fd, select.POLLIN)
        else:
            assert self._selector is not None
            self._selector.register(fd, selectors.EVENT_READ)

    def unregister(self, fd: int) -> None:
        if self._poll is not None:
            self._poll.unregister(fd)
        else:
            assert self._selector is not None
            self._selector.unregister(fd)

    def ready(self, timeout: float) -> list[int]:
        """Descriptors readable (or at end of file, or in error) within ``timeout`` seconds."""
        if self._poll is not None:
            # poll takes milliseconds; round up so a deadline is never polled early in a loop.
            return [fd for fd, _ in self._poll.poll(max(0, math.ceil(timeout * 1000)))]
        assert self._selector is not None
        return [int(key.fd) for key, _ in self._selector.select(timeout)]

    def close(self) -> None:
        if self._selector is not None:
            self._selector.close()


def _supervise(
    process: subprocess.Popen[bytes],
    tree: CommandTree,
    *,
    deadline: float,
    max_output_bytes: int,
    kill_grace: float,
    drain_seconds: float,
    use_pidfd: bool,
) -> tuple[bool, HeadTailBuffer, HeadTailBuffer]:
    """Read both pipes until EOF while enforcing the deadline; return (timed_out, out, err)."""
    stdout, stderr = process.stdout, process.stderr
    if stdout is None or stderr is None:  # pragma: no cover - Popen was given PIPE for both
        raise ExecutionTransportError("The command's output pipes are missing")
    buffers = {
        stdout.fileno(): HeadTailBuffer(max_output_bytes),
        stderr.fileno(): HeadTailBuffer(max_output_bytes),
    }
    stdout_buffer, stderr_buffer = buffers.values()
    notifier = ExitNotifier(process.pid, use_pidfd=use_pidfd)
    poller = _Poller()
    schedule = KillSchedule(deadline, kill_grace=kill_grace, drain_seconds=drain_seconds)
    try:
        for fd in buffers:
            poller.register(fd)
        poller.register(notifier.fd)
        open_pipes = len(buffers)
        while open_pipes or not schedule.exited:
            now = time.monotonic()
            if now >= schedule.stop_at:
                signum = schedule.advance(now)
                if signum is None:
                    logger.warning(ABANDONED)
                    break
                tree.signal(signum)
                continue
            for fd in poller.ready(schedule.stop_at - now):
                if fd == notifier.fd:
                    schedule.exit_seen(time.monotonic())
                    poller.unregister(fd)
                    continue
                data = os.read(fd, _READ_SIZE)
                if data:
                    buffers[fd].feed(data)
                else:
                    poller.unregister(fd)
                    open_pipes -= 1
        if schedule.signalled:
            # Stragglers that closed their pipes but ignored SIGTERM; the shell is not reaped
            # yet, so its pid and group id still belong to this command.
            if tree.outside_alive():
                tree.signal(signal.SIGKILL)
            else:
                tree.signal_group(signal.SIGKILL)
    finally:
        poller.close()
        notifier.close()
        stdout.close()
        stderr.close()
    return schedule.timed_out, stdout_buffer, stderr_buffer
