"""``/v1/shell/*``: persistent bash sessions with merged output, OpenHands-style statuses.

Each session is one long-lived ``bash`` reading commands from a pipe; stdout and stderr are one
stream (as in the real PTY). A command is sourced from a file in the session's shell, so ``cd``
and ``export`` persist, and a top-level ``exit`` ends the session's shell: from then on the
session answers ``terminated`` to everything (the documented quirk). Completion is detected by
a private marker printed after the command.

Statuses: ``completed`` (with ``exit_code``), ``running`` (async, or soft ``timeout`` passed),
``hard_timeout`` (the command's processes were killed), ``no_change_timeout`` (no new output for
``no_change_timeout`` seconds; the command keeps running and the session stays busy),
``terminated`` (the session's shell is gone, or the command was killed via ``/kill``).

Quirks kept from the real service: ``exec`` with an ``id`` that was never created is HTTP 404
``Session not found: <id>``; ``exec`` while the session is busy answers HTTP 200 with the literal
output ``'ErrorObservation' object has no attribute 'exit_code'``; ``view.output`` is the whole
session transcript (prompt, command, output) while ``console[-1].output`` is the last command's
output; outputs longer than 30000 characters are cut when ``truncate`` is true.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .procs import HOME, MAX_CAPTURE_BYTES, command_env, descendants, kill_group, kill_pids
from .protocol import Field, envelope, not_found, validate

logger = logging.getLogger(__name__)

TRUNCATE_CHARS = 30000
ERROR_OBSERVATION = "'ErrorObservation' object has no attribute 'exit_code'"
MAX_CONSOLE = 100
MAX_SESSIONS = 100
SESSION_TIMEOUT = 3600

EXEC_FIELDS = {
    "id": Field("str"),
    "exec_dir": Field("str"),
    "command": Field("str", required=True, nullable=False),
    "async_mode": Field("bool", nullable=False, default=False),
    "timeout": Field("number"),
    "strict": Field("bool"),
    "no_change_timeout": Field("int"),
    "hard_timeout": Field("number"),
    "preserve_symlinks": Field("bool", default=False),
    "truncate": Field("bool", nullable=False, default=True),
}
ID_FIELDS = {"id": Field("str", required=True, nullable=False)}
WAIT_FIELDS = {
    "id": Field("str", required=True, nullable=False),
    "seconds": Field("int"),
    "max_wait_seconds": Field("int"),
}
WRITE_FIELDS = {
    "id": Field("str", required=True, nullable=False),
    "input": Field("str", required=True, nullable=False),
    "press_enter": Field("bool", required=True, nullable=False),
}
CREATE_FIELDS = {
    "id": Field("str", nullable=False),
    "exec_dir": Field("str"),
    "no_change_timeout": Field("int"),
    "preserve_symlinks": Field("bool", default=False),
}
UPDATE_FIELDS = {
    "id": Field("str", required=True, nullable=False),
    "no_change_timeout": Field("int"),
}


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class ShellRecord:
    """One command in a session: prompt, command, captured output and outcome."""

    ps1: str
    command: str
    output: bytearray = field(default_factory=bytearray)
    status: str = "running"
    exit_code: int | None = None
    forced: str | None = None
    last_change: float = field(default_factory=time.monotonic)
    timer: threading.Timer | None = None  # the hard_timeout, cancelled at completion
    script: str | None = None  # the file the command text was passed in, removed at completion

    def text(self) -> str:
        return self.output.decode("utf-8", "replace").replace("\r\n", "\n").rstrip("\n")

    def console(self) -> dict[str, Any]:
        return {"ps1": self.ps1, "command": self.command, "output": self.text()}


class ShellSession:
    """A persistent bash process plus its console records."""

    def __init__(
        self, session_id: str, working_dir: str, no_change_timeout: int, scratch_root: str | None
    ) -> None:
        self.session_id = session_id
        self.working_dir = working_dir
        self.no_change_timeout = no_change_timeout
        self.created_at = _now()
        self.last_used_at = self.created_at
        self.records: list[ShellRecord] = []
        self.terminated = False
        self.cond = threading.Condition()
        self.exec_lock = threading.Lock()
        self._nonce = uuid.uuid4().hex[:12]
        self._token = f"\x1eAIO{self._nonce}:".encode()
        self._scratch = tempfile.mkdtemp(prefix="aio-shell-", dir=scratch_root)
        self._seq = 0
        self.proc = subprocess.Popen(
            ["/bin/bash", "--noprofile", "--norc", "-s"],
            cwd=working_dir,
            env=command_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    # -- state -------------------------------------------------------------------------------

    @property
    def current(self) -> ShellRecord | None:
        return self.records[-1] if self.records else None

    def check_alive(self) -> None:
        """Notice a shell that died while a background job still holds its output pipe."""
        if not self.terminated and self.proc.poll() is not None:
            with self.cond:
                self.terminated = True
                current = self.current
                if current is not None and current.status == "running":
                    current.status = "terminated"
                self.cond.notify_all()

    def busy(self) -> bool:
        self.check_alive()
        current = self.current
        return current is not None and current.status == "running" and not self.terminated

    def status(self) -> str:
        self.check_alive()
        if self.terminated:
            return "terminated"
        current = self.current
        return current.status if current else "completed"

    def ps1(self) -> str:
        shown = self.working_dir
        if shown == HOME or shown.startswith(HOME + "/"):
            shown = "~" + shown[len(HOME) :]
        return f"gem@aio-sandbox:{shown} $"

    def transcript(self) -> str:
        parts = [f"{r.ps1} {r.command}\n{r.text()}" for r in self.records]
        if not self.busy():
            parts.append(self.ps1())
        text = "\n".join(parts)
        return text[-TRUNCATE_CHARS:]

    def info(self) -> dict[str, Any]:
        current = self.current
        return {
            "working_dir": self.working_dir,
            "created_at": self.created_at.isoformat(),
            "last_used_at": self.last_used_at.isoformat(),
            "age_seconds": int((_now() - self.created_at).total_seconds()),
            "status": "terminated" if self.terminated else ("busy" if self.busy() else "ready"),
            "current_command": current.command if current and self.busy() else None,
        }

    # -- process I/O -------------------------------------------------------------------------

    def _read(self) -> None:
        stream = self.proc.stdout
        if stream is None:
            return
        pending = b""
        while True:
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                break
            pending = self._consume(pending + chunk)
        stream.close()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        with self.cond:
            self.terminated = True
            current = self.current
            if current is not None and current.status == "running":
                current.output.extend(pending[: max(0, MAX_CAPTURE_BYTES - len(current.output))])
                current.status = "terminated"
            self.cond.notify_all()

    def _append(self, data: bytes) -> None:
        current = self.current
        if current is None or current.status != "running" or not data:
            return
        room = MAX_CAPTURE_BYTES - len(current.output)
        if room > 0:
            current.output.extend(data[:room])
        current.last_change = time.monotonic()

    def _consume(self, data: bytes) -> bytes:
        """Move ``data`` into the current record; return bytes held back (partial marker)."""
        with self.cond:
            while True:
                start = data.find(self._token)
                if start < 0:
                    hold = data.rfind(b"\x1e", max(0, len(data) - len(self._token)))
                    if hold >= 0 and self._token.startswith(data[hold:]):
                        self._append(data[:hold])
                        self.cond.notify_all()
                        return data[hold:]
                    self._append(data)
                    self.cond.notify_all()
                    return b""
                end = data.find(b"\x1e\n", start + len(self._token))
                if end < 0:
                    self._append(data[:start])
                    self.cond.notify_all()
                    return data[start:]
                self._append(data[:start])
                code_text, _, cwd = (
                    data[start + len(self._token) : end].decode("utf-8", "replace").partition(":")
                )
                current = self.current
                if current is not None and current.status == "running":
                    if current.timer is not None:
                        current.timer.cancel()
                    if current.script is not None:
                        with contextlib.suppress(OSError):
                            os.unlink(current.script)
                    self.last_used_at = _now()  # completion counts as activity
                    code = int(code_text) if code_text.lstrip("-").isdigit() else None
                    current.exit_code = code
                    current.status = current.forced or "completed"
                    if current.status != "completed":
                        current.exit_code = code if current.forced == "terminated" else None
                if cwd:
                    self.working_dir = cwd
                data = data[end + 2 :]
                self.cond.notify_all()

    def start(self, command: str, exec_dir: str | None, physical: bool) -> ShellRecord:
        """Send ``command`` to the shell; the caller holds ``exec_lock`` and checked ``busy``."""
        self._seq += 1
        script = os.path.join(self._scratch, f"cmd-{self._seq}.sh")
        prefix = ""
        if exec_dir:
            prefix = f"cd {'-P ' if physical else ''}-- {shlex.quote(exec_dir)} && "
        with open(script, "w", encoding="utf-8") as handle:
            handle.write(command + "\n")
        line = (
            f'{prefix}eval "$(< {shlex.quote(script)})"; '
            f'printf \'\\036AIO{self._nonce}:%d:%s\\036\\n\' "$?" "$PWD"\n'
        )
        record = ShellRecord(self.ps1(), command, script=script)
        with self.cond:
            self.records.append(record)
            del self.records[:-MAX_CONSOLE]
        self.last_used_at = _now()
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line.encode())
            self.proc.stdin.flush()
        except OSError:
            with self.cond:
                self.terminated = True
                record.status = "terminated"
        return record

    def interrupt(self, record: ShellRecord, reason: str) -> None:
        """Kill the command's processes; kill the whole shell if the command has none."""
        with self.cond:
            if record.status != "running":
                return
            record.forced = reason
        # Like Ctrl-C first (bash prints nothing for SIGINT), then SIGKILL for what ignores it.
        # A command without child processes (a builtin loop) can only be stopped by killing
        # the shell, which terminates the session.
        children = descendants(self.proc.pid)
        if not children:
            kill_group(self.proc.pid)
        else:
            kill_pids(children, signal.SIGINT)
        for grace, last_resort in ((1.0, False), (3.0, True)):
            deadline = time.monotonic() + grace
            with self.cond:
                while record.status == "running" and not self.terminated:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self.cond.wait(remaining)
            if record.status != "running" or self.terminated:
                return
            if last_resort:
                kill_group(self.proc.pid)
            else:
                kill_pids(descendants(self.proc.pid))

    def close(self) -> None:
        kill_group(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            logger.warning("shell session %s did not exit", self.session_id)
        shutil.rmtree(self._scratch, ignore_errors=True)


class ShellService:
    """Session registry and handlers of the shell API."""

    def __init__(
        self,
        default_no_change_timeout: int = 120,
        scratch_root: str | None = None,
        max_sessions: int = MAX_SESSIONS,
        session_timeout: float = SESSION_TIMEOUT,
    ) -> None:
        self.default_no_change_timeout = default_no_change_timeout
        self.session_timeout = session_timeout
        self.max_sessions = max_sessions
        self.scratch_root = scratch_root
        self._lock = threading.Lock()
        self._sessions: dict[str, ShellSession] = {}

    def _expire_idle(self) -> None:
        """Close sessions idle (not running a command) for longer than ``session_timeout``."""
        now = _now()
        with self._lock:
            stale = [
                s
                for s in self._sessions.values()
                if (now - s.last_used_at).total_seconds() > self.session_timeout and not s.busy()
            ]
            for session in stale:
                del self._sessions[session.session_id]
        for session in stale:
            logger.info("shell session %s expired", session.session_id)
            session.close()

    def _get(self, session_id: str) -> ShellSession:
        self._expire_idle()
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise not_found(f"Session not found: {session_id}")
        return session

    def _create(self, session_id: str, exec_dir: str | None, nct: int | None) -> ShellSession:
        self._expire_idle()
        with self._lock:
            existing = self._sessions.get(session_id)
            if existing is not None:
                return existing
            cwd = exec_dir if exec_dir and os.path.isdir(exec_dir) else HOME
            evicted = self._evict_for_room()
            session = ShellSession(
                session_id, cwd, nct or self.default_no_change_timeout, self.scratch_root
            )
            self._sessions[session_id] = session
        if evicted is not None:
            evicted.close()
        return session

    def _evict_for_room(self) -> ShellSession | None:
        """At ``max_sessions`` drop the least recently used session (caller holds the lock)."""
        if len(self._sessions) < self.max_sessions:
            return None
        oldest = min(self._sessions.values(), key=lambda s: s.last_used_at)
        del self._sessions[oldest.session_id]
        logger.info("shell session limit reached; evicting %s", oldest.session_id)
        return oldest

    def _result(
        self, session: ShellSession, record: ShellRecord, status: str, truncate: bool
    ) -> dict[str, Any]:
        output: str | None = None
        exit_code = None
        if status != "running":
            output = record.text()
            if truncate and len(output) > TRUNCATE_CHARS:
                output = output[:TRUNCATE_CHARS]
        if status == "completed":
            exit_code = record.exit_code
        with session.cond:
            console = [r.console() for r in session.records]
        if truncate:
            for entry in console:
                entry["output"] = entry["output"][:TRUNCATE_CHARS]
        return {
            "session_id": session.session_id,
            "command": record.command,
            "status": status,
            "output": output,
            "console": console,
            "exit_code": exit_code,
        }

    @staticmethod
    def _busy_result(session: ShellSession, command: str) -> dict[str, Any]:
        """What the real service answers when a command arrives on a busy session."""
        return {
            "session_id": session.session_id,
            "command": command,
            "status": "completed",
            "output": ERROR_OBSERVATION,
            "console": None,
            "exit_code": None,
        }

    # -- handlers ----------------------------------------------------------------------------

    def exec(self, body: Any) -> dict[str, Any]:
        """``POST /v1/shell/exec``."""
        params = validate(body, EXEC_FIELDS)
        exec_dir = params["exec_dir"]
        if exec_dir and not (exec_dir.startswith("/") and os.path.isdir(exec_dir)):
            if params["strict"]:
                return envelope(
                    None, success=False, message=f"Working directory does not exist: {exec_dir}"
                )
            exec_dir = None
        if params["id"]:
            session = self._get(params["id"])
        else:
            session = self._create(uuid.uuid4().hex, exec_dir, None)
        session.check_alive()
        if session.terminated:
            record = ShellRecord(session.ps1(), params["command"], status="terminated")
            return envelope(self._result(session, record, "terminated", params["truncate"]))
        if not session.exec_lock.acquire(blocking=False):
            return envelope(self._busy_result(session, params["command"]))
        if session.busy():
            session.exec_lock.release()
            return envelope(self._busy_result(session, params["command"]))
        try:
            record = session.start(
                params["command"], exec_dir, physical=not params["preserve_symlinks"]
            )
        finally:
            session.exec_lock.release()
        hard = params["hard_timeout"]
        if hard is not None:
            timer = threading.Timer(
                max(hard, 0.0), session.interrupt, args=(record, "hard_timeout")
            )
            timer.daemon = True
            with session.cond:
                if record.status == "running":
                    record.timer = timer
                    timer.start()
        if params["async_mode"]:
            return envelope(self._result(session, record, "running", params["truncate"]))
        soft = params["timeout"]
        nct = params["no_change_timeout"] or session.no_change_timeout
        deadline = None if soft is None else time.monotonic() + soft
        status = "running"
        with session.cond:
            while True:
                if record.status != "running":
                    status = record.status
                    break
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    break
                if now - record.last_change >= nct:
                    status = "no_change_timeout"
                    break
                waits = [record.last_change + nct - now]
                if deadline is not None:
                    waits.append(deadline - now)
                session.cond.wait(max(min(waits), 0.01))
        return envelope(self._result(session, record, status, params["truncate"]))

    def view(self, body: Any) -> dict[str, Any]:
        """``POST /v1/shell/view``: transcript, console records, last command and status."""
        params = validate(body, ID_FIELDS)
        session = self._get(params["id"])
        with session.cond:
            current = session.current
            console = [r.console() for r in session.records]
            status = session.status()
            data = {
                "output": session.transcript(),
                "session_id": session.session_id,
                "status": status,
                "console": console,
                "command": current.command if current else None,
                "exit_code": current.exit_code if current and status == "completed" else None,
            }
        return envelope(data)

    def wait(self, body: Any) -> dict[str, Any]:
        """``POST /v1/shell/wait``: wait up to ``seconds``/``max_wait_seconds`` for completion."""
        params = validate(body, WAIT_FIELDS)
        session = self._get(params["id"])
        limits = [v for v in (params["seconds"], params["max_wait_seconds"]) if v is not None]
        limit = float(min(limits)) if limits else float(session.no_change_timeout)
        deadline = time.monotonic() + max(limit, 0.0)
        with session.cond:
            while session.busy():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                session.cond.wait(remaining)
            status = session.status()
        return envelope({"status": status})

    def write(self, body: Any) -> dict[str, Any]:
        """``POST /v1/shell/write``: feed input to the running command."""
        params = validate(body, WRITE_FIELDS)
        session = self._get(params["id"])
        if not session.busy() or session.proc.stdin is None:
            return envelope(
                {"status": session.status()},
                success=False,
                message="No running process to write to",
            )
        text = params["input"] + ("\n" if params["press_enter"] else "")
        try:
            session.proc.stdin.write(text.encode())
            session.proc.stdin.flush()
        except OSError as exc:
            return envelope(None, success=False, message=f"Failed to write: {exc}")
        return envelope({"status": session.status()})

    def kill(self, body: Any) -> dict[str, Any]:
        """``POST /v1/shell/kill``: kill the running command (status ``terminated``)."""
        params = validate(body, ID_FIELDS)
        session = self._get(params["id"])
        current = session.current
        if current is not None and current.status == "running" and not session.terminated:
            session.interrupt(current, "terminated")
        status = session.status() if current is None else current.status
        exit_code = current.exit_code if current else None
        return envelope({"status": status, "exit_code": exit_code, "returncode": exit_code})

    def create_session(self, body: Any) -> dict[str, Any]:
        """``POST /v1/shell/sessions/create`` (idempotent for an existing id)."""
        params = validate(body, CREATE_FIELDS)
        session = self._create(
            params["id"] or uuid.uuid4().hex, params["exec_dir"], params["no_change_timeout"]
        )
        return envelope({"session_id": session.session_id, "working_dir": session.working_dir})

    def update_session(self, body: Any) -> dict[str, Any]:
        """``POST /v1/shell/sessions/update``."""
        params = validate(body, UPDATE_FIELDS)
        session = self._get(params["id"])
        if params["no_change_timeout"] is not None:
            session.no_change_timeout = params["no_change_timeout"]
        return envelope(None, message="Session updated")

    def list_sessions(self) -> dict[str, Any]:
        """``GET /v1/shell/sessions``."""
        self._expire_idle()
        with self._lock:
            sessions = dict(self._sessions)
        return envelope({"sessions": {sid: s.info() for sid, s in sessions.items()}})

    def session_stats(self) -> dict[str, Any]:
        """``GET /v1/shell/sessions/stats``."""
        with self._lock:
            sessions = list(self._sessions.values())
        now = _now()
        active = sum(1 for s in sessions if (now - s.last_used_at).total_seconds() < 300)
        return envelope(
            {
                "total_sessions": len(sessions),
                "active_sessions": active,
                "idle_sessions": len(sessions) - active,
                "max_sessions": self.max_sessions,
                "session_timeout": int(self.session_timeout),
                "usage_ratio": len(sessions) / self.max_sessions,
            }
        )

    def cleanup(self, session_id: str) -> dict[str, Any]:
        """``DELETE /v1/shell/sessions/{session_id}``."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            raise not_found(f"Session not found: {session_id}")
        session.close()
        return envelope(None, message=f"Session {session_id} cleaned up")

    def cleanup_all(self) -> dict[str, Any]:
        """``DELETE /v1/shell/sessions``."""
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for session in sessions:
            session.close()
        return envelope(None, message=f"Cleaned up {len(sessions)} sessions")

    # -- admin -------------------------------------------------------------------------------

    def mark_terminated(self, session_id: str) -> bool:
        """Kill a session's shell so that it reports ``terminated`` from now on."""
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            return False
        kill_group(session.proc.pid)
        try:
            session.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            logger.warning("shell session %s did not die", session_id)
        session.busy()  # records the death even if a background job keeps the pipe open
        return True

    def evict(self, session_id: str) -> bool:
        """Drop a session as if it expired (later calls get 404 ``Session not found``)."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        session.close()
        return True

    def shutdown(self) -> None:
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for session in sessions:
            session.close()
