"""AIO Sandbox compatible HTTP server (test double), run as ``python -m doubles.aio.server``.

The process must be started inside a private mount namespace (``unshare --mount --propagation
private``; the harness also gives it a PID namespace of its own, where it is PID 1); at
start-up it bind-mounts ``--root`` onto ``/home/gem`` (and ``--tmp`` onto ``/tmp``) there, so
every command it runs and every file call see the same paths. It refuses to mount
when it shares the host's mount namespace. It prints one JSON line ``{"port": N}`` on stdout
once listening. On shutdown it kills every process left in its namespace.

Routes: ``/v1/sandbox``, ``/v1/bash/*`` (unless disabled), ``/v1/shell/*``, ``/v1/file/*``
and the private admin surface ``/_double/*`` (no auth, no faults). See README.md.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from doubles._http import BodyReader
from doubles._multipart import ByteSource

from .bash_api import BashService
from .editor import Editor
from .file_api import Download, FileService
from .multipart import boundary_of
from .procs import HOME
from .protocol import FILE_ERRORS, HttpError, envelope, parse_json_body, validation_error
from .shell_api import ShellService

logger = logging.getLogger("doubles.aio")

_DRAIN_LIMIT = 64 * 1024 * 1024

#: Requests remembered for ``GET /_double/requests`` (oldest dropped first).
JOURNAL_SIZE = 1000


def _auth_kind(headers: Any, query: dict[str, list[str]]) -> str | None:
    """The kind of credential a request carried (never its value)."""
    scheme = (headers.get("Authorization") or "").partition(" ")[0].lower()
    if scheme == "bearer":
        return "bearer"
    if headers.get("X-AIO-API-Key"):
        return "api_key_header"
    if query.get("api_key"):
        return "api_key_query"
    return None


def _journal_view(entry: dict[str, Any]) -> dict[str, Any]:
    """A journal entry with the parsed JSON body (multipart and binary bodies are not kept)."""
    view = {k: v for k, v in entry.items() if k != "body_ref"}
    req = entry.get("body_ref")
    if req is not None:
        view["body"] = req.body
    view["query"] = {k: v for k, v in entry["query"].items() if k != "api_key"}
    return view


_VERSION = "1.9.4"

_HTML_401 = (
    b"<html>\r\n<head><title>401 Authorization Required</title></head>\r\n<body>\r\n"
    b"<center><h1>401 Authorization Required</h1></center>\r\n<hr><center>nginx</center>\r\n"
    b"</body>\r\n</html>\r\n"
)


def _gateway_page(status: int) -> bytes:
    reason = {502: "Bad Gateway", 503: "Service Temporarily Unavailable", 504: "Gateway Time-out"}
    title = f"{status} {reason.get(status, 'Error')}"
    return (
        f"<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1>"
        f"</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
    ).encode()


@dataclass
class Fault:
    """An injected failure for the next ``remaining`` matching requests.

    ``status`` 0 drops the connection without an answer. ``body`` (str or JSON value) replaces
    the default body (an nginx-style HTML page for 5xx, the envelope otherwise). ``raw`` bytes
    are sent as the whole answer, verbatim, before the connection is closed (an answer broken
    off or garbled). ``delay`` waits before answering.
    """

    route: str
    status: int
    remaining: int
    body: Any = None
    delay: float = 0.0
    raw: bytes | None = None


@dataclass
class State:
    """Server-wide mutable state: configuration, services, statistics and faults."""

    auth: str
    secret: str | None
    bash_api: bool
    bash: BashService
    shell: ShellService
    files: FileService
    editor: Editor = field(default_factory=Editor)
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: Counter[str] = field(default_factory=Counter)
    journal: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=JOURNAL_SIZE))
    statuses: Counter[str] = field(default_factory=Counter)
    request_body_bytes: int = 0
    auth_failures: int = 0
    faults: list[Fault] = field(default_factory=list)

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests": dict(self.requests),
                "statuses": dict(self.statuses),
                "bytes_uploaded": self.files.bytes_uploaded,
                "request_body_bytes": self.request_body_bytes,
                "auth_failures": self.auth_failures,
            }

    def reset_stats(self) -> None:
        with self.lock:
            self.requests.clear()
            self.statuses.clear()
            self.journal.clear()
            self.request_body_bytes = 0
            self.auth_failures = 0
            self.files.bytes_uploaded = 0

    def take_fault(self, candidates: tuple[str, ...]) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.remaining > 0 and fault.route in candidates:
                    fault.remaining -= 1
                    if fault.remaining == 0:
                        self.faults.remove(fault)
                    return fault
        return None


@dataclass
class Request:
    """What a route handler receives."""

    method: str
    path: str
    params: dict[str, str]
    query: dict[str, list[str]]
    headers: Any
    stream: ByteSource
    length: int

    body: Any = None

    def json(self) -> Any:
        parts: list[bytes] = []
        while self.length > 0:
            block = self.stream.read(min(self.length, 65536))
            if not block:
                break
            parts.append(block)
            self.length -= len(block)
        self.length = 0
        raw = b"".join(parts)
        self.body = parse_json_body(raw, self.headers.get("Content-Type"))
        return self.body


Handler = Callable[[State, Request], Any]


def _routes() -> list[tuple[str, str, Handler]]:
    def sandbox(state: State, req: Request) -> Any:
        return _sandbox_context()

    def packages(state: State, req: Request) -> Any:
        return envelope([])

    return [
        ("GET", "/v1/sandbox", sandbox),
        ("GET", "/v1/sandbox/packages/python", packages),
        ("GET", "/v1/sandbox/packages/nodejs", packages),
        # bash
        ("POST", "/v1/bash/exec", lambda s, r: s.bash.exec(r.json())),
        ("POST", "/v1/bash/output", lambda s, r: s.bash.output(r.json())),
        ("POST", "/v1/bash/write", lambda s, r: s.bash.write(r.json())),
        ("POST", "/v1/bash/kill", lambda s, r: s.bash.kill(r.json())),
        ("GET", "/v1/bash/sessions", lambda s, r: s.bash.list_sessions()),
        ("POST", "/v1/bash/sessions/create", lambda s, r: s.bash.create_session(r.json())),
        (
            "POST",
            "/v1/bash/sessions/{session_id}/close",
            lambda s, r: s.bash.close_session(r.params["session_id"]),
        ),
        # shell
        ("POST", "/v1/shell/exec", lambda s, r: s.shell.exec(r.json())),
        ("POST", "/v1/shell/view", lambda s, r: s.shell.view(r.json())),
        ("POST", "/v1/shell/wait", lambda s, r: s.shell.wait(r.json())),
        ("POST", "/v1/shell/write", lambda s, r: s.shell.write(r.json())),
        ("POST", "/v1/shell/kill", lambda s, r: s.shell.kill(r.json())),
        ("POST", "/v1/shell/sessions/create", lambda s, r: s.shell.create_session(r.json())),
        ("POST", "/v1/shell/sessions/update", lambda s, r: s.shell.update_session(r.json())),
        ("GET", "/v1/shell/sessions/stats", lambda s, r: s.shell.session_stats()),
        ("GET", "/v1/shell/sessions", lambda s, r: s.shell.list_sessions()),
        ("DELETE", "/v1/shell/sessions", lambda s, r: s.shell.cleanup_all()),
        (
            "DELETE",
            "/v1/shell/sessions/{session_id}",
            lambda s, r: s.shell.cleanup(r.params["session_id"]),
        ),
        (
            "GET",
            "/v1/shell/terminal-url",
            lambda s, r: envelope(f"http://{r.headers.get('Host', '127.0.0.1')}/terminal"),
        ),
        # file
        ("POST", "/v1/file/read", lambda s, r: s.files.read(r.json())),
        ("POST", "/v1/file/write", lambda s, r: s.files.write(r.json())),
        ("POST", "/v1/file/replace", lambda s, r: s.files.replace(r.json())),
        ("POST", "/v1/file/search", lambda s, r: s.files.search(r.json())),
        ("POST", "/v1/file/find", lambda s, r: s.files.find(r.json())),
        ("POST", "/v1/file/grep", lambda s, r: s.files.grep(r.json())),
        ("POST", "/v1/file/glob", lambda s, r: s.files.glob(r.json())),
        ("POST", "/v1/file/list", lambda s, r: s.files.list_path(r.json())),
        ("POST", "/v1/file/upload", _upload),
        ("POST", "/v1/file/str_replace_editor", lambda s, r: s.editor.handle(r.json())),
        ("GET", "/v1/file/download", lambda s, r: s.files.download(r.query)),
    ]


def _upload(state: State, req: Request) -> Any:
    if boundary_of(req.headers.get("Content-Type")) is None:
        # FastAPI sees no form at all: the required ``file`` field is missing. The unread
        # body is drained by the dispatcher.
        raise validation_error(
            [{"type": "missing", "loc": ["body", "file"], "msg": "Field required", "input": None}]
        )
    length = req.length
    req.length = 0
    return state.files.upload(req.stream, length, req.headers.get("Content-Type"))


def _compile(template: str) -> re.Pattern[str]:
    pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template))
    return re.compile(f"^{pattern}$")


ROUTES = [(m, t, _compile(t), h) for m, t, h in _routes()]


def _sandbox_context() -> dict[str, Any]:
    """``GET /v1/sandbox``: the flat ``SandboxResponse`` (not wrapped in ``data``)."""
    summary = f"Home directory: {HOME}\nWorkspace: {HOME}\nUser: gem"
    return {
        "success": True,
        "message": "Operation successful",
        "data": summary,
        "hint": None,
        "home_dir": HOME,
        "workspace": HOME,
        "version": _VERSION,
        "detail": {
            "system": {
                "os": "linux",
                "os_version": os.uname().release,
                "arch": os.uname().machine,
                "user": "gem",
                "home_dir": HOME,
                "workspace": HOME,
                "timezone": "UTC",
                "occupied_ports": ["8080"],
            },
            "runtime": {
                "python": [{"ver": sys.version.split()[0], "bin": sys.executable, "alias": []}],
                "nodejs": [],
            },
            "utils": [
                {
                    "category": "archive",
                    "tools": [
                        {"name": "zip", "description": "zip archiver"},
                        {"name": "unzip", "description": "zip extractor"},
                        {"name": "tar", "description": "tar archiver"},
                    ],
                }
            ],
        },
    }


class AioHandler(BaseHTTPRequestHandler):
    """Dispatches one HTTP request: admin, faults, auth, routing, envelope errors."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes
    server_version = "nginx"
    sys_version = ""
    state: State  # set on the subclass created by serve()

    def version_string(self) -> str:
        return "nginx"

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    # -- plumbing ----------------------------------------------------------------------------

    def end_headers(self) -> None:
        super().end_headers()
        self._answer_started = True

    def _body_stream(self) -> tuple[ByteSource, int]:
        """The body and its length; a chunked body's length is unknown (``1 << 62``)."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return BodyReader(self.rfile, None, chunked=True), 1 << 62
        rfile: ByteSource = self.rfile
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        return rfile, max(length, 0)

    def _send(
        self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None
    ) -> None:
        self._record_status(status)  # before the client can see the answer
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _record_status(self, status: int) -> None:
        with self.state.lock:
            self.state.statuses[str(status)] += 1

    def _discard_body(self, req: Request) -> None:
        """Consume an unread body so the connection can be reused, or mark it for closing."""
        if req.length <= 0:
            return
        if req.length > _DRAIN_LIMIT:
            self.close_connection = True
            return
        left = req.length
        while left > 0:
            chunk = req.stream.read(min(65536, left))
            if not chunk:
                break
            left -= len(chunk)
        req.length = 0

    def _authorised(self, query: dict[str, list[str]]) -> bool:
        state = self.state
        if state.auth == "none" or state.secret is None:
            return True
        bearer = self.headers.get("Authorization") or ""
        scheme, _, credential = bearer.partition(" ")
        if scheme.lower() == "bearer" and credential.strip() == state.secret:
            return True
        if state.auth == "api_key":
            if (self.headers.get("X-AIO-API-Key") or "") == state.secret:
                return True
            if (query.get("api_key") or [""])[0] == state.secret:
                return True
        return False

    def _dispatch(self, method: str) -> None:
        state = self.state
        split = urlsplit(self.path)
        path = split.path
        query = parse_qs(split.query, keep_blank_values=True)
        stream, length = self._body_stream()
        self._answer_started = False
        matched: tuple[str, dict[str, str], Handler] | None = None
        allowed_elsewhere = False
        for route_method, template, regex, handler in ROUTES:
            hit = regex.match(path)
            if hit is None:
                continue
            if template.startswith("/v1/bash/") and not state.bash_api:
                continue
            if route_method != method:
                allowed_elsewhere = True
                continue
            matched = (template, hit.groupdict(), handler)
            break
        template = matched[0] if matched else path
        key = f"{method} {template}"
        entry: dict[str, Any] = {
            "method": method,
            "route": template,
            "path": path,
            "query": query,
            "auth": _auth_kind(self.headers, query),
            "body": None,
        }
        with state.lock:
            if not path.startswith("/_double/"):
                state.requests[key] += 1
                state.journal.append(entry)
            if length < (1 << 62) and not path.startswith("/_double/"):
                state.request_body_bytes += length
        req = Request(
            method, path, matched[1] if matched else {}, query, self.headers, stream, length
        )
        try:
            if path.startswith("/_double/"):
                self._admin(method, path, req)
                return
            entry["body_ref"] = req
            fault = state.take_fault((key, template, path, f"{method} {path}"))
            if fault is not None:
                self._fault(fault, req)
                return
            if not self._authorised(query):
                with state.lock:
                    state.auth_failures += 1
                self._discard_body(req)
                if state.auth == "api_key":
                    self._send_json(
                        401,
                        {
                            "success": False,
                            "message": "Unauthorized: invalid or missing API key",
                            "data": None,
                        },
                    )
                else:
                    self._send(401, _HTML_401, "text/html")
                return
            if matched is None:
                self._discard_body(req)
                if allowed_elsewhere:
                    self._send_json(405, {"detail": "Method Not Allowed"})
                else:
                    self._send_json(404, {"detail": "Not Found"})
                return
            try:
                result = matched[2](state, req)
            except HttpError as exc:
                self.close_connection = self.close_connection or exc.close
                self._discard_body(req)
                if isinstance(exc.body, str):
                    self._send(exc.status, exc.body.encode(), "text/plain; charset=utf-8")
                else:
                    self._send_json(exc.status, exc.body)
                return
            self._discard_body(req)
            if isinstance(result, Download):
                self._stream_download(result)
            else:
                self._send_json(200, result)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:
            logger.exception("unhandled error on %s %s", method, path)
            self.close_connection = True
            if self._answer_started:  # as an ASGI server does: the connection is dropped
                return
            self._headers_buffer = []  # no half-built header goes out before it
            with contextlib.suppress(OSError):
                self._send(500, b"Internal Server Error", "text/plain; charset=utf-8")

    def _stream_download(self, download: Download) -> None:
        self._record_status(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(download.size))
        self.send_header("Content-Disposition", download.disposition)
        self.end_headers()
        sent = 0
        try:
            for chunk in download.chunks():
                piece = chunk[: download.size - sent]
                if piece:
                    self.wfile.write(piece)
                    sent += len(piece)
        except OSError:
            self.close_connection = True
            return
        if sent < download.size:  # file shrank while streaming: the length promise is broken
            self.close_connection = True

    def _fault(self, fault: Fault, req: Request) -> None:
        self._discard_body(req)
        if fault.delay > 0:
            time.sleep(fault.delay)
        if fault.raw is not None:
            self.close_connection = True
            self.wfile.write(fault.raw)
            return
        if fault.status == 0:
            self.close_connection = True
            return
        body = fault.body
        if body is None:
            if fault.status >= 500:
                self._send(fault.status, _gateway_page(fault.status), "text/html")
                return
            body = {"success": False, "message": f"Injected failure {fault.status}", "data": None}
        if isinstance(body, str):
            self._send(fault.status, body.encode(), "text/plain; charset=utf-8")
        else:
            self._send_json(fault.status, body)

    # -- admin -------------------------------------------------------------------------------

    def _admin(self, method: str, path: str, req: Request) -> None:
        state = self.state
        payload = req.json() if method in ("POST", "PUT") else None
        self._discard_body(req)
        body = payload if isinstance(payload, dict) else {}
        if (method, path) == ("GET", "/_double/health"):
            self._send_json(200, {"ok": True})
        elif (method, path) == ("GET", "/_double/requests"):
            with state.lock:
                entries = list(state.journal)
            self._send_json(200, [_journal_view(e) for e in entries])
        elif (method, path) == ("GET", "/_double/stats"):
            self._send_json(200, state.stats())
        elif (method, path) == ("POST", "/_double/stats/reset"):
            state.reset_stats()
            self._send_json(200, {"ok": True})
        elif (method, path) == ("POST", "/_double/faults"):
            fault = Fault(
                route=str(body["route"]),
                status=int(body.get("status", 503)),
                remaining=int(body.get("count", 1)),
                body=body.get("body"),
                delay=float(body.get("delay", 0.0)),
                raw=base64.b64decode(body["raw"]) if body.get("raw") is not None else None,
            )
            with state.lock:
                state.faults.append(fault)
            self._send_json(200, {"ok": True})
        elif (method, path) == ("DELETE", "/_double/faults"):
            with state.lock:
                state.faults.clear()
            self._send_json(200, {"ok": True})
        elif (method, path) == ("POST", "/_double/bash_api"):
            state.bash_api = bool(body.get("enabled", True))
            self._send_json(200, {"ok": True, "bash_api": state.bash_api})
        elif (method, path) == ("POST", "/_double/shell/terminate"):
            ok = state.shell.mark_terminated(str(body.get("id")))
            self._send_json(200 if ok else 404, {"ok": ok})
        elif (method, path) == ("POST", "/_double/shell/evict"):
            ok = state.shell.evict(str(body.get("id")))
            self._send_json(200 if ok else 404, {"ok": ok})
        else:
            self._send_json(404, {"detail": "Not Found"})


class _Server(ThreadingHTTPServer):
    """Threaded server with a listen backlog large enough for parallel test clients."""

    request_queue_size = 128
    daemon_threads = True


def _bind_home(root: str, tmp: str | None) -> None:
    """Bind-mount ``root`` on /home/gem (and ``tmp`` on /tmp), only in a private mount namespace;
    /home there is a fresh tmpfs holding just the mount point.

    The namespace of PID 1, of the parent process and ``AIO_DOUBLE_HOST_MNTNS`` (set by the
    harness) count as the host's; sharing any of them aborts start-up.
    """
    outer = {os.environ.get("AIO_DOUBLE_HOST_MNTNS", "")}
    for pid in (1, os.getppid()):
        if pid in (0, os.getpid()):  # PID 1 of its own PID namespace: no parent visible
            continue
        try:
            outer.add(os.readlink(f"/proc/{pid}/ns/mnt"))
        except OSError:
            continue
    if os.readlink("/proc/self/ns/mnt") in outer:
        raise SystemExit("refusing to mount: not inside a private mount namespace (use unshare)")
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    # The mount point must exist: a tmpfs over its parent (in this namespace only) holds it, so
    # the host's own /home is never written.
    parent = os.path.dirname(HOME)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "aio-home", parent], check=True)
    os.mkdir(HOME)
    subprocess.run(["mount", "--bind", root, HOME], check=True)
    if tmp:
        subprocess.run(["mount", "--bind", tmp, "/tmp"], check=True)


def serve(argv: list[str] | None = None) -> None:
    """Parse arguments, mount the root, listen, print the port line and serve forever."""
    parser = argparse.ArgumentParser(prog="doubles.aio.server")
    parser.add_argument("--root", required=True, help="host directory that becomes /home/gem")
    parser.add_argument("--tmp", help="host directory that becomes the sandbox's private /tmp")
    parser.add_argument("--auth", choices=("none", "bearer", "api_key"), default="none")
    parser.add_argument("--no-bash-api", action="store_true")
    parser.add_argument("--hard-timeout-kills", choices=("group", "process"), default="group")
    parser.add_argument("--no-change-timeout", type=int, default=120)
    parser.add_argument("--max-shell-sessions", type=int, default=100)
    parser.add_argument("--shell-session-timeout", type=float, default=3600.0)
    parser.add_argument("--file-errors", choices=("structured", "legacy"), default="structured")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(asctime)s %(message)s")
    secret = os.environ.pop("AIO_DOUBLE_SECRET", None)
    FILE_ERRORS["mode"] = args.file_errors
    _bind_home(args.root, args.tmp)
    spool = tempfile.mkdtemp(prefix=".aio-double-", dir="/tmp")
    state = State(
        auth=args.auth,
        secret=secret,
        bash_api=not args.no_bash_api,
        bash=BashService(hard_timeout_kills=args.hard_timeout_kills),
        shell=ShellService(
            default_no_change_timeout=args.no_change_timeout,
            scratch_root=spool,
            max_sessions=max(args.max_shell_sessions, 1),
            session_timeout=args.shell_session_timeout,
        ),
        files=FileService(spool),
    )
    handler = type("BoundAioHandler", (AioHandler,), {"state": state})
    server = _Server(("127.0.0.1", 0), handler)
    server.daemon_threads = True

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sys.stdout.write(json.dumps({"port": server.server_address[1]}) + "\n")
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        state.bash.shutdown()
        state.shell.shutdown()
        server.server_close()
        _kill_namespace_processes()
        shutil.rmtree(spool, ignore_errors=True)


def _kill_namespace_processes() -> None:
    """SIGKILL every other process in this mount namespace (background jobs, orphans).

    Only this double's commands share the namespace, so nothing outside it is touched.
    """
    own = os.readlink("/proc/self/ns/mnt")
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/mnt") == own:
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue


if __name__ == "__main__":
    serve()
