"""Test-side harness of the OpenSandbox double: start it as a subprocess, then steer it.

``OpenSandboxDouble`` owns the server process. ``DoubleAdmin`` speaks the private admin API
and works from any process that knows the URL (for example the worker processes of a
multi-node test), so statistics and faults are shared by every client of one double.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from doubles._process import double_env, read_ready_line, stop_process

_READY_PREFIX = "OPENSANDBOX_DOUBLE_LISTENING "
SCALED_TAIL_DELAY = 0.25
"""execd's linger after a terminal event, scaled down from its 1 s for the suites whose rules do
not depend on its length (tools, conformance, adapters): a stream still lingers after its
terminal event, a client that hangs up at once still makes execd relay a SIGPIPE, and a runtime
that closes waits for the linger, only for a quarter of the time. The suites about hang-ups in
the linger (``test_opensandbox_hangups``, ``test_opensandbox_execd_stream``,
``test_opensandbox_async_loops``, the double's own) keep execd's 1 s."""
ADMIN_TIMEOUT = 10.0


class DoubleAdmin:
    """Client of a running double's admin API (``/_double/...``)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def _call(self, method: str, path: str, payload: Any = None) -> Any:
        data = json.dumps(payload).encode() if payload is not None else None
        if method == "POST" and data is None:
            data = b"{}"
        request = urllib.request.Request(
            f"{self.url}/_double/{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=ADMIN_TIMEOUT) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            body = exc.read()
            if exc.code != 404:
                raise RuntimeError(
                    f"admin call {method} {path} failed: {exc.code} {body!r}"
                ) from exc
        return json.loads(body) if body else None

    def stats(self) -> dict[str, Any]:
        """Counters: ``creates``, ``deletes``, ``kills_behind_back``, ``expired``,
        ``live_sandboxes``, ``live_sandbox_ids``, ``upload_requests``, ``uploaded_files``,
        ``uploaded_bytes``, ``commands``, ``faults_fired`` and ``requests`` (by route
        template, e.g. ``"POST /sandboxes"`` or ``"execd POST /files/upload"``)."""
        result: dict[str, Any] = self._call("GET", "stats")
        return result

    def reset_stats(self) -> None:
        """Zero every counter."""
        self._call("POST", "stats/reset")

    def kill_behind_back(self, sandbox_id: str) -> bool:
        """Destroy a sandbox without any client being told; ``False`` if it was not alive."""
        result = self._call("POST", f"kill/{sandbox_id}")
        return bool(result and result.get("killed"))

    def set_fault(
        self,
        kind: str,
        *,
        count: int = 1,
        status: int = 503,
        plane: str = "any",
        retry_after: int | None = None,
        after_events: int = 0,
    ) -> None:
        """Arm a fault for the next ``count`` matching requests.

        * ``"status"``: answer ``status`` (429, 500, 502, 503 or 504) to the next ``count``
          idempotent requests (GET/HEAD/PUT/DELETE) of ``plane`` (``"lifecycle"``,
          ``"execd"`` or ``"any"``); 429 carries ``Retry-After`` when ``retry_after`` is set.
        * ``"drop_after_terminal"``: the next ``count`` foreground ``/command`` streams close
          the connection right after the terminal event, without the final chunk.
        * ``"no_terminal"``: the next ``count`` foreground ``/command`` streams end cleanly
          after the output but without an ``execution_complete``/``error`` event.
        * ``"drop_mid_stream"``: the next ``count`` foreground ``/command`` streams close the
          connection abruptly (no final chunk, no terminal event) once ``after_events``
          stdout/stderr events were sent; the command is killed, as execd does when its
          client goes away.
        * ``"kill_after_upload"``: the next ``after_events`` (at least 1) upload requests
          succeed, and right after answering the last of them its sandbox is destroyed behind
          the client's back (its processes killed, its files gone), as a sandbox dying between
          two upload batches or right after the last one.
        """
        self._call(
            "POST",
            "faults",
            {
                "kind": kind,
                "count": count,
                "status": status,
                "plane": plane,
                "retry_after": retry_after,
                "after_events": after_events,
            },
        )

    def clear_faults(self) -> None:
        """Disarm every fault."""
        self._call("DELETE", "faults")

    def advance_clock(self, seconds: float) -> None:
        """Move the double's clock forward (sandboxes past their expiry are reaped)."""
        self._call("POST", "clock", {"advance_seconds": seconds})

    def set_tail_delay(self, seconds: float) -> None:
        """Make execd linger ``seconds`` after the terminal event before ending the stream
        (execd's graceful-shutdown sleep, ``EXECD_API_GRACE_SHUTDOWN``: 1 s by default)."""
        self._call("POST", "config", {"tail_delay": seconds})

    def set_ping_interval(self, seconds: float) -> None:
        """Seconds of silence after which a command stream carries a ``ping`` event (3 s)."""
        self._call("POST", "config", {"ping_interval": seconds})

    def set_ignore_metadata_filter(self, ignore: bool) -> None:
        """Make ``GET /sandboxes`` ignore its ``metadata`` filter (every sandbox is listed), as
        a hostile or buggy lifecycle server might."""
        self._call("POST", "config", {"ignore_metadata_filter": ignore})

    def set_image_profile(self, uri: str, *, missing_tools: list[str] | tuple[str, ...]) -> None:
        """Make the sandboxes created from image ``uri`` from now on lack ``missing_tools``
        (program names, e.g. ``["setsid"]``), as a slim image that does not ship them: inside
        such a sandbox each is absent from every directory (``command -v`` finds nothing,
        running it is ``command not found``, exit 127), whatever the host has. Other images,
        and sandboxes created before, keep the host's tools; an empty list undoes it."""
        self._call("POST", "images", {"uri": uri, "missing_tools": list(missing_tools)})

    def sandboxes(self) -> list[dict[str, Any]]:
        """Live sandboxes with their host directory (``root``), state and metadata."""
        result: list[dict[str, Any]] = self._call("GET", "sandboxes")
        return result


class OpenSandboxDouble(DoubleAdmin):
    """Context manager running the double as a subprocess on ``127.0.0.1``, port 0.

    ``tail_delay`` sets execd's linger after a command's terminal event (default 1 s, as execd's
    ``EXECD_API_GRACE_SHUTDOWN``). Attributes once started: ``domain`` (``"127.0.0.1:PORT"``,
    what ``ConnectionConfigSync`` wants), ``url`` (``"http://127.0.0.1:PORT"``), ``api_key`` and
    ``data_dir`` (the host directory holding each sandbox's files under
    ``<data_dir>/<sandbox id>/workspace``).
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        data_dir: Path | None = None,
        startup_timeout: float = 20.0,
        log_level: str = "WARNING",
        tail_delay: float | None = None,
    ) -> None:
        self.api_key = api_key if api_key is not None else "double-" + secrets.token_hex(8)
        self._own_data_dir = data_dir is None
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix="opensandbox-double-"))
        self._startup_timeout = startup_timeout
        self._log_level = log_level
        self._tail_delay = tail_delay
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.domain = ""
        super().__init__("http://127.0.0.1:0")

    def start(self) -> OpenSandboxDouble:
        """Start the server (on ``self.port``; 0 picks a free port) and wait until it listens."""
        env = double_env()
        env.pop("OPEN_SANDBOX_API_KEY", None)
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "doubles.opensandbox.server",
                "--port",
                str(self.port),
                "--api-key",
                self.api_key,
                "--data-dir",
                str(self.data_dir),
                "--watch-stdin",
                "--log-level",
                self._log_level,
                *(["--tail-delay", str(self._tail_delay)] if self._tail_delay is not None else []),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        line = read_ready_line(self._process, self._startup_timeout) or b""
        text = line.decode().strip()
        if not text.startswith(_READY_PREFIX):
            self.stop()
            raise RuntimeError(f"OpenSandbox double failed to start (got {text!r})")
        self.port = int(text[len(_READY_PREFIX) :])
        self.domain = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.domain}"
        return self

    def restart(self) -> None:
        """Stop the server process and start a new one on the same port and data directory.

        Like a host that restarts: every sandbox and every command running in one is lost, and
        clients meet a server that knows none of them (404 ``DOCKER::SANDBOX_NOT_FOUND``).
        """
        process, self._process = self._process, None
        if process is not None:
            stop_process(process, grace=15)
        self.start()

    def stop(self) -> None:
        """Stop the server (it destroys every sandbox) and remove its data directory."""
        process, self._process = self._process, None
        if process is not None:
            stop_process(process, grace=15)
        if self._own_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    @property
    def pid(self) -> int:
        """Process id of the server (for resource checks)."""
        if self._process is None:
            raise RuntimeError("the double is not running")
        return self._process.pid

    def workspace_of(self, sandbox_id: str) -> Path:
        """Host directory backing ``/workspace`` of a sandbox."""
        return self.data_dir / sandbox_id / "workspace"

    def env(self) -> dict[str, str]:
        """Environment variables the SDK reads: ``OPEN_SANDBOX_DOMAIN``/``OPEN_SANDBOX_API_KEY``."""
        return {"OPEN_SANDBOX_DOMAIN": self.domain, "OPEN_SANDBOX_API_KEY": self.api_key}

    def __enter__(self) -> OpenSandboxDouble:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
