"""execd bash sessions (``/session``): one persistent ``bash`` per session.

A session is a real ``bash --noprofile --norc`` process started inside the sandbox like any
command. Each run feeds it one line on stdin calling a helper function that ``eval``\\ s the
command text from a file, with stdout and stderr redirected to per-run files; so ``cd``,
variables, functions and aliases persist between runs exactly as in an interactive shell. The
run files live in the sandbox's own ``/tmp/.execd-sessions/<id>/`` (execd also keeps its
scratch files in the sandbox's temp directory).

A command that makes the shell exit (``exit 3``) ends the run with that status and ends the
session. A run that exceeds its timeout kills the session's whole process group: the run
reports ``-1`` and the session is gone. Runs of one session are serialised.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doubles.opensandbox.commands import CommandRecord, CommandTable, exit_text
from doubles.opensandbox.registry import Sandbox
from doubles.opensandbox.sandboxfs import ApiError, base_env, resolve

POLL = 0.01
_HELPER = (
    "__execd_run() {\n"
    '  { if [ -n "$2" ] && ! cd -- "$2"; then false; else eval "$(cat "$1.cmd")"; fi; }'
    ' >"$1.stdout" 2>"$1.stderr" </dev/null\n'
    '  printf \'%s\' "$?" >"$1.rc.part" && mv -f "$1.rc.part" "$1.rc"\n'
    "}\n"
)


@dataclass
class Session:
    """One persistent shell."""

    id: str
    process: subprocess.Popen[bytes]
    host_dir: Path
    sandbox_dir: str
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def alive(self) -> bool:
        """Whether the shell still runs."""
        return self.process.poll() is None


def not_found(session_id: str) -> ApiError:
    """The 404 for an unknown or ended session."""
    return ApiError(404, "CONTEXT_NOT_FOUND", f"session {session_id} not found")


class SessionTable:
    """The bash sessions of one sandbox."""

    def __init__(self, sandbox: Sandbox, commands: CommandTable) -> None:
        self._sandbox = sandbox
        self._commands = commands
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}

    def create(self, cwd_raw: Any) -> Session:
        """Start a shell (in ``cwd`` when given)."""
        if cwd_raw is not None and not isinstance(cwd_raw, str):
            raise ApiError(400, "INVALID_REQUEST_BODY", "cwd must be a string")
        cwd = resolve(self._sandbox, cwd_raw or "/")
        if not cwd.host.is_dir():
            raise ApiError(500, "RUNTIME_ERROR", f"chdir {cwd.sandbox_path}: no such directory")
        session_id = uuid.uuid4().hex
        host_dir = self._sandbox.tmp / ".execd-sessions" / session_id
        host_dir.mkdir(parents=True)
        process = self._commands.spawn(
            ["bash", "--noprofile", "--norc", "-s"],
            cwd.sandbox_path,
            base_env(self._sandbox),
            subprocess.PIPE,
            subprocess.DEVNULL,
            subprocess.DEVNULL,
        )
        session = Session(
            id=session_id,
            process=process,
            host_dir=host_dir,
            sandbox_dir=f"/tmp/.execd-sessions/{session_id}",
        )
        assert process.stdin is not None
        process.stdin.write(_HELPER.encode())
        process.stdin.flush()
        with self._lock:
            self._sessions[session_id] = session
        return session

    def get(self, session_id: str) -> Session:
        """A live session or a 404."""
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None or not session.alive:
            raise not_found(session_id)
        return session

    def run(self, session_id: str, body: Any) -> CommandRecord:
        """Start one run; the returned record finishes when the shell reports its status."""
        if not isinstance(body, dict):
            raise ApiError(400, "INVALID_REQUEST_BODY", "request body must be a JSON object")
        command = body.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ApiError(400, "INVALID_REQUEST_BODY", "command is required")
        timeout_ms = body.get("timeout")
        if timeout_ms is not None and (
            not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms < 0
        ):
            raise ApiError(400, "INVALID_REQUEST_BODY", "timeout must be a non-negative integer")
        cwd_raw = body.get("cwd")
        if cwd_raw is not None and not isinstance(cwd_raw, str):
            raise ApiError(400, "INVALID_REQUEST_BODY", "cwd must be a string")
        cwd = resolve(self._sandbox, cwd_raw).sandbox_path if cwd_raw else ""
        session = self.get(session_id)
        session.lock.acquire()
        try:
            if not session.alive:
                raise not_found(session_id)
            run_id = uuid.uuid4().hex
            (session.host_dir / f"{run_id}.cmd").write_text(command)
            record = CommandRecord(
                id=run_id,
                content=command,
                background=False,
                started_at=time.time(),
                stdout_path=session.host_dir / f"{run_id}.stdout",
                stderr_path=session.host_dir / f"{run_id}.stderr",
                process=session.process,
            )
            line = (
                f"__execd_run {shlex.quote(f'{session.sandbox_dir}/{run_id}')} {shlex.quote(cwd)}\n"
            )
            assert session.process.stdin is not None
            session.process.stdin.write(line.encode())
            session.process.stdin.flush()
        except BaseException:
            session.lock.release()
            raise
        threading.Thread(
            target=self._watch, args=(session, record, timeout_ms), daemon=True
        ).start()
        return record

    def _watch(self, session: Session, record: CommandRecord, timeout_ms: int | None) -> None:
        deadline = time.monotonic() + timeout_ms / 1000.0 if timeout_ms else None
        rc_file = session.host_dir / f"{record.id}.rc"
        try:
            while True:
                if rc_file.exists():
                    record.exit_code = int(rc_file.read_text() or "1")
                    record.end_text = exit_text(record.exit_code)
                    break
                code = session.process.poll()
                if code is not None:
                    record.exit_code = -1 if code < 0 else code
                    record.end_text = exit_text(code)
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    record.killed = True
                    self._kill(session)
                    record.exit_code = -1
                    record.end_text = exit_text(-signal.SIGKILL)
                    break
                time.sleep(POLL)
        finally:
            record.finished_at = time.time()
            record.done.set()
            for suffix in (".cmd", ".rc"):
                with contextlib.suppress(OSError):
                    (session.host_dir / f"{record.id}{suffix}").unlink()
            session.lock.release()

    @staticmethod
    def _kill(session: Session) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(session.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            session.process.wait(timeout=5)

    def delete(self, session_id: str) -> None:
        """End a session (its shell and everything it started)."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            raise not_found(session_id)
        self._kill(session)
        if session.process.stdin is not None:
            with contextlib.suppress(OSError):
                session.process.stdin.close()
        shutil.rmtree(session.host_dir, ignore_errors=True)

    def kill_all(self) -> None:
        """End every session (sandbox deletion)."""
        with self._lock:
            ids = list(self._sessions)
        for session_id in ids:
            with contextlib.suppress(ApiError):
                self.delete(session_id)
