"""The rules of one command in a sandbox through execd's event stream, free of I/O.

The command runs inside the wrapper of :mod:`.wrapper`: its output goes to files in the sandbox
and only the head and tail of each stream (``max_output_bytes``), base64-encoded, cross the
network after the command ended, followed by a trailer with the exit status, the timeout flag
and the full stream sizes. So the output is rebuilt byte for byte (``\\r``, trailing newlines and
invalid UTF-8 included, decoded with replacement characters), the client keeps at most the caps
in memory whatever the command prints (one 256 MiB line included: it never reaches the event
stream, which the SDK buffers an event at a time), and a cut stream shows the same marker as on
every runtime (:func:`skillruntime.core.runtime.output.head_tail_text`).

**Returning early, never hanging up.** execd keeps the stream open about a second after its final
event (``EXECD_API_GRACE_SHUTDOWN``), and a client that hangs up on a command stream before execd
ends it makes execd take a SIGPIPE, which it relays to *every command then running in the
sandbox*. So the runner returns the result as soon as the trailer (or, without one, the terminal
event) has arrived, while the stream goes on being read to its end off the caller's path (a
*drain*: the reading thread, or task, carries on and ignores what follows). A command costs no
grace period and no neighbour is killed. A runner's ``wait_for_drains`` waits (bounded) for the
drains in flight; the runtime calls it before it releases a shared sandbox's connections and
before it kills a sandbox (execd dies with it, cutting the streams, which the SDK logs at ERROR).

Timeouts are enforced in the sandbox: at ``timeout_seconds`` the wrapper's watchdog sends the
command's process group ``TERM``, then ``KILL`` once the command's shell ended or after
:data:`~.wrapper.KILL_GRACE_SECONDS` (as the local runtime does), and the result says
``timed_out`` with the output produced so far. execd
is given a later timeout as a backstop, and because the SDK's stream has no read timeout an
outer deadline (``timeout_seconds`` plus a grace period) interrupts the command and returns what
is known if the stream does not end. A stream lost after the trailer or the terminal event still
yields the result; a stream that ends without either is an
:class:`~.errors.OpenSandboxExecutionError`, never exit code 0. A wrapper killed before its report
(execd's terminal event says ``-1`` but no trailer came) is a :class:`CommandOutcomeUnknownError`:
the command itself may still run, until its watchdog kills it, past the deadline and the kill
grace, which the error carries (``ends_by``: the timeout plus the grace plus a margin, counted
from execd's ``init`` event, after which the watchdog's clock starts). The exception is an image
without ``setsid``, where the watchdog's kill of a command that outlived its ``TERM`` ends the
wrapper with the command: the watchdog says so on the stream first, and that is a timeout
(``timed_out``, exit code -1, no output). Commands are never retried.

The rules live here once, free of I/O: the options and wrapper of a command
(:func:`command_options`, :func:`command_script`), what its events told
(:class:`CommandEvents`) and the result or typed error they give (:func:`command_result`). The
runners only move the stream: :class:`~.async_commands.AsyncCommandRunner` on the SDK's async
API, and :class:`~.commands.CommandRunner` (generated from it by ``scripts/generate_sync.py``) on
its sync API.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from opensandbox.models.execd import RunCommandOpts
from skillruntime.core.errors import printable
from skillruntime.core.models import SkillExecutionResult
from skillruntime.core.runtime.bridge import CANCEL_MARKER_VARIABLE, marker_token

from .errors import (
    CommandNotStartedError,
    CommandOutcomeUnknownError,
    OpenSandboxExecutionError,
    execution_error,
)
from .wrapper import (
    FLAG_INTERRUPTED,
    FLAG_NO_BASE64,
    FLAG_TIMED_OUT,
    KILL_GRACE_SECONDS,
    WrapperOutput,
    build_wrapper,
)

__all__ = [
    "DEADLINE_MARGIN_SECONDS",
    "DEFAULT_DEADLINE_GRACE_SECONDS",
    "DRAIN_WAIT_SECONDS",
    "INTERRUPT_WAIT_SECONDS",
    "CommandEvents",
    "CommandNotStartedError",
    "CommandOutcomeUnknownError",
    "command_options",
    "command_result",
    "command_script",
    "marker_token",
]

logger = logging.getLogger(__name__)

DEFAULT_DEADLINE_GRACE_SECONDS = 10.0
"""Seconds past the command timeout before the outer deadline interrupts the command."""

INTERRUPT_WAIT_SECONDS = 5.0
"""Seconds the outer deadline waits for the stream to end after interrupting the command."""

BACKSTOP_SECONDS = 2.0
"""execd's own timeout is the command's plus the kill grace plus this: the wrapper's watchdog
fires, and has killed the command, first."""

RUN_DIRECTORY = "/tmp/.skillruntime-runs"
"""Private directory (mode 0700) of the wrapper's output files, suffixed with the uid."""

DRAIN_WAIT_SECONDS = 5.0
"""Longest wait at close for command streams still being read to their end (execd ends each
one about a second after its final event)."""

DEADLINE_MARGIN_SECONDS = 0.5
"""Past a command's deadline and the kill grace its watchdog has killed it: the margin covers the
kill itself."""

_SIGNAL_KILLED = -1


@dataclass
class _Progress:
    """What the event handlers learned; guarded by :attr:`CommandEvents.lock`."""

    execution_id: str | None = None
    exit_code: int | None = None
    terminal: bool = False
    error_text: str | None = None
    abandoned: bool = False
    ends_by: float = 0.0
    budget: float = 0.0
    """The command's timeout plus the watchdog's :data:`~.wrapper.KILL_GRACE_SECONDS` (``TERM``
    to ``KILL``) plus :data:`DEADLINE_MARGIN_SECONDS`; ``ends_by`` is that long after the request
    was sent, then after execd's ``init`` event (the command has started by then)."""

    def start(self, timeout_seconds: float) -> None:
        """Set the deadline before the request is sent."""
        self.budget = timeout_seconds + KILL_GRACE_SECONDS + DEADLINE_MARGIN_SECONDS
        self.ends_by = time.monotonic() + self.budget


class CommandEvents:
    """What one command's event stream told so far: the execution id, the terminal event and
    the wrapper's output (bounded). Callers hold :attr:`lock` around every call: the sync
    runner's handlers run on the command's reading thread (on the async face, where handlers
    and caller share the command loop, it is never contended). Each ``on_*`` method returns
    ``True`` once reading can stop."""

    def __init__(self, nonce: str, max_output_bytes: int) -> None:
        self.output = WrapperOutput(nonce, max_output_bytes)
        self.progress = _Progress()
        self.lock = threading.Lock()

    @property
    def known(self) -> bool:
        """Whether the result is known (the trailer, a setup failure or the terminal event came):
        the caller can have it while the rest of the stream is drained."""
        output = self.output
        return self.progress.terminal or output.trailer is not None or output.setup_failed

    def on_init(self, event: Any) -> None:
        progress = self.progress
        progress.execution_id = getattr(event, "id", None) or None
        # The watchdog's clock starts in the sandbox after execd started the command, which
        # can be well after the request left (a loaded host, a slow network): count from here.
        progress.ends_by = max(progress.ends_by, time.monotonic() + progress.budget)

    def on_stdout(self, message: Any) -> bool:
        if self.progress.abandoned:
            return False
        return self.output.add_line(str(message.text or ""))

    def on_complete(self) -> bool:
        if self.progress.abandoned:
            return True
        self.progress.terminal = True
        self.progress.exit_code = 0
        return True

    def on_error(self, error: Any) -> bool:
        if self.progress.abandoned:
            return True
        self.progress.terminal = True
        try:
            self.progress.exit_code = int(str(error.value))
        except (TypeError, ValueError):
            self.progress.exit_code = None
            self.progress.error_text = str(getattr(error, "name", "") or "error")
        return True

    def result(
        self,
        *,
        error: BaseException | None,
        interrupted: bool,
        duration: float,
        timeout_seconds: float,
    ) -> SkillExecutionResult:
        """The command's result (stops further output from counting), or the typed error."""
        self.progress.abandoned = True
        return command_result(
            self.progress,
            self.output,
            error=error,
            interrupted=interrupted,
            duration=duration,
            timeout_seconds=timeout_seconds,
        )


def command_options(
    *,
    uid: int | None,
    gid: int | None,
    working_directory: str,
    environment: Mapping[str, str],
    timeout_seconds: float,
) -> RunCommandOpts:
    """execd's options of one command: its own timeout is a backstop past the wrapper's. The
    run's marker (:data:`~skillruntime.core.runtime.bridge.CANCEL_MARKER_VARIABLE`) is left out
    of execd's environment: the wrapper gives it to the command alone (:func:`command_script`)."""
    return RunCommandOpts(
        working_directory=working_directory,
        timeout=timedelta(
            milliseconds=int((timeout_seconds + KILL_GRACE_SECONDS + BACKSTOP_SECONDS) * 1000)
        ),
        envs={name: value for name, value in environment.items() if name != CANCEL_MARKER_VARIABLE},
        uid=uid,
        gid=gid if uid is not None else None,
    )


def command_script(
    command: str,
    *,
    uid: int | None,
    nonce: str,
    max_output_bytes: int,
    timeout_seconds: float,
    environment: Mapping[str, str],
) -> str:
    """The wrapper text of one command (see :mod:`.wrapper`), whose processes carry the run's
    marker (:func:`marker_token`) in their environment: at the deadline the watchdog stops the
    command's process group and every marked process."""
    return build_wrapper(
        command=command,
        run_dir=f"{RUN_DIRECTORY}-{uid if uid is not None else 'default'}",
        run_id=secrets.token_hex(8),
        nonce=nonce,
        cap=max_output_bytes,
        timeout=timeout_seconds,
        marker=marker_token(environment),
    )


def command_result(
    progress: _Progress,
    output: WrapperOutput,
    *,
    error: BaseException | None,
    interrupted: bool,
    duration: float,
    timeout_seconds: float,
) -> SkillExecutionResult:
    """The result of a command from what its stream told, or the error of an unknown outcome."""
    trailer = output.trailer
    if output.malformed:
        logger.warning("the command wrapper's report was malformed; output may be incomplete")
    if output.setup_failed:
        raise OpenSandboxExecutionError(
            "the command could not start: the sandbox's run directory under /tmp cannot be created"
        )
    if trailer is None and not progress.terminal and not interrupted:
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
            "The OpenSandbox command stream ended without the command's report or a "
            "completion or error event; the command's outcome is unknown (it was not retried)"
        )
    if error is not None:
        logger.debug("command stream lost after the command's report: %s", type(error))
    if trailer is not None:
        if trailer.flag == FLAG_NO_BASE64:
            raise OpenSandboxExecutionError(
                f"the command ran (exit code {trailer.exit_code}) but its output cannot be "
                "sent: the sandbox image has no base64 program"
            )
        timed_out = (
            interrupted
            or output.watchdog_fired
            or trailer.flag in (FLAG_TIMED_OUT, FLAG_INTERRUPTED)
        )
        exit_code = -1 if timed_out else trailer.exit_code
    else:
        if progress.terminal and progress.exit_code is None:
            raise OpenSandboxExecutionError(
                "OpenSandbox could not run the command "
                f"({printable(progress.error_text or 'error')})"
            )
        code = progress.exit_code if progress.terminal else None
        if not interrupted and not output.watchdog_fired:
            # (A watchdog that fired without setsid killed the wrapper with the command, after
            # saying so: that is a timeout, not an unknown outcome.)
            if code == _SIGNAL_KILLED:
                raise CommandOutcomeUnknownError(
                    "the command wrapper was killed by a signal before it reported the "
                    "command's result; the command may run on until its timeout (it was not "
                    "retried)",
                    ends_by=progress.ends_by,
                )
            raise OpenSandboxExecutionError(
                f"the command wrapper ended (exit code {code}) without reporting the "
                "command's result"
            )
        timed_out = True
        exit_code = -1
    out_text, out_truncated = output.stdout()
    err_text, err_truncated = output.stderr()
    return SkillExecutionResult(
        exit_code=exit_code,
        stdout=out_text,
        stderr=err_text,
        timed_out=timed_out,
        duration_seconds=duration,
        stdout_truncated=out_truncated,
        stderr_truncated=err_truncated,
    )
