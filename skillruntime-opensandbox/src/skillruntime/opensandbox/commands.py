"""Running one command through execd's event stream into bounded buffers.

The command is sent as shell text (execd runs it with ``bash -c``, ``sh -c`` where bash is
missing) wrapped as ``( <command>\\n) </dev/null; rc=$?; printf '\\n'; printf '\\n' >&2; exit $rc``:
stdin is empty, and both streams end with one extra newline that the wrapper adds.

**Trailing-newline rule.** execd reports output line by line without terminators, so whether the
last line ended with a newline is lost on the wire. Because the wrapper appends exactly one
newline to each stream, the output is rebuilt exactly: every line gets its newline back and the
appended one is dropped. When the wrapper did not finish (the command was killed for time or
interrupted) the last line is reported with a newline whether or not it had one.

Timeouts are enforced twice: execd kills the command's process group after
``timeout_seconds`` (exit code ``-1``), and because the SDK's stream has no read timeout an outer
deadline (``timeout_seconds`` plus a grace period) interrupts the command and returns what was
collected if the stream does not end. A stream lost *after* its terminal event still yields the
result; a stream that ends without one is an :class:`~.errors.OpenSandboxExecutionError`, never
exit code 0. Commands are never retried.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from opensandbox.models.execd import RunCommandOpts
from opensandbox.models.execd_sync import ExecutionHandlersSync
from opensandbox.sync.sandbox import SandboxSync
from skillruntime.core.models import SkillExecutionResult

from .errors import OpenSandboxExecutionError, execution_error
from .output import LineOutput

__all__ = [
    "DEFAULT_DEADLINE_GRACE_SECONDS",
    "CommandNotStartedError",
    "CommandRunner",
    "wrap_command",
]

logger = logging.getLogger(__name__)

DEFAULT_DEADLINE_GRACE_SECONDS = 10.0
"""Seconds past the command timeout before the outer deadline interrupts the command."""

INTERRUPT_WAIT_SECONDS = 5.0
"""Seconds the outer deadline waits for the stream to end after interrupting the command."""

_SIGNAL_KILLED = -1


class CommandNotStartedError(OpenSandboxExecutionError):
    """The request failed before execd acknowledged the command (no ``init`` event)."""


def wrap_command(command: str) -> str:
    """The shell text actually sent: empty stdin and one appended newline per stream."""
    return (
        f"( {command}\n) </dev/null; __skillruntime_rc=$?; "
        "printf '\\n'; printf '\\n' >&2; exit $__skillruntime_rc"
    )


@dataclass
class _Progress:
    """What the event handlers learned; guarded by the runner's lock."""

    execution_id: str | None = None
    exit_code: int | None = None
    terminal: bool = False
    error_text: str | None = None
    abandoned: bool = False


class CommandRunner:
    """Runs commands in one sandbox; see the module docs for the exact behaviour."""

    def __init__(
        self,
        *,
        uid: int | None = None,
        gid: int | None = None,
        deadline_grace_seconds: float = DEFAULT_DEADLINE_GRACE_SECONDS,
        interrupt_wait_seconds: float = INTERRUPT_WAIT_SECONDS,
    ) -> None:
        self._uid = uid
        self._gid = gid
        self._grace = deadline_grace_seconds
        self._interrupt_wait = interrupt_wait_seconds

    def run(
        self,
        sandbox: SandboxSync,
        command: str,
        *,
        working_directory: str,
        environment: Mapping[str, str],
        timeout_seconds: float,
        max_output_bytes: int,
    ) -> SkillExecutionResult:
        """Run ``command`` once and return its result (see the module docs)."""
        stdout = LineOutput(max_output_bytes)
        stderr = LineOutput(max_output_bytes)
        progress = _Progress()
        lock = threading.Lock()

        def on_init(event: Any) -> None:
            with lock:
                progress.execution_id = getattr(event, "id", None) or None

        def on_stdout(message: Any) -> None:
            with lock:
                if not progress.abandoned:
                    stdout.add_line(str(message.text or ""))

        def on_stderr(message: Any) -> None:
            with lock:
                if not progress.abandoned:
                    stderr.add_line(str(message.text or ""))

        def on_complete(_: Any) -> None:
            with lock:
                progress.terminal = True
                progress.exit_code = 0

        def on_error(error: Any) -> None:
            with lock:
                progress.terminal = True
                try:
                    progress.exit_code = int(str(error.value))
                except (TypeError, ValueError):
                    progress.exit_code = None
                    progress.error_text = str(getattr(error, "name", "") or "error")

        handlers = ExecutionHandlersSync(
            on_init=on_init,
            on_stdout=on_stdout,
            on_stderr=on_stderr,
            on_execution_complete=on_complete,
            on_error=on_error,
            skip_accumulation=True,
        )
        opts = RunCommandOpts(
            working_directory=working_directory,
            timeout=timedelta(milliseconds=max(1, int(timeout_seconds * 1000))),
            envs=dict(environment),
            uid=self._uid,
            gid=self._gid if self._uid is not None else None,
        )
        outcome: dict[str, BaseException] = {}
        finished = threading.Event()

        def stream() -> None:
            try:
                sandbox.commands.run(wrap_command(command), opts=opts, handlers=handlers)
            except BaseException as exc:  # handed to the caller's thread
                outcome["error"] = exc
            finally:
                finished.set()

        started = time.monotonic()
        worker = threading.Thread(target=stream, name="opensandbox-command", daemon=True)
        worker.start()
        interrupted = False
        if not finished.wait(timeout_seconds + self._grace):
            interrupted = True
            self._interrupt(sandbox, progress, lock)
            finished.wait(self._interrupt_wait)
        with lock:
            progress.abandoned = True
            duration = time.monotonic() - started
            error = outcome.get("error")
            if not progress.terminal and not interrupted:
                if error is not None:
                    failure = execution_error("running a command", error)
                    if progress.execution_id is None:
                        raise CommandNotStartedError(
                            str(failure),
                            code=failure.code,
                            status_code=failure.status_code,
                            request_id=failure.request_id,
                        ) from error
                    raise failure from error
                raise OpenSandboxExecutionError(
                    "The OpenSandbox command stream ended without a completion or error event; "
                    "the command's outcome is unknown (it was not retried)"
                )
            if error is not None and progress.terminal:
                logger.debug("command stream lost after its terminal event: %s", type(error))
            if progress.terminal and progress.exit_code is None:
                raise OpenSandboxExecutionError(
                    f"OpenSandbox could not run the command ({progress.error_text})"
                )
            exit_code = progress.exit_code if progress.terminal else None
            killed = exit_code is None or exit_code == _SIGNAL_KILLED
            timed_out = interrupted or (killed and duration >= timeout_seconds * 0.95 - 0.05)
            wrapper_finished = exit_code is not None and exit_code >= 0
            out_text, out_truncated = stdout.finish(drop_final_newline=wrapper_finished)
            err_text, err_truncated = stderr.finish(drop_final_newline=wrapper_finished)
        return SkillExecutionResult(
            exit_code=-1 if timed_out or exit_code is None else exit_code,
            stdout=out_text,
            stderr=err_text,
            timed_out=timed_out,
            duration_seconds=duration,
            stdout_truncated=out_truncated,
            stderr_truncated=err_truncated,
        )

    @staticmethod
    def _interrupt(sandbox: SandboxSync, progress: _Progress, lock: threading.Lock) -> None:
        with lock:
            execution_id = progress.execution_id
        if execution_id is None:
            logger.warning("command passed its deadline before execd named it; cannot interrupt")
            return
        try:
            sandbox.commands.interrupt(execution_id)
        except Exception as exc:
            logger.warning("interrupting a command past its deadline failed: %s", type(exc))
