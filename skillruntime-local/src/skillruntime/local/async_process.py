"""Run one shell command on the host from asyncio, with the rules of :mod:`.process`.

The command is started the same way (own session and process group, stdin from ``/dev/null``)
and supervised by the event loop instead of a blocking loop: both pipes and the exit notifier
(a pidfd, or a waiter thread where pidfds are missing) are registered with ``loop.add_reader``,
output goes into :class:`~skillruntime.core.runtime.output.HeadTailBuffer` objects, and the
deadline, drain and kill-grace rules come from the shared :class:`~.process.KillSchedule`. No thread
is used per command where pidfds exist, so thousands of commands can run at once on one loop.

**Spawning.** Starting a process (``fork``/``exec`` of the shell) is the one step that blocks,
about 1–3 ms on a busy 2-core host. It runs on a small process-wide pool of
:data:`SPAWN_THREADS` threads rather than on the loop: the loop stays responsive, and a burst of
commands starts in parallel instead of one after the other (500 commands would otherwise take
over a second just to start).

**Signalling the tree.** A command's tree (:mod:`.tree`) is signalled after a ``/proc`` pass,
which runs on the same pool, so that the loop never waits for one; the requests of a burst of
timeouts share a few passes. The shell is reaped only after the passes that name it ended, so
its pid cannot be reused meanwhile.

**Cancellation.** When the awaiting task is cancelled (``task.cancel()``, ``asyncio.timeout``,
``asyncio.wait_for``) the command's whole tree gets ``SIGKILL`` before the
:class:`asyncio.CancelledError` propagates; the shell is reaped by the loop as soon as it is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from skillruntime.core.errors import ExecutionTransportError, RuntimeClosedError, printable
from skillruntime.core.models import SkillExecutionResult
from skillruntime.core.runtime.output import HeadTailBuffer

from .process import (
    ABANDONED,
    DEFAULT_DRAIN_SECONDS,
    DEFAULT_KILL_GRACE_SECONDS,
    ExitNotifier,
    KillSchedule,
    ProcessRegistry,
    command_result,
)
from .tree import CommandTree, marked_environment, submit_signal

__all__ = ["SPAWN_THREADS", "run_command_async"]

logger = logging.getLogger(__name__)

_READ_SIZE = 64 * 1024

SPAWN_THREADS = 4
"""Threads of the process-wide pool that starts commands and runs their ``/proc`` passes (see
the module docs)."""


class _SpawnPool:
    """The process-wide spawn pool, created on first use (its threads start on demand)."""

    _lock = threading.Lock()
    _executor: ThreadPoolExecutor | None = None

    @classmethod
    def get(cls) -> ThreadPoolExecutor:
        with cls._lock:
            if cls._executor is None:
                cls._executor = ThreadPoolExecutor(
                    SPAWN_THREADS, thread_name_prefix="skillruntime-spawn"
                )
            return cls._executor


def _spawn(
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str] | None,
    registry: ProcessRegistry | None,
) -> tuple[subprocess.Popen[bytes], CommandTree]:
    """Start ``argv`` in its own session with both output pipes and the command's mark (runs on
    the spawn pool)."""
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
        raise ExecutionTransportError(
            f"Cannot start {argv[0]} in {printable(cwd)}: {exc.strerror or exc}"
        ) from exc
    tree = CommandTree(process.pid, token)
    if registry is not None:
        registry.add(tree)
    return process, tree


def _discard(
    spawned: tuple[subprocess.Popen[bytes], CommandTree], registry: ProcessRegistry | None
) -> None:
    """Kill and reap a command whose caller went away while it was being started."""
    process, tree = spawned
    tree.signal(signal.SIGKILL)
    if registry is not None:
        registry.remove(tree)
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
    process.wait()


class _Supervisor:
    """Event-loop callbacks that read a command's pipes and enforce its schedule."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        process: subprocess.Popen[bytes],
        tree: CommandTree,
        *,
        schedule: KillSchedule,
        max_output_bytes: int,
        use_pidfd: bool,
    ) -> None:
        stdout, stderr = process.stdout, process.stderr
        if stdout is None or stderr is None:  # pragma: no cover - Popen was given PIPE for both
            raise ExecutionTransportError("The command's output pipes are missing")
        self._loop = loop
        self._process = process
        self._tree = tree
        self._passes: list[asyncio.Future[None]] = []
        self._schedule = schedule
        self._pipes = {stdout.fileno(): stdout, stderr.fileno(): stderr}
        self.stdout = HeadTailBuffer(max_output_bytes)
        self.stderr = HeadTailBuffer(max_output_bytes)
        self._buffers = {stdout.fileno(): self.stdout, stderr.fileno(): self.stderr}
        self._notifier = ExitNotifier(process.pid, use_pidfd=use_pidfd)
        self.done: asyncio.Future[None] = loop.create_future()
        for fd in self._pipes:
            os.set_blocking(fd, False)
            loop.add_reader(fd, self._read, fd)
        loop.add_reader(self._notifier.fd, self._exited)
        self._watching_exit = True
        self._timer: asyncio.TimerHandle | None = None
        self._arm()

    # ------------------------------------------------------------- callbacks

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_at(self._schedule.stop_at, self._due)

    def _read(self, fd: int) -> None:
        try:
            data = os.read(fd, _READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self._buffers[fd].feed(data)
            return
        self._loop.remove_reader(fd)
        self._pipes.pop(fd).close()
        self._check_finished()

    def _exited(self) -> None:
        self._stop_watching_exit()
        self._schedule.exit_seen(self._loop.time())
        self._arm()
        self._check_finished()

    def _due(self) -> None:
        self._timer = None
        now = self._loop.time()
        if now < self._schedule.stop_at:
            self._arm()
            return
        signum = self._schedule.advance(now)
        if signum is None:
            logger.warning(ABANDONED)
            self._finish()
            return
        self._signal(signum)
        self._arm()

    def _check_finished(self) -> None:
        if not self._pipes and self._schedule.exited:
            self._finish()

    def _finish(self) -> None:
        self._release_pipes()
        self._stop_watching_exit()
        self._notifier.close()
        self._after_passes(self._kill_stragglers if self._schedule.signalled else self._resolve)

    def _kill_stragglers(self) -> None:
        # Stragglers that closed their pipes but ignored SIGTERM; the shell is not reaped yet,
        # so its pid and group id still belong to this command.
        if self._tree.outside_alive():
            self._signal(signal.SIGKILL)
        else:
            self._tree.signal_group(signal.SIGKILL)
        self._after_passes(self._resolve)

    def _resolve(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def _signal(self, signum: signal.Signals) -> None:
        """Signal the tree after a ``/proc`` pass on the pool."""
        sending = submit_signal([self._tree], signum, _SpawnPool.get())
        self._passes.append(asyncio.wrap_future(sending, loop=self._loop))

    def _after_passes(self, then: Callable[[], None]) -> None:
        """Call ``then`` on the loop once every ``/proc`` pass asked for so far has ended."""
        passes = [p for p in self._passes if not p.done()]
        if not passes:
            then()
            return
        asyncio.gather(*passes, return_exceptions=True).add_done_callback(lambda _: then())

    def _stop_watching_exit(self) -> None:
        if self._watching_exit:
            self._watching_exit = False
            self._loop.remove_reader(self._notifier.fd)

    def _release_pipes(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for fd, pipe in self._pipes.items():
            self._loop.remove_reader(fd)
            pipe.close()
        self._pipes.clear()

    # ---------------------------------------------------------------- outcome

    @property
    def timed_out(self) -> bool:
        return self._schedule.timed_out

    @property
    def exited(self) -> bool:
        return self._schedule.exited

    def abort(self) -> asyncio.Future[None]:
        """Kill the tree and stop reading (the awaiting task was cancelled); reap the shell
        without blocking the loop once it is gone and the ``/proc`` passes ended. Returns a
        future done when the kill is."""
        self._signal(signal.SIGKILL)
        self._release_pipes()
        self._stop_watching_exit()
        killed: asyncio.Future[None] = self._loop.create_future()

        def reap() -> None:
            killed.set_result(None)
            self._reap_later()

        self._after_passes(reap)
        return killed

    def _reap_later(self) -> None:
        if self._schedule.exited or self._notifier.fd < 0:  # gone, or killed a second ago
            self._notifier.close()
            self._process.wait()
            return
        self._loop.add_reader(self._notifier.fd, self._reap)

    def _reap(self) -> None:
        self._loop.remove_reader(self._notifier.fd)
        self._notifier.close()
        self._process.wait()


async def run_command_async(
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
    """Run ``argv`` in ``cwd`` with exactly ``env`` (``None``: this process's environment).

    Same results and errors as :func:`~.process.run_command`; cancelling the awaiting task kills
    the command's tree first.
    """
    if not os.path.isdir(cwd):
        raise ExecutionTransportError(
            f"Working directory does not exist or is not a directory: {printable(cwd)}"
        )
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    pool = _SpawnPool.get()
    spawning = loop.run_in_executor(pool, _spawn, argv, cwd, env, registry)
    try:
        process, tree = await asyncio.shield(spawning)
    except asyncio.CancelledError:
        # Cancelled while the shell was being started: kill it as soon as it exists.
        with contextlib.suppress(Exception):
            spawned = await spawning
            await loop.run_in_executor(pool, _discard, spawned, registry)
        raise
    schedule = KillSchedule(
        loop.time() + timeout, kill_grace=kill_grace, drain_seconds=drain_seconds
    )
    try:
        supervisor = _Supervisor(
            loop,
            process,
            tree,
            schedule=schedule,
            max_output_bytes=max_output_bytes,
            use_pidfd=use_pidfd,
        )
    except BaseException:
        tree.signal(signal.SIGKILL)
        if registry is not None:
            registry.remove(tree)
        process.wait()
        raise
    try:
        await supervisor.done
    except BaseException as error:
        if registry is not None:
            registry.remove(tree)
        killed = supervisor.abort()
        if isinstance(error, asyncio.CancelledError):
            await asyncio.shield(killed)
        raise
    cancelled = registry.remove(tree) if registry is not None else False
    returncode = process.wait()
    if cancelled:
        raise RuntimeClosedError("The runtime was closed while the command was running")
    return command_result(
        timed_out=supervisor.timed_out,
        returncode=returncode,
        stdout=supervisor.stdout,
        stderr=supervisor.stderr,
        duration_seconds=time.monotonic() - started,
    )
