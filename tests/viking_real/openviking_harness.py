"""A real ``openviking`` server for tests, run offline on 127.0.0.1 as a separate process.

OpenViking is AGPL-3.0, so nothing here imports it: the server lives in its own virtual
environment, built once per machine by the setup step (``viking_real.openviking_env``; a test that
finds it missing fails with the command that builds it), and the tests talk to it over HTTP only.

The server is started with its models pointed at :class:`ModelStub`, a loopback stand-in for an
OpenAI-compatible API (chat completions and embeddings), so adding skills through the real API
works without network access. Tests reach the server through :class:`CountingProxy`, which
forwards every request unchanged and records its method and path; that is how a test proves that
a cache hit downloads nothing.

:func:`shared_server` hands one server to every fixture of a test run. The run's controller (the
xdist controller, or the only pytest process) makes a run folder (:func:`begin_run`, passed to the
workers in the environment); the first process that needs the server starts it there, under a file
lock, as a detached service (``python -m viking_real.openviking_harness RUN_DIR``: the server and
its model stub), and every process attaches to it with a counting proxy of its own. Each xdist
worker uses its own account (:func:`worker_account`, the default of :class:`Identity`), so workers
sharing the server never see each other's skills. The controller stops the service when the run
ends (:func:`end_run`); the service also stops by itself once the controller is gone.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import requests
from filelock import FileLock

from doubles._http import BackgroundHTTPServer
from viking_real.openviking_env import OpenVikingEnvironmentMissingError, require_openviking_venv

logger = logging.getLogger(__name__)

_START_TIMEOUT = 180.0
_STOP_TIMEOUT = 30.0
_HTTP_TIMEOUT = 60.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------------------------ model stub


class _ModelHandler(BaseHTTPRequestHandler):
    dimension = 8

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _reply(self, payload: Mapping[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.endswith("/embeddings"):
            items = body.get("input")
            items = items if isinstance(items, list) else [items]
            self._reply(
                {
                    "object": "list",
                    "model": body.get("model"),
                    "data": [
                        {"object": "embedding", "index": i, "embedding": [0.1] * self.dimension}
                        for i in range(len(items))
                    ],
                    "usage": {"prompt_tokens": 1, "total_tokens": 1},
                }
            )
            return
        if self.path.endswith("/chat/completions"):
            prompt = json.dumps(body.get("messages")).lower()
            # Privacy extraction expects a JSON object of values; everything else gets a summary.
            wants_values = "privacy" in prompt or "configuration items" in prompt
            # A session commit's memory extraction asks for a program of the server's restricted
            # memory SDK (its default output format): "no changes" is sdk.commit() alone.
            wants_operations = "memory write/edit/delete operations" in prompt
            text = (
                '{"values": {}}'
                if wants_values
                else "sdk.commit()"
                if wants_operations
                else "# Summary\n\nA stub summary."
            )
            self._reply(
                {
                    "id": "stub",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            )
            return
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()


class ModelStub:
    """A loopback OpenAI-compatible API: constant embeddings, canned chat answers."""

    def __init__(self) -> None:
        self._server = BackgroundHTTPServer(_ModelHandler)

    @property
    def base_url(self) -> str:
        return f"{self._server.url}/v1"

    def close(self) -> None:
        self._server.close()


# ------------------------------------------------------------------------------ counting proxy

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "content-length",
}


@dataclass(frozen=True)
class SeenRequest:
    """One request that went through the proxy."""

    method: str
    path: str
    headers: Mapping[str, str]
    status: int


class CountingProxy:
    """Forwards HTTP requests to ``upstream_port`` and records each one (thread-safe)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._lock = threading.Lock()
        self._seen: list[SeenRequest] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP | {"host"}
                }
                upstream = http.client.HTTPConnection(
                    "127.0.0.1", proxy.upstream_port, timeout=_HTTP_TIMEOUT
                )
                try:
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    data = response.read()
                    status = response.status
                    reply_headers = [
                        (k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP
                    ]
                finally:
                    upstream.close()
                proxy._record(SeenRequest(self.command, self.path, dict(self.headers), status))
                self.send_response(status)
                for key, value in reply_headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._forward()

            def do_POST(self) -> None:
                self._forward()

            def do_PUT(self) -> None:
                self._forward()

            def do_DELETE(self) -> None:
                self._forward()

        self._server = BackgroundHTTPServer(Handler)

    @property
    def url(self) -> str:
        return self._server.url

    def _record(self, seen: SeenRequest) -> None:
        with self._lock:
            self._seen.append(seen)

    def mark(self) -> int:
        """A position to pass to :meth:`since`."""
        with self._lock:
            return len(self._seen)

    def since(self, mark: int) -> list[SeenRequest]:
        """The requests forwarded after :meth:`mark` returned ``mark``."""
        with self._lock:
            return list(self._seen[mark:])

    def close(self) -> None:
        self._server.close()


def downloads(seen: list[SeenRequest]) -> list[SeenRequest]:
    """The file downloads (``/api/v1/content/download``) among ``seen``."""
    return [r for r in seen if r.path.startswith("/api/v1/content/download")]


# ------------------------------------------------------------------------------ the server


RUN_DIR_ENV = "SKILLRUNTIME_TEST_OPENVIKING_RUN"
"""The environment variable naming the run folder of :func:`begin_run`."""


def worker_account() -> str:
    """This test process's account on the shared server: ``default`` outside xdist, else
    ``default-<worker id>`` (so workers never see each other's skills)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return f"default-{worker}" if worker else "default"


@dataclass(frozen=True)
class Identity:
    """Dev-mode identity headers (no API key: the server runs in dev auth mode on loopback).

    The account defaults to this process's own (:func:`worker_account`)."""

    account: str = field(default_factory=worker_account)
    user: str = "default"

    def headers(self) -> dict[str, str]:
        return {"X-OpenViking-Account": self.account, "X-OpenViking-User": self.user}


@dataclass
class OpenVikingServer:
    """A running server: its direct URL, a counting proxy in front, and its workspace."""

    process: subprocess.Popen[bytes] | None
    """The server process when this object started it; ``None`` when attached to a service."""
    port: int
    workspace: Path
    log_path: Path
    proxy: CountingProxy
    models: ModelStub | None
    _session: requests.Session = field(default_factory=requests.Session)

    @property
    def direct_url(self) -> str:
        """The server itself (requests here are not counted)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The counting proxy in front of the server: give this URL to the code under test."""
        return self.proxy.url

    # ---- seeding through the real API (direct, so seeding is not counted)

    def _call(self, method: str, path: str, identity: Identity, **kwargs: Any) -> dict[str, Any]:
        response = self._session.request(
            method,
            self.direct_url + path,
            headers=identity.headers(),
            timeout=_HTTP_TIMEOUT,
            **kwargs,
        )
        payload: dict[str, Any] = response.json()
        if response.status_code >= 400 or payload.get("status") != "ok":
            raise AssertionError(f"{method} {path} -> {response.status_code}: {payload}")
        return payload

    def upload_skill(
        self,
        name: str,
        files: Mapping[str, str | bytes],
        *,
        identity: Identity = Identity(),
        scope: str = "user",
        replace: bool = False,
    ) -> dict[str, Any]:
        """Add (or with ``replace`` update) skill ``name`` from ``files`` (relative path → content,
        ``SKILL.md`` included) through ``POST /api/v1/skills`` (``PUT`` to replace), waiting for
        the server's processing to finish. ``scope`` is ``"user"`` or ``"agent"``."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for relative, content in files.items():
                archive.writestr(f"{name}/{relative}", content)
        upload = self._call(
            "POST",
            "/api/v1/resources/temp_upload",
            identity,
            files={"file": (f"{name}.zip", buffer.getvalue(), "application/zip")},
        )
        body: dict[str, Any] = {
            "temp_file_id": upload["result"]["temp_file_id"],
            "wait": True,
            "target_uri": self.scope_root(identity, scope),
        }
        if replace:
            return self._call("PUT", f"/api/v1/skills/{name}", identity, json=body)["result"]  # type: ignore[no-any-return]
        return self._call("POST", "/api/v1/skills", identity, json=body)["result"]  # type: ignore[no-any-return]

    def get_skill(
        self, name: str, *, identity: Identity = Identity(), scope: str = "user"
    ) -> dict[str, Any]:
        """The integrity view of skill ``name`` (direct, not counted)."""
        params = {
            "include_integrity": "true",
            "include_files": "true",
            "include_content": "true",
            "target_uri": self.scope_root(identity, scope),
        }
        return self._call("GET", f"/api/v1/skills/{name}", identity, params=params)["result"]  # type: ignore[no-any-return]

    @staticmethod
    def scope_root(identity: Identity, scope: str) -> str:
        """``viking://user/<user>/skills`` or ``viking://agent/skills``."""
        if scope == "agent":
            return "viking://agent/skills"
        return f"viking://user/{identity.user}/skills"

    def skill_uri(self, name: str, *, identity: Identity = Identity(), scope: str = "user") -> str:
        """The canonical URI of skill ``name`` in ``scope``."""
        return f"{self.scope_root(identity, scope)}/{name}"

    def stored_path(
        self, name: str, relative: str, *, identity: Identity = Identity(), scope: str = "user"
    ) -> Path:
        """Where the server keeps ``relative`` of skill ``name`` on disk (edit it to change the
        skill behind the API's back)."""
        base = self.workspace / "viking" / identity.account
        root = (
            base / "agent" / "skills"
            if scope == "agent"
            else base / "user" / identity.user / "skills"
        )
        return root / name / relative

    def log_tail(self, limit: int = 4000) -> str:
        """The end of the server's log, for failure messages."""
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def stop(self, grace: float = _STOP_TIMEOUT) -> None:
        """Close the proxy; if this object started the server, SIGTERM its process group, then
        SIGKILL after ``grace`` seconds, and stop the model stub."""
        self._session.close()
        self.proxy.close()
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=_STOP_TIMEOUT)
        if self.models is not None:
            self.models.close()


def start_server(root: Path, venv: Path | None = None) -> OpenVikingServer:
    """Start ``openviking-server`` on a free loopback port with its workspace under ``root``.

    Waits (bounded) until ``/health`` answers; raises with the log tail if it never does.
    """
    venv = require_openviking_venv(venv)
    root.mkdir(parents=True, exist_ok=True)
    home = root / "home"
    home.mkdir(exist_ok=True)
    workspace = root / "data"
    models = ModelStub()
    port = free_port()
    config = {
        "storage": {"workspace": str(workspace)},
        "server": {"host": "127.0.0.1", "port": port},
        "vlm": {
            "provider": "openai",
            "model": "stub-chat",
            "api_key": "stub",
            "api_base": models.base_url,
        },
        "embedding": {
            "dense": {
                "provider": "openai",
                "model": "stub-embed",
                "api_key": "stub",
                "api_base": models.base_url,
                "dimension": _ModelHandler.dimension,
            }
        },
    }
    config_path = root / "ov.conf"
    config_path.write_text(json.dumps(config))
    log_path = root / "server.log"
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "NO_PROXY": "127.0.0.1,localhost",
        "OPENVIKING_CONFIG_FILE": str(config_path),
        "TMPDIR": tempfile.gettempdir(),
    }
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(venv / "bin" / "openviking-server"), "--config", str(config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=str(root),
            env=env,
            start_new_session=True,
        )
    server = OpenVikingServer(
        process=process,
        port=port,
        workspace=workspace,
        log_path=log_path,
        proxy=CountingProxy(port),
        models=models,
    )
    deadline = time.monotonic() + _START_TIMEOUT
    while True:
        if process.poll() is not None:
            server.stop()
            raise RuntimeError(f"openviking-server exited early:\n{server.log_tail()}")
        try:
            health = requests.get(server.direct_url + "/health", timeout=2)
            if health.status_code == 200 and health.json().get("healthy"):
                break
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"openviking-server did not become healthy:\n{server.log_tail()}")
        time.sleep(0.2)
    return server


# ------------------------------------------------------------------------------ sharing

TEST_DIRS = ("agent_turn", "viking_cli", "viking_real", "viking_tools")
"""The folders (under tests/) whose tests use the real server (``tests/conftest.py`` prestarts it
for a run that includes one; ``tests/core/test_preloaded_python.py`` keeps the list true)."""

SERVER_TEST_MARKS = frozenset({"slow"})
"""The marks every module of the server's tests carries (they are ``slow_tests.SLOW_MODULES``;
``tests/core/test_preloaded_python.py`` keeps that true)."""


def selects_server_tests(mark_expression: str) -> bool:
    """Whether ``-m mark_expression`` keeps tests that carry :data:`SERVER_TEST_MARKS` and no
    other mark it names (``"not serial"`` does, ``"not slow"`` does not); ``False`` for an
    expression pytest would refuse. Only the prestart depends on it: a wrong ``True`` starts
    the server for nothing, a wrong ``False`` leaves its start to its first test."""
    from _pytest.mark.expression import Expression

    def matcher(name: str, /, **kwargs: object) -> bool:
        return not kwargs and name in SERVER_TEST_MARKS

    try:
        return Expression.compile(mark_expression).evaluate(matcher)
    except SyntaxError:
        return False


_SERVICE_FILE = "server.json"
_SERVICE_STOP_GRACE = 2.0


def begin_run() -> Path:
    """Make the run folder (in the controller, before any test) and name it in the environment,
    where :func:`shared_server` looks for it."""
    run_dir = Path(tempfile.mkdtemp(prefix="openviking-run-"))
    (run_dir / "owner.pid").write_text(f"{os.getpid()}\n")
    os.environ[RUN_DIR_ENV] = str(run_dir)
    return run_dir


def end_run(run_dir: Path) -> None:
    """Stop the run's service if one was started (SIGTERM, bounded wait, then SIGKILL), and remove
    the run folder."""
    try:
        info = json.loads((run_dir / _SERVICE_FILE).read_text())
    except FileNotFoundError:
        info = None
    if info is not None:
        pid = int(info["service_pid"])
        try:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + _STOP_TIMEOUT
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                for group in (pid, int(info["server_pid"])):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(run_dir, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A child that exited but was not reaped yet counts as gone.
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == 0


def _ensure_service(run_dir: Path) -> None:
    """Start the run's service unless it runs (under the run's file lock, so only once)."""
    with FileLock(str(run_dir / "start.lock"), timeout=_START_TIMEOUT + 30):
        if not (run_dir / _SERVICE_FILE).is_file():
            _launch_service(run_dir)


def prestart(run_dir: Path) -> threading.Thread | None:
    """Start the run's service in the background (a daemon thread of the controller), so that it
    comes up while the workers collect instead of after; ``None`` when the server's environment
    is missing (the first test that needs the server then fails with the command that builds it).

    A failed start is logged and leaves nothing behind: the first test that needs the server
    starts it again through :func:`shared_server` and reports the failure itself.
    """
    try:
        require_openviking_venv()
    except OpenVikingEnvironmentMissingError:
        return None

    def start() -> None:
        try:
            _ensure_service(run_dir)
        except Exception:  # reported again by the first test that needs it
            logging.getLogger(__name__).exception("the OpenViking test service did not prestart")

    thread = threading.Thread(target=start, name="openviking-prestart", daemon=True)
    thread.start()
    return thread


def _attach(run_dir: Path) -> OpenVikingServer:
    """The run's service (started by the first caller, under a file lock), seen through a counting
    proxy of this process."""
    info_path = run_dir / _SERVICE_FILE
    _ensure_service(run_dir)
    info = json.loads(info_path.read_text())
    port = int(info["port"])
    return OpenVikingServer(
        process=None,
        port=port,
        workspace=Path(info["workspace"]),
        log_path=Path(info["log_path"]),
        proxy=CountingProxy(port),
        models=None,
    )


def _launch_service(run_dir: Path) -> None:
    """Start the detached service and wait (bounded) until it has written its file."""
    log_path = run_dir / "service.log"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), *filter(None, [env.get("PYTHONPATH")])]
    )
    with log_path.open("wb") as log:
        service = subprocess.Popen(
            [sys.executable, "-m", "viking_real.openviking_harness", str(run_dir)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + _START_TIMEOUT + 10
    while not (run_dir / _SERVICE_FILE).is_file():
        if service.poll() is not None or time.monotonic() > deadline:
            if service.poll() is None:
                service.kill()
            tail = log_path.read_text(errors="replace")[-4000:]
            raise RuntimeError(f"the OpenViking test service did not start:\n{tail}")
        time.sleep(0.1)


def serve(run_dir: Path) -> int:
    """The service's body: start the server under ``run_dir``, publish its port, and keep it
    running until SIGTERM or until the run's controller (``owner.pid``) is gone."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    owner = int((run_dir / "owner.pid").read_text())
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    server = start_server(run_dir / "server")
    try:
        info = {
            "port": server.port,
            "workspace": str(server.workspace),
            "log_path": str(server.log_path),
            "service_pid": os.getpid(),
            "server_pid": server.process.pid if server.process is not None else None,
        }
        partial = run_dir / (_SERVICE_FILE + ".part")
        partial.write_text(json.dumps(info))
        partial.replace(run_dir / _SERVICE_FILE)
        logger.info("openviking-server ready on port %d", server.port)
        while not stopping.wait(0.5):
            if not _alive(owner):
                logger.info("the run's controller (pid %d) is gone: stopping", owner)
                break
    finally:
        # The workspace is thrown away with the run folder: nothing is gained by waiting out a
        # graceful shutdown (tens of seconds on a busy machine).
        server.stop(grace=_SERVICE_STOP_GRACE)
    return 0


class _Shared:
    """The process-wide server and how many fixtures hold it."""

    lock = threading.Lock()
    server: OpenVikingServer | None = None
    root: Path | None = None
    users = 0


def acquire_shared_server() -> OpenVikingServer:
    """The run's server (started on first use); pair with :func:`release_shared_server`.

    Without a run folder (:func:`begin_run` not called) the process starts a server of its own.
    """
    with _Shared.lock:
        if _Shared.server is None:
            run_dir = os.environ.get(RUN_DIR_ENV)
            if run_dir:
                _Shared.server = _attach(Path(run_dir))
            else:
                _Shared.root = Path(tempfile.mkdtemp(prefix="openviking-test-"))
                _Shared.server = start_server(_Shared.root)
        _Shared.users += 1
        return _Shared.server


def release_shared_server() -> None:
    """Once the last user releases it: detach from the run's server, or stop this process's own
    server and remove its files."""
    with _Shared.lock:
        _Shared.users -= 1
        if _Shared.users > 0 or _Shared.server is None:
            return
        server, root = _Shared.server, _Shared.root
        _Shared.server, _Shared.root = None, None
    server.stop()
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


def shared_server() -> Iterator[OpenVikingServer]:
    """Generator body for a session fixture: ``yield from shared_server()``."""
    server = acquire_shared_server()
    try:
        yield server
    finally:
        release_shared_server()


if __name__ == "__main__":
    sys.exit(serve(Path(sys.argv[1])))
