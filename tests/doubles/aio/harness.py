"""``AioDouble``: start the AIO Sandbox double as a subprocess and drive its admin surface."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from doubles._polling import process_gone
from doubles._process import double_env, read_ready_line, stop_process

AuthMode = Literal["none", "bearer", "api_key"]


class AioDoubleError(RuntimeError):
    """The double failed to start or an admin call failed."""


class AioDouble:
    """Context manager running ``doubles.aio.server`` in a private mount namespace.

    ``with AioDouble() as aio:`` gives ``aio.url`` (``http://127.0.0.1:<port>``), ``aio.token``
    (the Bearer token in ``"bearer"`` mode, else the API key in ``"api_key"`` mode, else None),
    ``aio.api_key`` (only in ``"api_key"`` mode), ``aio.root`` (the host directory mounted on
    ``/home/gem`` inside the double) and ``aio.headers`` (what an authorised client sends).

    ``auth``: ``"bearer"`` (default; stands in for the JWT mode: ``Authorization: Bearer
    <token>`` with the configured token, 401 with nginx's HTML page otherwise), ``"api_key"``
    (``X-AIO-API-Key``, ``Authorization: Bearer`` or ``?api_key=``; 401 JSON otherwise) or
    ``"none"``. ``bash_api=False`` makes every ``/v1/bash/*`` route a 404 like older images.
    ``no_change_timeout`` is the shell sessions' default (seconds); ``max_shell_sessions`` caps
    live shell sessions (the least recently used one is evicted, later calls to it get 404);
    ``shell_session_timeout`` (seconds) expires shell sessions idle that long (404 later).
    ``hard_timeout_kills="process"`` makes a ``/v1/bash`` ``hard_timeout`` kill only the process
    the service started (default ``"group"``: its whole process group).
    ``file_errors="legacy"`` imitates pre-1.9 images: file failures carry ``data: null`` and
    reading a non-UTF-8 file is a plain-text HTTP 500.
    ``root`` uses an existing host directory as ``/home/gem`` (it is kept on stop; the state
    directory with the log and the sandbox's private ``/tmp`` (``aio.tmp`` on the host) is
    always removed).
    """

    def __init__(
        self,
        *,
        bash_api: bool = True,
        auth: AuthMode = "bearer",
        token: str | None = None,
        no_change_timeout: int = 120,
        max_shell_sessions: int = 100,
        shell_session_timeout: float = 3600.0,
        file_errors: Literal["structured", "legacy"] = "structured",
        hard_timeout_kills: Literal["group", "process"] = "group",
        root: str | os.PathLike[str] | None = None,
        startup_timeout: float = 20.0,
    ) -> None:
        self.bash_api = bash_api
        self.auth: AuthMode = auth
        secret = token or (secrets.token_urlsafe(24) if auth != "none" else None)
        self.token: str | None = secret if auth != "none" else None
        self.api_key: str | None = secret if auth == "api_key" else None
        self._secret = secret
        self._no_change_timeout = no_change_timeout
        self._max_shell_sessions = max_shell_sessions
        self._shell_session_timeout = shell_session_timeout
        self._file_errors = file_errors
        self._hard_timeout_kills = hard_timeout_kills
        self._given_root = Path(root) if root is not None else None
        self._startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._state_dir: Path | None = None
        self.root = Path()
        self.tmp = Path()
        self.url = ""
        self.port = 0
        self.log_path = Path()
        self._server_pid = 0
        self._pid_namespace = ""

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> AioDouble:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start the server and wait (bounded) for its port line."""
        self._state_dir = Path(tempfile.mkdtemp(prefix="aio-double-"))
        self.root = self._given_root or (self._state_dir / "home")
        self.root.mkdir(parents=True, exist_ok=True)
        self.tmp = self._state_dir / "tmp"
        self.tmp.mkdir()
        self.tmp.chmod(0o1777)
        self.log_path = self._state_dir / "server.log"
        # Its own mount namespace and, as in the real image's container, its own PID namespace:
        # the server is PID 1 there, commands see only the sandbox's processes (``kill -1`` in
        # a command reaches nothing of the host), and they all die with the server.
        cmd = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
            sys.executable,
            "-m",
            "doubles.aio.server",
            "--root",
            str(self.root),
            "--tmp",
            str(self.tmp),
            "--auth",
            self.auth,
            "--no-change-timeout",
            str(self._no_change_timeout),
            "--max-shell-sessions",
            str(self._max_shell_sessions),
            "--shell-session-timeout",
            str(self._shell_session_timeout),
            "--file-errors",
            self._file_errors,
            "--hard-timeout-kills",
            self._hard_timeout_kills,
        ]
        if not self.bash_api:
            cmd.append("--no-bash-api")
        env = double_env()
        env["AIO_DOUBLE_HOST_MNTNS"] = os.readlink("/proc/self/ns/mnt")
        if self._secret is not None and self.auth != "none":
            env["AIO_DOUBLE_SECRET"] = self._secret
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=log, env=env, stdin=subprocess.DEVNULL
            )
        line = read_ready_line(self._proc, self._startup_timeout)
        if line is None:
            tail = self.log_path.read_text(errors="replace")[-2000:]
            code = self._proc.poll()
            why = (
                f"it exited with status {code}"
                if code is not None
                else f"no ready line within {self._startup_timeout} s"
            )
            self.stop()
            raise AioDoubleError(f"AIO double did not start ({why}):\n{tail}")
        self.port = int(json.loads(line)["port"])
        self.url = f"http://127.0.0.1:{self.port}"
        self._server_pid = self._child_of(self._proc.pid)
        self._pid_namespace = os.readlink(f"/proc/{self._server_pid}/ns/pid")

    @staticmethod
    def _child_of(pid: int) -> int:
        """The one child of ``unshare`` (the server, PID 1 of the double's namespace)."""
        children = [
            int(child)
            for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()
        ]
        if len(children) != 1:
            raise AioDoubleError(f"expected one server process under unshare, found {children}")
        return children[0]

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove the directories it created; every
        process of the double's PID namespace ends with it."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None and self._server_pid:
                # ``unshare --fork`` ignores SIGTERM: the server gets it, and unshare exits with it.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._server_pid, signal.SIGTERM)
            stop_process(proc, grace=10)
        if self._state_dir is not None:
            shutil.rmtree(self._state_dir, ignore_errors=True)
            self._state_dir = None

    # -- conveniences ------------------------------------------------------------------------

    @property
    def headers(self) -> dict[str, str]:
        """Headers an authorised client sends (empty when auth is off)."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def host_path(self, sandbox_path: str) -> Path:
        """The host path of a ``/home/gem/...`` or ``/tmp/...`` sandbox path (for assertions)."""
        normal = os.path.normpath(sandbox_path)
        for prefix, base in (("/home/gem", self.root), ("/tmp", self.tmp)):
            rel = os.path.relpath(normal, prefix)
            if not rel.startswith(".."):
                return base / rel if rel != "." else base
        raise ValueError(f"not under /home/gem or /tmp: {sandbox_path}")

    def host_pid(self, sandbox_pid: int) -> int | None:
        """The host pid of the process that is ``sandbox_pid`` inside the double (as a command
        sees it: ``$$``, ``$!``), or ``None`` when no such process exists now."""
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") != self._pid_namespace:
                    continue
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("NSpid:") and int(line.split()[-1]) == sandbox_pid:
                    return int(entry)
        return None

    def process_gone(self, sandbox_pid: int) -> bool:
        """Whether the sandbox process ``sandbox_pid`` has ended (gone, or a zombie)."""
        host = self.host_pid(sandbox_pid)
        return host is None or process_gone(host)

    def log_text(self, limit: int = 20000) -> str:
        """The tail of the server's log (stderr), e.g. to show an unexpected 500's traceback."""
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def _admin(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"} if data is not None else {},
        )
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                return json.loads(response.read() or b"null")
        except OSError as exc:
            raise AioDoubleError(f"admin call {method} {path} failed: {exc}") from exc

    def stats(self) -> dict[str, Any]:
        """``{"requests": {"POST /v1/bash/exec": n, ...}, "statuses": {"200": n},
        "bytes_uploaded": n, "request_body_bytes": n, "auth_failures": n}``.

        Route keys use the route template (``DELETE /v1/shell/sessions/{session_id}``);
        unknown paths are keyed by their literal path.
        """
        result: dict[str, Any] = self._admin("GET", "/_double/stats")
        return result

    def requests(self) -> list[dict[str, Any]]:
        """The last 1000 API requests, oldest first: ``{method, route, path, query, auth, body}``.

        ``route`` is the route template, ``auth`` names the credential kind sent (``"bearer"``,
        ``"api_key_header"``, ``"api_key_query"`` or None, never its value) and ``body`` is the
        decoded JSON body (None for GET, multipart and unreadable bodies). Cleared by
        :meth:`reset_stats`.
        """
        result: list[dict[str, Any]] = self._admin("GET", "/_double/requests")
        return result

    def reset_stats(self) -> None:
        self._admin("POST", "/_double/stats/reset", {})

    def inject_fault(
        self,
        route: str,
        status: int = 503,
        *,
        count: int = 1,
        body: Any = None,
        delay: float = 0.0,
        raw: bytes | None = None,
    ) -> None:
        """Make the next ``count`` requests matching ``route`` fail before auth and routing.

        ``route`` is ``"POST /v1/bash/exec"``, a template/path (any method) or a concrete
        ``"METHOD /path"``. ``status`` 0 drops the connection; 5xx answers an nginx HTML page
        unless ``body`` (str → text, other → JSON) is given; ``raw`` bytes are the whole
        answer, sent verbatim before the connection is closed (a broken-off or garbled answer;
        ``status`` is then ignored); ``delay`` sleeps first.
        """
        payload = {
            "route": route,
            "status": status,
            "count": count,
            "body": body,
            "delay": delay,
            "raw": base64.b64encode(raw).decode() if raw is not None else None,
        }
        self._admin("POST", "/_double/faults", payload)

    def clear_faults(self) -> None:
        self._admin("DELETE", "/_double/faults")

    def set_bash_api(self, enabled: bool) -> None:
        """Switch ``/v1/bash/*`` on or off while running."""
        self._admin("POST", "/_double/bash_api", {"enabled": enabled})
        self.bash_api = enabled

    def terminate_shell_session(self, session_id: str) -> None:
        """Kill a shell session's shell: it answers ``terminated`` from now on."""
        self._admin("POST", "/_double/shell/terminate", {"id": session_id})

    def evict_shell_session(self, session_id: str) -> None:
        """Forget a shell session (later calls get 404 ``Session not found``)."""
        self._admin("POST", "/_double/shell/evict", {"id": session_id})
