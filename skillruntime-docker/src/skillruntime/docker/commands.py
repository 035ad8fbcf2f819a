"""Commands through the Engine's exec API: exact exit codes, separate streams, bounded output,
and a deadline that kills the command's whole process tree inside the container.

Each command is one exec of a small POSIX shell wrapper (run as the runtime's user, with the
command's environment set on the exec, plus the command's mark, below). The wrapper changes to
the working directory (exit :data:`MISSING_CWD` without printing anything when it does not
exist), then starts a child shell that prints its own pid as the first line of stdout and
replaces itself, through ``setsid``, with ``bash -c <command>`` (``sh -c`` without bash): the
command is then the leader of a session and a process group of its own whose id the client has
read before the command printed a byte. stdin is ``/dev/null``. The wrapper moves the exec's
stderr to descriptor 3 and its own to ``/dev/null``; the child shell takes it back: the wrapper's
report of a killed child (``Killed``) never reaches the command's stderr. (The child shell makes
the move itself: a redirection on the wrapper's command line would be the wrapper's own stderr
while it waits, as ``ash`` applies it in the parent.)

The engine sends stdout and stderr multiplexed on one connection (frames of at most 32 KiB);
each frame goes straight into a :class:`~skillruntime.core.runtime.output.HeadTailBuffer`, so client
memory stays bounded whatever a command prints. The exit code is the exec's, read from the
engine once the stream has ended.

At the deadline a timer thread runs a second exec that stops the command's whole tree as the
local runtime does: ``SIGTERM``, then, after :data:`KILL_GRACE_SECONDS` (cut short as soon as no
marked process is left), ``SIGKILL``. The tree is the command's process group (its children and
grandchildren) and every process whose ``/proc/<pid>/environ`` holds the command's mark
(:data:`~skillruntime.core.runtime.bridge.CANCEL_MARKER_VARIABLE`, the caller's token when it set
one, as the thread bridge of ``to_async`` does, else a fresh one), which catches what left the
group (``setsid``, double forks) with its environment — the mark the sweep of
:func:`~skillruntime.core.runtime.bridge.kill_marked_command` looks for when an async
``execute`` is cancelled. The stream then ends and the result says ``timed_out=True``,
``exit_code=-1``, with the output read so far. Only a process that left the group and cleared
its environment escapes; if it still holds the output pipe it cannot keep the call waiting: a
second after the kill the client closes the stream.

**Gated commands.** ``run(..., gate=...)`` starts the exec with its standard input attached and
the wrapper behind :data:`GATE` (:data:`GATED_WRAPPER`): the shell waits for one line on its
input before doing anything else. While it waits, the client calls ``gate`` (the runtime makes a
warm-pool member's workspace with it, overlapping the exec's start; docs/docker-runtime.md,
"Warm pools"), then sends ``go``: the wrapper moves its input to ``/dev/null`` and goes on as
above, so the command's user, environment, working directory and input are those of an ungated
command. When ``gate`` raises, the client sends ``stop`` and closes the stream: the shell exits
(:data:`GATE_REFUSED`) without running the command, and the error reaches the caller. The line
comes from the client only; nothing of the command is read or run before it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillruntime.core.errors import printable
from skillruntime.core.models import SkillExecutionResult
from skillruntime.core.runtime.bridge import CANCEL_MARKER_VARIABLE, marked_environment
from skillruntime.core.runtime.output import HeadTailBuffer

from .engine import DockerEngine, ExecStream
from .errors import CommandNotStartedError, DockerEngineError, DockerExecutionError

__all__ = [
    "GATE",
    "GATED_WRAPPER",
    "GATE_REFUSED",
    "KILL_GRACE_SECONDS",
    "MISSING_CWD",
    "WRAPPER",
    "CommandNotStartedError",
    "CommandRunner",
    "RawOutcome",
    "marked_environment",
    "stop_tree_script",
]

logger = logging.getLogger(__name__)

MISSING_CWD = 97
"""Exit status of the wrapper when the working directory does not exist (no header printed)."""

KILL_GRACE_SECONDS = 2.0
"""Seconds between ``SIGTERM`` and ``SIGKILL`` of a timed-out command's tree (the local runtime's
default ``kill_grace_seconds``), cut short when no marked process is left."""

_STREAM_GRACE_SECONDS = 1.0
"""After the deadline's ``SIGKILL``, how long the client waits for the stream to end before
closing it (a process out of the tree's reach may hold it)."""

_EXIT_POLL_SECONDS = 5.0
_HEADER_LIMIT = 32
_ENGINE_START_FAILURE = "OCI runtime exec failed"
"""How the engine's own error begins when it cannot start an exec's process."""

WRAPPER = (
    'cd -- "$1" 2>/dev/null || exit 97\n'
    "if command -v bash >/dev/null 2>&1; then s=bash; else s=sh; fi\n"
    "exec 3>&2 2>/dev/null\n"
    '"$s" -c \'exec 2>&3 3>&-; printf "%s\\n" "$$"; exec setsid "$0" -c -- "$1"\' '
    '"$s" "$2" </dev/null\n'
)
"""The wrapper (``sh -c WRAPPER skillruntime <cwd> <command>``); see the module docs."""


GATE_REFUSED = 96
"""Exit status of a gated wrapper told ``stop`` (or whose input ended): the command never ran."""

GATE = 'IFS= read -r g || exit 96\n[ "$g" = go ] || exit 96\nexec </dev/null\n'
"""The gate put before the wrapper: wait for the client's ``go`` (see the module docs)."""

GATED_WRAPPER = GATE + WRAPPER
"""The wrapper behind its gate (``sh -c GATED_WRAPPER skillruntime <cwd> <command>``)."""


def stop_tree_script(token: str, grace: float = KILL_GRACE_SECONDS) -> str:
    """A POSIX sh script (``sh -c SCRIPT name <pgid>``) that stops the tree of the command
    marked ``token``: ``SIGTERM`` to the process group ``<pgid>`` and to every process whose
    environment holds the mark, up to ``grace`` seconds (polled every tenth of a second) for
    the marked processes to end, then ``SIGKILL`` to both, three sweeps (children forked
    meanwhile are caught). It finds the marked processes as
    :func:`~skillruntime.core.runtime.bridge.kill_marked_command` does: one ``grep -z`` over
    every ``/proc/<pid>/environ`` where grep has it, one ``tr | grep`` per process otherwise."""
    return (
        f"m='{CANCEL_MARKER_VARIABLE}={token}'; g=$1; "
        "if printf 'a\\000' | grep -qz a 2>/dev/null; then "
        'marked() { grep -lzxF "$m" /proc/[0-9]*/environ 2>/dev/null '
        "| sed 's#^/proc/\\([0-9]*\\)/environ$#\\1#'; }; "
        "else "
        "marked() { for d in /proc/[0-9]*; do "
        "{ tr '\\000' '\\n' < \"$d/environ\"; } 2>/dev/null | grep -qxF \"$m\" "
        '&& echo "${d#/proc/}"; done; }; '
        "fi; "
        'stop() { kill -"$1" -- "-$g" 2>/dev/null; for p in $(marked); do '
        '[ "$p" = "$$" ] || kill -"$1" "$p" 2>/dev/null; done; }; '
        f"stop TERM; i={max(0, math.ceil(grace * 10))}; "
        'while [ "$i" -gt 0 ] && [ -n "$(marked)" ]; do sleep 0.1; i=$((i - 1)); done; '
        "stop KILL; stop KILL; stop KILL; true"
    )


@dataclass
class RawOutcome:
    """What a plain exec gave: its exit code and both streams (each cut to ``cap`` bytes)."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool


def _close(stream: Any) -> None:
    try:
        stream.close()
    except Exception:  # closing a stream that already ended or broke
        logger.debug("closing a command stream failed", exc_info=True)


class _Capped:
    """Keeps the first ``cap`` bytes of a stream and whether more came."""

    __slots__ = ("cap", "data", "truncated")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.truncated = False

    def feed(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        if len(chunk) > room:
            self.truncated = True
            chunk = chunk[: max(room, 0)]
        self.data += chunk


class CommandRunner:
    """Runs commands and file scripts in containers of one engine."""

    def __init__(self, engine: DockerEngine) -> None:
        self._engine = engine

    # ------------------------------------------------------------ commands

    def run(
        self,
        container_id: str,
        command: str,
        *,
        working_directory: str,
        environment: Mapping[str, str],
        user: str | None,
        timeout_seconds: float,
        max_output_bytes: int,
        gate: Callable[[], None] | None = None,
    ) -> SkillExecutionResult:
        """Run ``command`` through the wrapper; see the module docs. With ``gate``, the exec
        starts first and waits; ``gate()`` runs meanwhile and the command only once it returned
        (what it raises is raised here, the command not run). The deadline counts from then."""
        started = time.monotonic()
        marked, token = marked_environment(environment)
        wrapper = WRAPPER if gate is None else GATED_WRAPPER
        try:
            exec_id = self._engine.exec_create(
                container_id,
                ["/bin/sh", "-c", wrapper, "skillruntime", working_directory, command],
                user=user,
                environment=marked,
                stdin=gate is not None,
            )
        except DockerEngineError as exc:
            raise CommandNotStartedError(str(exc), status_code=exc.status_code) from exc
        opened = None if gate is None else self._open_gated(exec_id, gate)
        stdout = HeadTailBuffer(max_output_bytes)
        stderr = HeadTailBuffer(max_output_bytes)
        header = bytearray()
        state = _Deadline(lambda pgid: self._kill_tree(container_id, pgid, token, user))

        def on_stdout(chunk: bytes) -> None:
            if state.pgid is not None:
                stdout.feed(chunk)
                return
            header.extend(chunk)
            end = header.find(b"\n")
            if end < 0:
                if len(header) > (4096 if header.startswith(b"OCI") else _HEADER_LIMIT):
                    raise DockerExecutionError("the command wrapper sent no process id")
                return
            pgid = header[:end].decode("ascii", "replace")
            if not pgid.isdigit():
                line = bytes(header[:end]).decode("utf-8", "replace").strip()
                if line.startswith(_ENGINE_START_FAILURE):
                    # The engine could not start the exec's process (a full process table of
                    # the container, for one): it wrote its own error where output goes.
                    raise CommandNotStartedError(
                        f"the engine could not start the command: {line[:300]}"
                    )
                raise DockerExecutionError("the command wrapper sent no process id")
            rest = bytes(header[end + 1 :])
            header.clear()
            state.started(int(pgid))
            if rest:
                stdout.feed(rest)

        self._pump(exec_id, on_stdout, stderr.feed, timeout_seconds, state, opened=opened)
        duration = time.monotonic() - started
        out_text, out_cut = stdout.text()
        err_text, err_cut = stderr.text()
        if state.timed_out:
            exit_code = -1
        else:
            exit_code = self._exit_code(exec_id)
            if state.pgid is None:
                if exit_code == MISSING_CWD:
                    raise DockerExecutionError(
                        f"Working directory does not exist: {printable(working_directory)}"
                    )
                raise DockerExecutionError(
                    f"the command could not be started in the container (exit code {exit_code})"
                )
        return SkillExecutionResult(
            exit_code=exit_code,
            stdout=out_text,
            stderr=err_text,
            timed_out=state.timed_out,
            duration_seconds=duration,
            stdout_truncated=out_cut,
            stderr_truncated=err_cut,
        )

    def run_plain(
        self,
        container_id: str,
        argv: Sequence[str],
        *,
        user: str | None,
        timeout_seconds: float = 300.0,
        cap: int = 64 * 1024 * 1024,
    ) -> RawOutcome:
        """Run ``argv`` as it is (no wrapper; file scripts), keeping at most ``cap`` bytes per
        stream; at the deadline the stream is closed and ``timed_out`` set."""
        exec_id = self._engine.exec_create(container_id, argv, user=user)
        stdout = _Capped(cap)
        stderr = _Capped(cap)
        state = _Deadline(None)
        self._pump(exec_id, stdout.feed, stderr.feed, timeout_seconds, state)
        exit_code = -1 if state.timed_out else self._exit_code(exec_id)
        return RawOutcome(
            exit_code=exit_code,
            stdout=bytes(stdout.data),
            stderr=bytes(stderr.data),
            stdout_truncated=stdout.truncated,
            stderr_truncated=stderr.truncated,
            timed_out=state.timed_out,
        )

    # ------------------------------------------------------------- helpers

    def _open_gated(self, exec_id: str, gate: Callable[[], None]) -> ExecStream:
        """Start the gated exec, run ``gate`` while its shell waits, then let it go on (or,
        when ``gate`` raised, tell it to stop, close the stream and raise that)."""
        stream = self._engine.exec_stream(exec_id)
        try:
            gate()
        except BaseException:
            with contextlib.suppress(OSError):
                stream.send(b"stop\n")
            _close(stream)
            raise
        try:
            stream.send(b"go\n")
        except OSError as exc:
            _close(stream)
            raise DockerExecutionError(
                f"the command's stream broke before it started: {type(exc).__name__}"
            ) from exc
        return stream

    def _pump(
        self,
        exec_id: str,
        on_stdout: Callable[[bytes], None],
        on_stderr: Callable[[bytes], None],
        timeout_seconds: float,
        state: _Deadline,
        *,
        opened: ExecStream | None = None,
    ) -> None:
        stream = opened if opened is not None else self._engine.exec_stream(exec_id)
        state.stream = stream
        timer = threading.Timer(timeout_seconds, state.expire)
        timer.daemon = True
        timer.start()
        try:
            for out_chunk, err_chunk in stream:
                if out_chunk:
                    on_stdout(out_chunk)
                if err_chunk:
                    on_stderr(err_chunk)
        except (DockerExecutionError, CommandNotStartedError):
            raise  # the wrapper's header said so (on_stdout): not a broken stream
        except Exception as exc:  # a broken or closed connection, whatever the layer says
            if not state.closed:
                raise DockerExecutionError(
                    f"the command's output stream broke: {type(exc).__name__}"
                ) from exc
        finally:
            timer.cancel()
            state.finish()
            _close(stream)

    def _exit_code(self, exec_id: str) -> int:
        """The exec's exit code, once the engine has seen the process end."""
        deadline = time.monotonic() + _EXIT_POLL_SECONDS
        delay = 0.002
        while True:
            info = self._engine.exec_inspect(exec_id)
            code = info.get("ExitCode")
            if not info.get("Running") and code is not None:
                return int(code)
            if time.monotonic() > deadline:
                raise DockerExecutionError("the engine did not report the command's exit code")
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _kill_tree(self, container_id: str, pgid: int, token: str, user: str | None) -> None:
        """Stop the process group ``pgid`` and the processes marked ``token`` in the container
        (a second exec of :func:`stop_tree_script`)."""
        try:
            outcome = self.run_plain(
                container_id,
                ["/bin/sh", "-c", stop_tree_script(token), "skillruntime-kill", str(pgid)],
                user=user,
                timeout_seconds=30.0,
                cap=4096,
            )
        except (DockerEngineError, DockerExecutionError):
            logger.warning("killing the processes of a timed-out command failed", exc_info=True)
            return
        if outcome.exit_code != 0:
            logger.warning(
                "killing the processes of a timed-out command exited %d", outcome.exit_code
            )


class _Deadline:
    """The deadline of one exec: kills the command's group (when ``kill`` is given and its pgid
    known), then closes the stream a second after the kill if it has not ended."""

    def __init__(self, kill: Callable[[int], None] | None) -> None:
        self._kill = kill
        self._lock = threading.Lock()
        self._done = False
        self._closer: threading.Timer | None = None
        self.stream: Any = None
        self.pgid: int | None = None
        self.timed_out = False
        self.closed = False

    def started(self, pgid: int) -> None:
        """The command runs as group ``pgid``; kill it now if the deadline already passed."""
        with self._lock:
            self.pgid = pgid
            late = self.timed_out and not self._done
        if late and self._kill is not None:
            self._kill(pgid)

    def expire(self) -> None:
        """The deadline passed (timer thread)."""
        with self._lock:
            if self._done:
                return
            self.timed_out = True
            pgid = self.pgid
        if self._kill is None:
            self._close_now()
            return
        if pgid is not None:
            self._kill(pgid)
        closer = threading.Timer(_STREAM_GRACE_SECONDS, self._close_now)
        closer.daemon = True
        with self._lock:
            if self._done:
                return
            self._closer = closer
        closer.start()

    def _close_now(self) -> None:
        with self._lock:
            if self._done:
                return
            self.closed = True
            stream = self.stream
        if stream is not None:
            _close(stream)

    def finish(self) -> None:
        """The stream ended: stop the timers."""
        with self._lock:
            self._done = True
            closer = self._closer
        if closer is not None:
            closer.cancel()
