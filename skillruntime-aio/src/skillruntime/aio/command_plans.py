"""The command flows, free of I/O: ``/v1/bash/exec``, or ``/v1/shell/exec`` on older images.

A runner (:class:`~skillruntime.aio.commands.CommandRunner`, its async twin
:class:`~skillruntime.aio.async_commands.AsyncCommandRunner`) detects once which API the
service has (``POST /v1/bash/sessions/create`` answers 404 on images without ``/v1/bash``) and
runs every command inside the wrapper of :mod:`.script`, so both paths give separate
stdout/stderr, an exit code, a timeout that stops the command's whole tree (its process group
and every process holding the run's marker, ``SKILLRUNTIME_CANCEL_MARK=<token>``: ``SIGTERM``,
a grace of :data:`~.script.KILL_GRACE_SECONDS`, then ``SIGKILL``) and output bounded on the
service.

* **bash**: one ``/v1/bash/exec`` per command on a session of this runtime's pool; the command
  environment, with the run's marker, travels in the request's ``env`` field, never in the
  command text. The command runs in a subshell of the wrapper (no extra ``exec``), in a process
  group of its own whose id the wrapper records. The client keeps the deadline: the request's
  soft ``timeout`` answers ``running`` at it (an early answer is followed with
  ``/v1/bash/output``), and one more request, on another session, stops the command's tree
  and reports the partial output the run left; the timed-out session is retired. The request's
  ``hard_timeout`` is a backstop past the grace, after which the same request follows. The
  command can overwrite the group record, so the group is signalled only when the record names
  a live group leader started with the run's marker; the processes holding the marker are
  signalled as well. Each session reuses its stream files
  (emptied after every command, removed by :meth:`close`).
* **shell**: a pool of dedicated shell sessions (a session is never used by two commands at
  once). The environment (without the run's marker, which the wrapper puts on the command
  alone) is written to a private file that the wrapper sources and deletes; the wrapper's
  watchdog stops the command's tree at the deadline; the
  command runs synchronously with a short soft timeout, then ``wait``/``view`` polling; the
  result file is downloaded, unless the command printed nothing and its exit code came back
  in the ``exec`` answer. Past the deadline the session is killed and retired. A session
  the service reports ``terminated`` or unknown (HTTP 404) is replaced once; the command is
  re-sent only when it provably never started.

Commands are never retried otherwise. Internal read-only queries (stat, listings) may be marked
``retry_safe`` and then go through the client's retry policy.

The rules live once, in :class:`CommandPlans`: each flow is a generator that yields the I/O it
needs (:class:`Call`, :class:`Fetch`, :class:`Staging`) and receives the answers; failures are
thrown into it, so its ``try``/``finally`` blocks clean up as the flow would. The runners only
perform the steps: :mod:`.async_commands` with the async client, :mod:`.commands` (generated from
it) with the blocking :class:`~skillruntime.aio.client.AioClient`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import posixpath
import shlex
import threading
import time
import uuid
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from skillruntime.core.errors import ExecutionTransportError
from skillruntime.core.runtime.bridge import CANCEL_MARKER_VARIABLE

from .defaults import TEMP_ROOT_PATTERN
from .errors import AioNotFoundError, AioOperationError, AioSandboxError
from .script import (
    KILL_GRACE_SECONDS,
    WrapperOutcome,
    build_report,
    build_wrapper,
    json_script,
    parse_file_result,
    parse_inline_result,
    parse_stream_result,
    result_path,
    shell_line,
    started_path,
)

__all__ = [
    "TEMP_ROOT_PATTERN",
    "Call",
    "CommandMode",
    "CommandPlans",
    "CommandSpec",
    "Fetch",
    "Plan",
    "Staging",
    "Step",
    "drive",
    "too_large_result",
]

logger = logging.getLogger(__name__)

CommandMode = Literal["auto", "bash", "shell"]

_SOFT_TIMEOUT = 20.0
"""Longest single ``/v1/shell/exec`` or ``/v1/shell/wait`` call before polling again."""

_GRACE = 10.0
"""Seconds past a command's own deadline before the client gives up on the service."""

_SHELL_RUNNING = ("running", "no_change_timeout")

_BASH_RUNNING = ("running", "pending")

_KILLED = WrapperOutcome(-1, True, False, b"", b"", 0, 0)
"""The outcome of a command the service stopped at its deadline before the wrapper reported."""


T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """Step: one JSON call of the client; the answer sent back is the envelope's ``data``."""

    method: str
    endpoint: str
    json: Mapping[str, Any] | None = field(default=None)
    idempotent: bool = False
    read_timeout: float | None = None


@dataclass(frozen=True)
class Fetch:
    """Step: download the small file ``path``; the answer is its bytes. A refused download
    raises the client's error; more than ``limit`` bytes raise ``ExecutionTransportError``."""

    path: str
    limit: int


@dataclass(frozen=True)
class Staging:
    """Step: a fresh staging path ending in ``suffix``, with ``temp_root`` created."""

    suffix: str = ""


Step = Call | Fetch | Staging
"""The I/O a command flow asks its runner for."""

Plan = Generator[Step, Any, T]
"""A command flow: yields steps, receives their answers, returns its result."""


def drive(plan: Plan[T], perform: Any) -> T:
    """Run ``plan`` to its end, performing each step with the blocking ``perform(step)``;
    a failure of a step is thrown into the plan."""
    try:
        step = next(plan)
        while True:
            try:
                answer = perform(step)
            except BaseException as exc:
                step = plan.throw(exc)
            else:
                step = plan.send(answer)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def too_large_result() -> ExecutionTransportError:
    """The error of a command result file larger than the wrapper can have written."""
    return ExecutionTransportError("The command result file is larger than expected")


@dataclass(frozen=True)
class CommandSpec:
    """One command for the wrapper: text, working directory, environment, limits."""

    command: str
    cwd: str
    environment: Mapping[str, str]
    timeout: float
    cap: int
    make_dirs: Sequence[str] = ()


class _Pool:
    """Session ids of one API, each used by at most one command at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[str] = []
        self.all: set[str] = set()

    def take(self) -> str | None:
        with self._lock:
            return self._idle.pop() if self._idle else None

    def add(self, session_id: str) -> None:
        with self._lock:
            self.all.add(session_id)

    def give_back(self, session_id: str) -> None:
        with self._lock:
            if session_id in self.all:
                self._idle.append(session_id)

    def retire(self, session_id: str) -> None:
        with self._lock:
            self.all.discard(session_id)
            with contextlib.suppress(ValueError):
                self._idle.remove(session_id)

    def drain(self) -> list[str]:
        with self._lock:
            ids = sorted(self.all)
            self.all.clear()
            self._idle.clear()
            return ids


def _split_marker(environment: Mapping[str, str]) -> tuple[dict[str, str], str]:
    """``environment`` without the run's marker
    (:data:`~skillruntime.core.runtime.bridge.CANCEL_MARKER_VARIABLE`), and the marker's token:
    the caller's when it is letters and digits (the runtime and the thread bridge sweep for
    their own token), else a fresh one."""
    rest = {name: value for name, value in environment.items() if name != CANCEL_MARKER_VARIABLE}
    token = environment.get(CANCEL_MARKER_VARIABLE, "")
    return rest, token if token.isalnum() else uuid.uuid4().hex


def _env_file_text(environment: Mapping[str, str]) -> str:
    return "".join(f"{name}={shlex.quote(value)}\n" for name, value in environment.items())


class CommandPlans:
    """The command flows of both runners, free of I/O (see the module docs).

    ``mode`` forces an API (``bash``/``shell``) or detects it on first use (``auto``).
    ``temp_root`` is a directory on the service for run directories and staged files;
    ``read_timeout`` is the client's read timeout, added to every long call's own.
    """

    def __init__(self, *, read_timeout: float, mode: CommandMode, temp_root: str) -> None:
        if not TEMP_ROOT_PATTERN.fullmatch(temp_root) or temp_root.rstrip("/") == "":
            raise ValueError(
                "temp_root must be an absolute path other than / made of letters, digits, "
                "'.', '_', '-' and '/'"
            )
        self._read_timeout = read_timeout
        self._mode: Literal["bash", "shell"] | None = None if mode == "auto" else mode
        self._temp_root = posixpath.join(temp_root, ".skillruntime-aio")
        self._staging_root = temp_root.rstrip("/")
        self._bash = _Pool()
        self._shell = _Pool()
        self._shell_used: set[str] = set()
        self._bash_used: set[str] = set()
        self._closed = False
        self._staging_ready = False

    def _new_staging_path(self, suffix: str) -> str:
        return posixpath.join(self._staging_root, f".skillruntime-aio-{uuid.uuid4().hex}{suffix}")

    def _staging_spec(self) -> CommandSpec:
        """The command that creates ``temp_root`` (every wrapper creates its run directory
        below it, so any command would)."""
        return CommandSpec(
            command=":",
            cwd="/",
            environment={},
            timeout=60.0,
            cap=1024,
            make_dirs=(self._staging_root,),
        )

    def _command_plan(
        self, mode: Literal["bash", "shell"], spec: CommandSpec
    ) -> Plan[WrapperOutcome]:
        if mode == "bash":
            return self._run_bash(spec)
        return self._run_shell(spec)

    def _detect_plan(self) -> Plan[Literal["bash", "shell"]]:
        try:
            session_id = yield from self._create_bash_session()
        except AioNotFoundError:
            logger.info("the AIO Sandbox has no /v1/bash API; using /v1/shell sessions")
            return "shell"
        self._bash.give_back(session_id)
        return "bash"

    # ------------------------------------------------------------------ bash

    def _create_bash_session(self) -> Plan[str]:
        session_id = f"skillruntime-{uuid.uuid4().hex[:16]}"
        yield Call(
            "POST", "/v1/bash/sessions/create", json={"session_id": session_id}, idempotent=True
        )
        self._bash.add(session_id)
        self._bash_used.add(session_id)
        return session_id

    def _run_bash(self, spec: CommandSpec) -> Plan[WrapperOutcome]:
        session_id = self._bash.take() or (yield from self._create_bash_session())
        nonce = uuid.uuid4().hex
        run_dir = posixpath.join(self._temp_root, "runs")
        run_id = session_id  # one command at a time: the session's files are reused
        script = build_wrapper(
            command=spec.command,
            cwd=spec.cwd,
            run_dir=run_dir,
            run_id=run_id,
            nonce=nonce,
            cap=spec.cap,
            timeout=spec.timeout,
            to_file=False,
            make_dirs=spec.make_dirs,
            watchdog=False,
            keep_files=True,
        )
        # The client keeps the command's deadline: the request's soft ``timeout`` answers
        # ``running`` at it, and one more request, on another session, stops the command's
        # process group (once verified: the record is the command's to overwrite) and every
        # process holding the run's marker — SIGTERM, a grace, SIGKILL — then reports what the
        # run left. The service's ``hard_timeout`` is only a backstop past that grace.
        environment, token = _split_marker(spec.environment)
        environment[CANCEL_MARKER_VARIABLE] = token
        marker = f"{CANCEL_MARKER_VARIABLE}={token}"
        body: dict[str, Any] = {
            "command": json_script(script),
            "session_id": session_id,
            "timeout": spec.timeout,
            "hard_timeout": spec.timeout + KILL_GRACE_SECONDS + _GRACE,
            "max_output_length": 2 * spec.cap + 8192,
            "env": environment,
        }
        read_timeout = spec.timeout + 2 * _GRACE + self._read_timeout
        deadline = time.monotonic() + spec.timeout
        healthy = False
        try:
            data = yield Call("POST", "/v1/bash/exec", json=body, read_timeout=read_timeout)
            stdout, stderr, status = yield from self._bash_finish(session_id, data, deadline)
            if status in _BASH_RUNNING:
                # The deadline passed with the command running: this session is retired.
                left = yield from self._bash_stop(run_dir, run_id, spec.cap, marker)
                return left or _KILLED
            outcome = parse_stream_result(nonce, stdout, stderr)
            if status == "timed_out":
                # Killed by the service's backstop: stop the command's process group (the
                # service may have killed the wrapper alone), then report what the run left.
                left = yield from self._bash_report(session_id, run_dir, run_id, spec.cap, marker)
                outcome = outcome or left or _KILLED
            elif outcome is None:
                # The wrapper ended without reporting (killed, or the command killed it):
                # the command's own process group may still run.
                with contextlib.suppress(AioSandboxError):
                    yield from self._bash_report(session_id, run_dir, run_id, spec.cap, marker)
            healthy = True
        finally:
            if healthy:
                self._bash.give_back(session_id)
            else:
                yield from self._retire_bash(session_id)
        if outcome is not None:
            return outcome
        if status == "killed":
            return _KILLED
        raise ExecutionTransportError(
            f"The AIO Sandbox returned no result for the command (status {status!r}); "
            "the command wrapper could not run"
        )

    def _bash_stop(
        self, run_dir: str, run_id: str, cap: int, marker: str
    ) -> Plan[WrapperOutcome | None]:
        """Stop a run still going at its deadline (:meth:`_bash_report`: SIGTERM, a grace,
        SIGKILL) and report what it left, through another session of the pool (the run's own
        is still busy)."""
        other = self._bash.take() or (yield from self._create_bash_session())
        done = False
        try:
            outcome = yield from self._bash_report(other, run_dir, run_id, cap, marker)
            done = True
        finally:
            if done:
                self._bash.give_back(other)
            else:
                yield from self._retire_bash(other)
        return outcome

    def _bash_report(
        self, session_id: str, run_dir: str, run_id: str, cap: int, marker: str
    ) -> Plan[WrapperOutcome | None]:
        """Stop (SIGTERM, a grace, SIGKILL) the process group the run recorded (its command's
        whole tree) once verified, and the processes holding the run's ``marker`` (see
        :func:`.script.build_report`), then report the partial output the run left; its files
        are emptied."""
        nonce = uuid.uuid4().hex
        data = yield Call(
            "POST",
            "/v1/bash/exec",
            json={
                "command": build_report(
                    run_dir=run_dir,
                    run_id=run_id,
                    nonce=nonce,
                    cap=cap,
                    marker=marker,
                    keep_files=True,
                ),
                "session_id": session_id,
                "hard_timeout": _GRACE * 6 + KILL_GRACE_SECONDS,
                "max_output_length": 2 * cap + 8192,
            },
            read_timeout=_GRACE * 6 + KILL_GRACE_SECONDS + self._read_timeout,
        )
        if not isinstance(data, Mapping):
            return None
        return parse_stream_result(
            nonce, str(data.get("stdout") or ""), str(data.get("stderr") or "")
        )

    def _retire_bash(self, session_id: str) -> Plan[None]:
        self._bash.retire(session_id)
        with contextlib.suppress(AioSandboxError):
            yield Call("POST", f"/v1/bash/sessions/{session_id}/close")

    def _bash_finish(
        self, session_id: str, data: Any, deadline: float
    ) -> Plan[tuple[str, str, str | None]]:
        """Poll ``/v1/bash/output`` while the command is still ``running`` (a service may
        answer a long soft ``timeout`` early), until the monotonic ``deadline``; a status in
        :data:`_BASH_RUNNING` means the deadline passed with the command running."""
        if not isinstance(data, Mapping):
            raise ExecutionTransportError("The AIO Sandbox /v1/bash/exec answer has no data")
        status = data.get("status")
        stdout = str(data.get("stdout") or "")
        stderr = str(data.get("stderr") or "")
        if status not in _BASH_RUNNING:
            return stdout, stderr, status
        command_id = data.get("command_id")
        offset = int(data.get("offset") or len(stdout.encode()))
        err_offset = int(data.get("stderr_offset") or len(stderr.encode()))
        out_parts, err_parts = [stdout], [stderr]
        while (remaining := deadline - time.monotonic()) > 0:
            wait = max(0.05, min(_SOFT_TIMEOUT, remaining))
            result = yield Call(
                "POST",
                "/v1/bash/output",
                json={
                    "session_id": session_id,
                    "command_id": command_id,
                    "offset": offset,
                    "stderr_offset": err_offset,
                    "wait": True,
                    "wait_timeout": wait,
                },
                read_timeout=wait + self._read_timeout,
            )
            out_parts.append(str(result.get("stdout") or ""))
            err_parts.append(str(result.get("stderr") or ""))
            offset = int(result.get("offset") or offset)
            err_offset = int(result.get("stderr_offset") or err_offset)
            command = result.get("command") or {}
            status = command.get("status")
            if status not in _BASH_RUNNING:
                break
        return "".join(out_parts), "".join(err_parts), status

    # ----------------------------------------------------------------- shell

    def _create_shell_session(self, no_change_timeout: int) -> Plan[str]:
        session_id = f"skillruntime-{uuid.uuid4().hex[:16]}"
        yield Call(
            "POST",
            "/v1/shell/sessions/create",
            json={"id": session_id, "no_change_timeout": no_change_timeout},
            idempotent=True,
        )
        self._shell.add(session_id)
        self._shell_used.add(session_id)
        return session_id

    def _retire_shell(self, session_id: str) -> Plan[None]:
        self._shell.retire(session_id)
        with contextlib.suppress(AioSandboxError):
            yield Call("DELETE", f"/v1/shell/sessions/{session_id}")

    def _run_shell(self, spec: CommandSpec) -> Plan[WrapperOutcome]:
        no_change = math.ceil(spec.timeout + _GRACE) + 30
        # The run's marker is put on the command alone (by the wrapper), never in the
        # environment file: the wrapper's own helpers (its watchdog's search for marked
        # processes) must not hold it.
        environment, token = _split_marker(spec.environment)
        env_file: str | None = None
        if environment:
            env_file = yield Staging(".env")
            yield Call(
                "POST",
                "/v1/file/write",
                json={"file": env_file, "content": _env_file_text(environment)},
            )
        try:
            session_id = self._shell.take() or (yield from self._create_shell_session(no_change))
            return (
                yield from self._shell_attempt(
                    spec, session_id, env_file, no_change, token, retried=False
                )
            )
        except BaseException:
            if env_file is not None:
                # The wrapper may not have run: blank the file so no value stays behind.
                with contextlib.suppress(AioSandboxError):
                    yield Call("POST", "/v1/file/write", json={"file": env_file, "content": ""})
            raise

    def _shell_attempt(
        self,
        spec: CommandSpec,
        session_id: str,
        env_file: str | None,
        no_change: int,
        token: str,
        *,
        retried: bool,
    ) -> Plan[WrapperOutcome]:
        nonce = uuid.uuid4().hex
        run_dir = posixpath.join(self._temp_root, session_id)
        run_id = uuid.uuid4().hex
        script = build_wrapper(
            command=spec.command,
            cwd=spec.cwd,
            run_dir=run_dir,
            run_id=run_id,
            nonce=nonce,
            cap=spec.cap,
            timeout=spec.timeout,
            to_file=True,
            env_file=env_file,
            reset=True,
            make_dirs=spec.make_dirs,
            marker=token,
            grace=KILL_GRACE_SECONDS,
        )
        result = result_path(run_dir, run_id)
        deadline = time.monotonic() + spec.timeout + _GRACE
        soft = min(spec.timeout + _GRACE, _SOFT_TIMEOUT)
        body = {
            "id": session_id,
            "command": shell_line(script),
            "async_mode": False,
            "timeout": soft,
            "no_change_timeout": no_change,
            "hard_timeout": spec.timeout + _GRACE,
        }

        def again() -> Plan[WrapperOutcome]:
            fresh = yield from self._create_shell_session(no_change)
            return (
                yield from self._shell_attempt(
                    spec, fresh, env_file, no_change, token, retried=True
                )
            )

        try:
            data = yield Call(
                "POST",
                "/v1/shell/exec",
                json=body,
                read_timeout=soft + self._read_timeout,
            )
        except AioNotFoundError:
            # The session expired or was evicted: the command cannot have run.
            self._shell.retire(session_id)
            if retried:
                raise
            logger.info("AIO shell session vanished; running the command on a new session")
            return (yield from again())
        except BaseException:
            yield from self._retire_shell(session_id)
            raise
        status = data.get("status") if isinstance(data, Mapping) else None
        if status == "completed":
            # A command that printed nothing: its result is in the answer, no download.
            inline = parse_inline_result(nonce, str(data.get("output") or ""))
            if inline is not None:
                self._shell.give_back(session_id)
                return inline
        try:
            status = yield from self._shell_poll(session_id, status, deadline)
        except BaseException:
            yield from self._retire_shell(session_id)
            raise
        if status == "terminated":
            yield from self._retire_shell(session_id)
            outcome = yield from self._shell_result(result, nonce, spec.cap)
            if outcome is not None:
                return outcome
            if not retried and not (yield from self._exists(started_path(run_dir, run_id))):
                logger.info("AIO shell session was terminated; running the command on a new one")
                return (yield from again())
            raise ExecutionTransportError(
                "The AIO Sandbox shell session was terminated while the command ran; "
                "it was not run again"
            )
        if status in _SHELL_RUNNING:
            # The client deadline passed although the wrapper enforces the timeout itself.
            with contextlib.suppress(AioSandboxError):
                yield Call("POST", "/v1/shell/kill", json={"id": session_id})
            yield from self._retire_shell(session_id)
            return (yield from self._shell_result(result, nonce, spec.cap)) or _KILLED
        outcome = yield from self._shell_result(result, nonce, spec.cap)
        if status == "hard_timeout":
            yield from self._retire_shell(session_id)
            return outcome or _KILLED
        self._shell.give_back(session_id)
        if outcome is None:
            raise ExecutionTransportError(
                f"The AIO Sandbox shell session reported {status!r} but the command left no "
                "result; the command wrapper could not run"
            )
        return outcome

    def _shell_poll(self, session_id: str, status: Any, deadline: float) -> Plan[Any]:
        while status in _SHELL_RUNNING:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return status
            seconds = max(1, min(int(_SOFT_TIMEOUT), math.ceil(remaining)))
            yield Call(
                "POST",
                "/v1/shell/wait",
                json={"id": session_id, "seconds": seconds},
                read_timeout=seconds + self._read_timeout,
            )
            view = yield Call("POST", "/v1/shell/view", json={"id": session_id})
            status = view.get("status") if isinstance(view, Mapping) else None
        return status

    def _shell_result(self, path: str, nonce: str, cap: int) -> Plan[WrapperOutcome | None]:
        data = yield from self._download_small(path, 2 * cap + 8192)
        return None if data is None else parse_file_result(nonce, data, cap)

    def _exists(self, path: str) -> Plan[bool]:
        return (yield from self._download_small(path, 1024)) is not None

    def _download_small(self, path: str, limit: int) -> Plan[bytes | None]:
        try:
            data: bytes = yield Fetch(path, limit)
        except (AioNotFoundError, AioOperationError):
            return None
        except AioSandboxError as exc:
            if exc.status == 400:
                return None
            raise
        return data

    # ----------------------------------------------------------------- close

    def _close_plan(self) -> Plan[None]:
        """Close the sessions this runner created (never the service's other sessions)."""
        bash_ids = self._bash.drain()
        if self._bash_used:
            yield from self._cleanup_bash_files(bash_ids, sorted(self._bash_used))
        for session_id in bash_ids:
            with contextlib.suppress(AioSandboxError):
                yield Call("POST", f"/v1/bash/sessions/{session_id}/close")
        shell_ids = self._shell.drain()
        if shell_ids:
            yield from self._cleanup_shell_dirs(shell_ids[0], sorted(self._shell_used))
        for session_id in shell_ids:
            with contextlib.suppress(AioSandboxError):
                yield Call("DELETE", f"/v1/shell/sessions/{session_id}")

    def _cleanup_bash_files(self, live: Sequence[str], all_ids: Sequence[str]) -> Plan[None]:
        """Remove the (emptied) stream files of every bash session this runner used, on one of
        its live sessions (a new one when none is left)."""
        runs = posixpath.join(self._temp_root, "runs")
        files = " ".join(
            shlex.quote(posixpath.join(runs, f"{s}{suffix}"))
            for s in all_ids
            for suffix in (".o", ".e", ".p")
        )
        with contextlib.suppress(AioSandboxError):
            session_id = live[0] if live else (yield from self._create_bash_session())
            if not live:
                self._bash.drain()
            try:
                yield Call(
                    "POST",
                    "/v1/bash/exec",
                    json={
                        "command": f"rm -f -- {files}",
                        "session_id": session_id,
                        "hard_timeout": 30,
                    },
                    read_timeout=30 + self._read_timeout,
                )
            finally:
                if not live:
                    yield Call("POST", f"/v1/bash/sessions/{session_id}/close")

    def _cleanup_shell_dirs(self, session_id: str, all_ids: Sequence[str]) -> Plan[None]:
        dirs = " ".join(shlex.quote(posixpath.join(self._temp_root, s)) for s in all_ids)
        with contextlib.suppress(AioSandboxError):
            yield Call(
                "POST",
                "/v1/shell/exec",
                json={
                    "id": session_id,
                    "command": f"(rm -rf -- {dirs})",
                    "async_mode": False,
                    "timeout": 10,
                },
                read_timeout=10 + self._read_timeout,
            )
