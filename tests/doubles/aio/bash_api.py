"""``/v1/bash/*``: one subprocess per command with separate stdout/stderr.

Contract (AIO API 1.9.4, ``BashExecRequest``/``BashExecResult``/``BashOutputResult``):

* every exec is a new ``bash -c`` process in its own process group; ``cd``/``export`` inside a
  command do not persist, only the API-level ``exec_dir`` (which updates the session default);
* ``env`` applies to that command only;
* sync mode waits for completion, or returns ``running`` after the soft ``timeout``;
  ``async_mode`` returns ``running`` at once; ``hard_timeout`` kills the whole process group
  (or, with ``hard_timeout_kills="process"``, only the process the service started: the protocol
  says no more than that the command is killed) and the status becomes ``timed_out``;
  ``/v1/bash/kill`` gives ``killed``;
* stdout/stderr offsets are byte offsets into the captured streams; ``/v1/bash/output`` returns
  the bytes after the given offsets and can long-poll (``wait``);
* ``max_output_length`` (default 50000, 0 disables) middle-truncates sync answers only.

Inferred (undocumented) choices: an unknown ``session_id`` on exec creates that session; an
unknown session on ``output``/``write``/``kill``/``close`` is HTTP 404 ``Session not found: <id>``;
a missing ``exec_dir`` is HTTP 200 ``success: false``; exec on a closed session is HTTP 200
``success: false``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any, Literal

from .procs import HOME, MAX_CAPTURE_BYTES, command_env, kill_group, kill_pids, middle_truncate
from .protocol import Field, envelope, not_found, validate

logger = logging.getLogger(__name__)

#: Finished commands kept per session (with their output) for ``/v1/bash/output``.
MAX_COMMANDS = 50

_SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL, "SIGINT": signal.SIGINT}


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class BashCommand:
    """One executed command and its captured streams."""

    command_id: str
    command: str
    proc: subprocess.Popen[bytes]
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    status: str = "running"
    exit_code: int | None = None
    forced: str | None = None  # "timed_out" or "killed" once we signalled it
    timer: threading.Timer | None = None  # the hard_timeout, cancelled when the command ends
    cond: threading.Condition = field(default_factory=threading.Condition)

    def info(self) -> dict[str, Any]:
        return {
            "command_id": self.command_id,
            "command": self.command,
            "status": self.status,
            "exit_code": self.exit_code,
        }


@dataclass
class BashSession:
    """API-level session state: default cwd and the commands run in it."""

    session_id: str
    working_dir: str
    created_at: str = field(default_factory=_now)
    last_used_at: str = field(default_factory=_now)
    status: str = "ready"
    commands: dict[str, BashCommand] = field(default_factory=dict)
    last_command: BashCommand | None = None

    def info(self) -> dict[str, Any]:
        current = self.last_command
        running = current is not None and current.status == "running"
        return {
            "session_id": self.session_id,
            "status": self.status,
            "working_dir": self.working_dir,
            "created_at": self.created_at,
            "last_used_at": self.last_used_at,
            "current_command": current.command if running and current else None,
            "command_count": len(self.commands),
        }


EXEC_FIELDS = {
    "session_id": Field("str"),
    "command": Field("str", required=True, nullable=False),
    "exec_dir": Field("str"),
    "env": Field("str_map"),
    "async_mode": Field("bool", nullable=False, default=False),
    "timeout": Field("number"),
    "hard_timeout": Field("number"),
    "max_output_length": Field("int", nullable=False, default=50000),
}
OUTPUT_FIELDS = {
    "session_id": Field("str", required=True, nullable=False),
    "command_id": Field("str"),
    "offset": Field("int", nullable=False, default=0),
    "stderr_offset": Field("int", nullable=False, default=0),
    "wait": Field("bool", nullable=False, default=False),
    "wait_timeout": Field("number", nullable=False, default=30.0),
}
WRITE_FIELDS = {
    "session_id": Field("str", required=True, nullable=False),
    "command_id": Field("str"),
    "input": Field("str", required=True, nullable=False),
}
KILL_FIELDS = {
    "session_id": Field("str", required=True, nullable=False),
    "signal": Field("str", nullable=False, default="SIGTERM"),
}
CREATE_FIELDS = {
    "session_id": Field("str"),
    "exec_dir": Field("str"),
    "snapshot_path": Field("str"),
}


class BashService:
    """State and handlers of the bash API."""

    def __init__(self, *, hard_timeout_kills: Literal["group", "process"] = "group") -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, BashSession] = {}
        self._hard_timeout_kills = hard_timeout_kills

    # -- helpers -----------------------------------------------------------------------------

    def _session(self, session_id: str) -> BashSession:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise not_found(f"Session not found: {session_id}")
        return session

    def _get_or_create(self, session_id: str | None, exec_dir: str | None) -> BashSession:
        with self._lock:
            sid = session_id or uuid.uuid4().hex
            session = self._sessions.get(sid)
            if session is None:
                session = BashSession(sid, exec_dir or HOME)
                self._sessions[sid] = session
            return session

    @staticmethod
    def _pump(cmd: BashCommand, stream: IO[bytes], target: bytearray) -> None:
        while True:
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                break
            with cmd.cond:
                room = MAX_CAPTURE_BYTES - len(target)
                if room > 0:
                    target.extend(chunk[:room])
                cmd.cond.notify_all()
        stream.close()

    def _reap(self, cmd: BashCommand, readers: list[threading.Thread]) -> None:
        code = cmd.proc.wait()
        if cmd.timer is not None:
            cmd.timer.cancel()
        for reader in readers:
            reader.join()
        if cmd.proc.stdin is not None:
            with contextlib.suppress(OSError):
                cmd.proc.stdin.close()
        with cmd.cond:
            if cmd.forced is not None:
                cmd.status = cmd.forced
                cmd.exit_code = None
            else:
                cmd.status = "completed"
                cmd.exit_code = code if code >= 0 else 128 - code
            cmd.cond.notify_all()

    def _start(self, session: BashSession, params: dict[str, Any], cwd: str) -> BashCommand:
        proc = subprocess.Popen(
            ["/bin/bash", "-c", params["command"]],
            cwd=cwd,
            env=command_env(params["env"]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        cmd = BashCommand(uuid.uuid4().hex, params["command"], proc)
        if proc.stdout is None or proc.stderr is None:
            raise RuntimeError("subprocess pipes missing")
        readers = [
            threading.Thread(target=self._pump, args=(cmd, proc.stdout, cmd.stdout), daemon=True),
            threading.Thread(target=self._pump, args=(cmd, proc.stderr, cmd.stderr), daemon=True),
        ]
        hard = params["hard_timeout"]
        if hard is not None:  # armed before the reaper exists, so the reaper always cancels it
            cmd.timer = threading.Timer(max(hard, 0.0), self._expire, args=(cmd,))
            cmd.timer.daemon = True
            cmd.timer.start()
        for reader in readers:
            reader.start()
        threading.Thread(target=self._reap, args=(cmd, readers), daemon=True).start()
        with self._lock:
            session.commands[cmd.command_id] = cmd
            session.last_command = cmd
            finished = [c for c in session.commands.values() if c.status != "running"]
            for old in finished[: max(0, len(session.commands) - MAX_COMMANDS)]:
                del session.commands[old.command_id]
        return cmd

    def _expire(self, cmd: BashCommand) -> None:
        with cmd.cond:
            if cmd.status != "running":
                return
            cmd.forced = "timed_out"
        if self._hard_timeout_kills == "process":
            kill_pids([cmd.proc.pid], signal.SIGKILL)
        else:
            kill_group(cmd.proc.pid, signal.SIGKILL)

    @staticmethod
    def _result(
        session: BashSession, cmd: BashCommand, limit: int, *, include_output: bool = True
    ) -> dict[str, Any]:
        with cmd.cond:
            out = bytes(cmd.stdout)
            err = bytes(cmd.stderr)
            status, exit_code = cmd.status, cmd.exit_code
        return {
            "session_id": session.session_id,
            "command_id": cmd.command_id,
            "command": cmd.command,
            "status": status,
            "stdout": middle_truncate(out.decode("utf-8", "replace"), limit)
            if include_output
            else "",
            "stderr": middle_truncate(err.decode("utf-8", "replace"), limit)
            if include_output
            else "",
            "exit_code": exit_code,
            "offset": len(out) if include_output else 0,
            "stderr_offset": len(err) if include_output else 0,
        }

    # -- handlers ----------------------------------------------------------------------------

    def exec(self, body: Any) -> dict[str, Any]:
        """``POST /v1/bash/exec``."""
        params = validate(body, EXEC_FIELDS)
        session = self._get_or_create(params["session_id"], params["exec_dir"])
        if session.status == "closed":
            return envelope(None, success=False, message=f"Session {session.session_id} is closed")
        if params["exec_dir"]:
            if not os.path.isabs(params["exec_dir"]) or not os.path.isdir(params["exec_dir"]):
                return envelope(
                    None,
                    success=False,
                    message=f"Working directory does not exist: {params['exec_dir']}",
                )
            session.working_dir = params["exec_dir"]
        session.last_used_at = _now()
        cwd = session.working_dir if os.path.isdir(session.working_dir) else HOME
        cmd = self._start(session, params, cwd)
        if params["async_mode"]:
            return envelope(self._result(session, cmd, 0, include_output=False))
        deadline = None if params["timeout"] is None else time.monotonic() + params["timeout"]
        with cmd.cond:
            while cmd.status == "running":
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                cmd.cond.wait(remaining)
        return envelope(self._result(session, cmd, params["max_output_length"]))

    def output(self, body: Any) -> dict[str, Any]:
        """``POST /v1/bash/output``: bytes after the given offsets, optionally long-polled."""
        params = validate(body, OUTPUT_FIELDS)
        session = self._session(params["session_id"])
        if params["command_id"]:
            cmd = session.commands.get(params["command_id"])
            if cmd is None:
                raise not_found(f"Command not found: {params['command_id']}")
        else:
            cmd = session.last_command
        offset = max(params["offset"], 0)
        err_offset = max(params["stderr_offset"], 0)
        if cmd is None:
            data = {
                "session_id": session.session_id,
                "stdout": "",
                "stderr": "",
                "offset": offset,
                "stderr_offset": err_offset,
                "command": None,
            }
            return envelope(data)
        deadline = time.monotonic() + max(params["wait_timeout"], 0.0)
        with cmd.cond:
            if params["wait"]:
                while (
                    cmd.status == "running"
                    and len(cmd.stdout) <= offset
                    and len(cmd.stderr) <= err_offset
                ):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    cmd.cond.wait(remaining)
            out = bytes(cmd.stdout[offset:])
            err = bytes(cmd.stderr[err_offset:])
            new_offset = max(offset, len(cmd.stdout)) if out else offset
            new_err_offset = max(err_offset, len(cmd.stderr)) if err else err_offset
            info = cmd.info()
        data = {
            "session_id": session.session_id,
            "stdout": out.decode("utf-8", "replace"),
            "stderr": err.decode("utf-8", "replace"),
            "offset": new_offset,
            "stderr_offset": new_err_offset,
            "command": info,
        }
        return envelope(data)

    def write(self, body: Any) -> dict[str, Any]:
        """``POST /v1/bash/write``: write ``input`` to the command's stdin."""
        params = validate(body, WRITE_FIELDS)
        session = self._session(params["session_id"])
        cmd = (
            session.commands.get(params["command_id"])
            if params["command_id"]
            else session.last_command
        )
        if cmd is None or cmd.status != "running" or cmd.proc.stdin is None:
            return envelope(None, success=False, message="No running command to write to")
        try:
            cmd.proc.stdin.write(params["input"].encode())
            cmd.proc.stdin.flush()
        except OSError as exc:
            return envelope(None, success=False, message=f"Failed to write input: {exc}")
        return envelope(None, message="Input written")

    def kill(self, body: Any) -> dict[str, Any]:
        """``POST /v1/bash/kill``: signal the running command's process group."""
        params = validate(body, KILL_FIELDS)
        sig = _SIGNALS.get(params["signal"].upper())
        if sig is None:
            return envelope(None, success=False, message=f"Unsupported signal: {params['signal']}")
        session = self._session(params["session_id"])
        cmd = session.last_command
        if cmd is None or cmd.status != "running":
            return envelope(None, success=False, message="No running command in session")
        with cmd.cond:
            cmd.forced = "killed"
        kill_group(cmd.proc.pid, sig)
        return envelope(None, message=f"Sent {params['signal'].upper()} to {cmd.command_id}")

    def list_sessions(self) -> dict[str, Any]:
        """``GET /v1/bash/sessions``."""
        with self._lock:
            sessions = list(self._sessions.values())
        return envelope([s.info() for s in sessions])

    def create_session(self, body: Any) -> dict[str, Any]:
        """``POST /v1/bash/sessions/create`` (an existing id returns that session)."""
        params = validate(body, CREATE_FIELDS)
        exec_dir = params["exec_dir"]
        if exec_dir and not os.path.isdir(exec_dir):
            return envelope(
                None, success=False, message=f"Working directory does not exist: {exec_dir}"
            )
        session = self._get_or_create(params["session_id"], exec_dir)
        return envelope(session.info())

    def close_session(self, session_id: str) -> dict[str, Any]:
        """``POST /v1/bash/sessions/{session_id}/close``: kill running commands, mark closed."""
        session = self._session(session_id)
        for cmd in list(session.commands.values()):
            if cmd.status == "running":
                with cmd.cond:
                    cmd.forced = "killed"
                kill_group(cmd.proc.pid, signal.SIGKILL)
        session.status = "closed"
        return envelope(None, message=f"Session {session_id} closed")

    def shutdown(self) -> None:
        """Kill every process the service started."""
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            for cmd in session.commands.values():
                if cmd.proc.poll() is None:
                    kill_group(cmd.proc.pid, signal.SIGKILL)
