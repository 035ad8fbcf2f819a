"""The OpenSandbox double's HTTP server: routing, auth, fault injection and the admin API.

Run it as ``python -m doubles.opensandbox.server --port 0 --api-key KEY --data-dir DIR`` (with
``tests/`` on ``PYTHONPATH``). It prints ``OPENSANDBOX_DOUBLE_LISTENING <port>`` on stdout once
it accepts connections, and exits (destroying every sandbox) on SIGTERM, SIGINT or when its
stdin reaches end of file (the parent died).

URL layout on one port:

* ``/v1/...`` and the same routes bare: the lifecycle API (``OPEN-SANDBOX-API-KEY`` required);
* ``/sandbox/{id}/proxy/{port}/...``: direct access to a sandbox port (no auth), the endpoint
  the lifecycle API hands out; port 44772 is execd;
* ``[/v1]/sandboxes/{id}/proxy/{port}/...``: the server proxy (API key required);
* ``/_double/...``: the private admin API of the test harness (stats, faults, clock).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from doubles._http import BodyError, BodyReader
from doubles.opensandbox import execd, lifecycle
from doubles.opensandbox.exchange import Exchange
from doubles.opensandbox.registry import STATE_PAUSED, Fault, Registry
from doubles.opensandbox.sandboxfs import ApiError

log = logging.getLogger("doubles.opensandbox")

API_KEY_HEADER = "OPEN-SANDBOX-API-KEY"
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


class HangUpError(Exception):
    """Close the connection without any response (an unreachable sandbox)."""


class DoubleServer(ThreadingHTTPServer):
    """Threading server holding the registry and configuration."""

    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], registry: Registry, api_key: str) -> None:
        super().__init__(address, Handler)
        self.registry = registry
        self.api_key = api_key

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closes its connection (as one that stops reading a command stream
        early does) is normal traffic, not an error worth a traceback."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        host, port = self.server_address[:2]
        host_text = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{host_text}:{port}"


class Handler(BaseHTTPRequestHandler):
    """Dispatches every request; one thread per connection, HTTP/1.1 keep-alive."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; without TCP_NODELAY the body waits for the
    # client's delayed ACK (about 40 ms per response), which no real server makes clients pay.
    disable_nagle_algorithm = True
    server: DoubleServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        length_raw = self.headers.get("Content-Length")
        chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
        try:
            length = int(length_raw) if length_raw and not chunked else None
        except ValueError:
            length = None
        body = BodyReader(self.rfile, length, chunked)
        ex = Exchange(
            handler=self,
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query, keep_blank_values=True),
            body=body,
            base_url=self.server.base_url,
        )
        try:
            route(ex, self.server)
            if not ex.responded:
                raise ApiError(500, "UNKNOWN", "handler produced no response")
        except HangUpError:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError, execd.StreamAbortedError):
            self.close_connection = True
        except ApiError as err:
            if ex.responded:
                self.close_connection = True
                return
            headers = {}
            if err.status == 429:
                headers["Retry-After"] = "1"
            ex.send_json(err.status, err.body(), headers)
        except BodyError as err:
            if not ex.responded:
                ex.send_json(400, {"code": "INVALID_REQUEST_BODY", "message": str(err)})
            self.close_connection = True
        except Exception as err:
            log.exception("unhandled error on %s %s", self.command, parts.path)
            if not ex.responded:
                ex.send_json(
                    500, {"code": "UNKNOWN", "message": f"internal error: {type(err).__name__}"}
                )
            else:
                self.close_connection = True


def _segments(path: str) -> list[str]:
    return [p for p in path.split("/") if p]


def _check_auth(ex: Exchange, server: DoubleServer) -> None:
    if not server.api_key:
        return
    supplied = ex.header(API_KEY_HEADER)
    if not supplied:
        raise ApiError(
            401,
            "MISSING_API_KEY",
            f"Authentication credentials are missing. Provide API key via {API_KEY_HEADER} header.",
        )
    if supplied != server.api_key:
        raise ApiError(
            401,
            "INVALID_API_KEY",
            "Authentication credentials are invalid. Check your API key and try again.",
        )


def _inject_status_fault(ex: Exchange, registry: Registry, plane: str) -> None:
    if ex.method not in IDEMPOTENT:
        return
    fault = registry.take_fault(("status",), plane=plane)
    if fault is None:
        return
    headers = {}
    if fault.status == 429 and fault.retry_after is not None:
        headers["Retry-After"] = str(fault.retry_after)
    codes = {429: "RATE_LIMITED", 502: "BAD_GATEWAY", 503: "SERVICE_UNAVAILABLE"}
    ex.send_json(
        fault.status,
        {"code": codes.get(fault.status, "INJECTED_FAULT"), "message": "injected fault"},
        headers,
    )


def route(ex: Exchange, server: DoubleServer) -> None:
    """Send one request to its handler."""
    registry = server.registry
    seg = _segments(ex.path)
    if seg[:1] == ["_double"]:
        admin(ex, server, seg[1:])
        return
    if seg == ["health"]:
        registry.count_route(f"{ex.method} /health")
        ex.send_json(200, {"status": "healthy"})
        return
    if len(seg) >= 4 and seg[0] == "sandbox" and seg[2] == "proxy":
        execd_route(ex, server, seg[1], seg[3], seg[4:], proxied=False)
        return
    mount = ""
    if seg[:1] == ["v1"]:
        mount, seg = "/v1", seg[1:]
    if len(seg) >= 4 and seg[0] == "sandboxes" and seg[2] == "proxy":
        _check_auth(ex, server)
        execd_route(ex, server, seg[1], seg[3], seg[4:], proxied=True)
        return
    lifecycle_route(ex, server, seg, mount)


def lifecycle_route(ex: Exchange, server: DoubleServer, seg: list[str], mount: str) -> None:
    """The lifecycle API."""
    registry = server.registry
    m = ex.method
    template = "/" + "/".join(
        "{id}" if i == 1 and seg[0] == "sandboxes" else s for i, s in enumerate(seg)
    )
    if len(seg) == 4 and seg[2] == "endpoints":
        template = "/sandboxes/{id}/endpoints/" + seg[3]
    registry.count_route(f"{m} {template}")
    _check_auth(ex, server)
    _inject_status_fault(ex, registry, "lifecycle")
    if ex.responded:
        return
    if seg == ["sandboxes"]:
        if m == "POST":
            lifecycle.create(ex, registry)
            return
        if m == "GET":
            lifecycle.list_sandboxes(ex, registry)
            return
    elif seg == ["metrics", "events"] and m == "POST":
        ex.body.drain()
        ex.send_empty(204)
        return
    elif len(seg) >= 2 and seg[0] == "sandboxes":
        sid = seg[1]
        rest = seg[2:]
        if not rest and m == "GET":
            lifecycle.get(ex, registry, sid)
            return
        if not rest and m == "DELETE":
            lifecycle.delete(ex, registry, sid)
            return
        if rest == ["pause"] and m == "POST":
            lifecycle.pause(ex, registry, sid)
            return
        if rest == ["resume"] and m == "POST":
            lifecycle.resume(ex, registry, sid)
            return
        if rest == ["renew-expiration"] and m == "POST":
            lifecycle.renew(ex, registry, sid)
            return
        if rest == ["metadata"] and m == "PATCH":
            lifecycle.patch_metadata(ex, registry, sid)
            return
        if len(rest) == 2 and rest[0] == "endpoints" and m == "GET":
            lifecycle.endpoint(ex, registry, sid, rest[1], mount)
            return
    raise ApiError(404, "NOT_FOUND", f"no route for {m} {ex.path}")


def execd_route(
    ex: Exchange, server: DoubleServer, sandbox_id: str, port: str, seg: list[str], *, proxied: bool
) -> None:
    """A request to a sandbox port: execd on 44772, nothing listening elsewhere."""
    registry = server.registry
    m = ex.method
    sub = "/" + "/".join(seg)
    template = sub
    if len(seg) == 3 and seg[:2] == ["command", "status"]:
        template = "/command/status/{id}"
    elif len(seg) == 3 and seg[0] == "command" and seg[2] == "logs":
        template = "/command/{id}/logs"
    elif len(seg) >= 2 and seg[0] == "session":
        template = "/session/{id}" + ("/" + "/".join(seg[2:]) if seg[2:] else "")
    registry.count_route(f"execd {m} {template}")
    sandbox = registry.get(sandbox_id)
    if sandbox is None or sandbox.state == STATE_PAUSED:
        if proxied:
            if sandbox is None:
                raise lifecycle.not_found(sandbox_id)
            raise ApiError(502, "PROXY_ERROR", "Could not connect to the backend sandbox.")
        raise HangUpError()
    if port != str(lifecycle.EXECD_PORT):
        if proxied:
            raise ApiError(502, "PROXY_ERROR", "Could not connect to the backend sandbox.")
        raise HangUpError()
    _inject_status_fault(ex, registry, "execd")
    if ex.responded:
        return
    if seg == ["ping"] and m in ("GET", "HEAD"):
        execd.ping(ex)
    elif seg == ["command"] and m == "POST":
        execd.run_command(ex, registry, sandbox)
    elif seg == ["command"] and m == "DELETE":
        execd.interrupt(ex, sandbox)
    elif seg == ["session"] and m == "POST":
        execd.create_session(ex, sandbox)
    elif len(seg) == 3 and seg[0] == "session" and seg[2] == "run" and m == "POST":
        execd.run_in_session(ex, registry, sandbox, seg[1])
    elif len(seg) == 2 and seg[0] == "session" and m == "DELETE":
        execd.delete_session(ex, sandbox, seg[1])
    elif template == "/command/status/{id}" and m == "GET":
        execd.command_status(ex, sandbox, seg[2])
    elif template == "/command/{id}/logs" and m == "GET":
        execd.command_logs(ex, sandbox, seg[1])
    elif seg == ["files", "upload"] and m == "POST":
        execd.upload(ex, registry, sandbox)
        registry.after_upload(sandbox.id)
    elif seg == ["files", "download"] and m == "GET":
        execd.download(ex, sandbox)
    elif seg == ["files", "info"] and m == "GET":
        execd.info(ex, sandbox)
    elif seg == ["files"] and m == "DELETE":
        execd.delete_files(ex, sandbox)
    elif seg == ["files", "mv"] and m == "POST":
        execd.move(ex, sandbox)
    elif seg == ["files", "permissions"] and m == "POST":
        execd.permissions(ex, sandbox)
    elif seg == ["files", "replace"] and m == "POST":
        execd.replace(ex, sandbox)
    elif seg == ["files", "search"] and m == "GET":
        execd.search(ex, sandbox)
    elif seg == ["directories", "list"] and m == "GET":
        execd.list_directory(ex, sandbox)
    elif seg == ["directories"] and m == "POST":
        execd.make_dirs(ex, sandbox)
    elif seg == ["directories"] and m == "DELETE":
        execd.delete_dirs(ex, sandbox)
    elif seg == ["metrics"] and m == "GET":
        execd.metrics(ex)
    else:
        raise ApiError(404, "NOT_FOUND", f"no execd route for {m} {sub}")


def admin(ex: Exchange, server: DoubleServer, seg: list[str]) -> None:
    """The harness's private API under ``/_double``."""
    registry = server.registry
    m = ex.method
    body: Any = ex.body.json() if m == "POST" else None
    if seg == ["stats"] and m == "GET":
        ex.send_json(200, registry.stats())
    elif seg == ["stats", "reset"] and m == "POST":
        registry.reset_stats()
        ex.send_json(200, {"ok": True})
    elif seg == ["faults"] and m == "POST":
        spec = body or {}
        kind = spec.get("kind")
        if kind not in (
            "status",
            "drop_after_terminal",
            "no_terminal",
            "drop_mid_stream",
            "kill_after_upload",
        ):
            raise ApiError(400, "BAD_FAULT", f"unknown fault kind {kind!r}")
        status = int(spec.get("status", 503))
        if kind == "status" and status not in (429, 500, 502, 503, 504):
            raise ApiError(400, "BAD_FAULT", f"unsupported fault status {status}")
        registry.add_fault(
            Fault(
                kind=kind,
                count=int(spec.get("count", 1)),
                status=status,
                plane=str(spec.get("plane", "any")),
                retry_after=spec.get("retry_after"),
                after_events=int(spec.get("after_events", 0)),
            )
        )
        ex.send_json(200, {"ok": True})
    elif seg == ["faults"] and m == "DELETE":
        registry.clear_faults()
        ex.send_json(200, {"ok": True})
    elif len(seg) == 2 and seg[0] == "kill" and m == "POST":
        found = registry.remove(seg[1], reason="kills_behind_back")
        ex.send_json(200 if found else 404, {"killed": found})
    elif seg == ["clock"] and m == "POST":
        registry.advance_clock(float((body or {}).get("advance_seconds", 0)))
        ex.send_json(200, {"now": registry.now().isoformat()})
    elif seg == ["config"] and m == "POST":
        if "tail_delay" in (body or {}):
            registry.tail_delay = float(body["tail_delay"])
        if "ping_interval" in (body or {}):
            registry.ping_interval = float(body["ping_interval"])
        if "ignore_metadata_filter" in (body or {}):
            registry.ignore_metadata_filter = bool(body["ignore_metadata_filter"])
        ex.send_json(
            200,
            {
                "tail_delay": registry.tail_delay,
                "ping_interval": registry.ping_interval,
                "ignore_metadata_filter": registry.ignore_metadata_filter,
            },
        )
    elif seg == ["images"] and m == "POST":
        spec = body or {}
        uri, tools = spec.get("uri"), spec.get("missing_tools", [])
        if not isinstance(uri, str) or not uri or not isinstance(tools, list):
            raise ApiError(400, "BAD_IMAGE", "uri (a string) and missing_tools (a list) needed")
        try:
            registry.set_image_profile(uri, [str(tool) for tool in tools])
        except ValueError as exc:
            raise ApiError(400, "BAD_IMAGE", str(exc)) from exc
        ex.send_json(200, registry.image_profiles())
    elif seg == ["sandboxes"] and m == "GET":
        ex.send_json(
            200,
            [
                {"id": s.id, "root": str(s.root), "state": s.state, "metadata": s.metadata}
                for s in registry.all()
            ],
        )
    else:
        raise ApiError(404, "NOT_FOUND", f"no admin route for {m} {ex.path}")


def _reaper(registry: Registry, stop: threading.Event) -> None:
    while not stop.wait(0.25):
        try:
            registry.reap_expired()
        except Exception:
            log.exception("expiry reaper failed")


def main(argv: list[str] | None = None) -> int:
    """Entry point: serve until signalled or until stdin closes."""
    parser = argparse.ArgumentParser(description="OpenSandbox protocol double")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--api-key", default="")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--watch-stdin", action="store_true")
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument(
        "--tail-delay",
        type=float,
        default=None,
        help="seconds a command stream stays open after its terminal event (default 1)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr)

    data_dir = Path(args.data_dir).resolve()
    for masked in ("/root", "/workspace"):
        if data_dir.is_relative_to(masked):
            parser.error(f"--data-dir must not lie under {masked} (sandboxes mount over it)")
    data_dir.mkdir(parents=True, exist_ok=True)
    registry = Registry(data_dir)
    if args.tail_delay is not None:
        registry.tail_delay = args.tail_delay
    server = DoubleServer((args.host, args.port), registry, args.api_key)
    stop = threading.Event()

    def request_stop(*_: Any) -> None:
        if not stop.is_set():
            stop.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    if args.watch_stdin:

        def watch() -> None:
            while sys.stdin.buffer.read(1024):
                pass
            request_stop()

        threading.Thread(target=watch, daemon=True, name="stdin-watch").start()
    threading.Thread(target=_reaper, args=(registry, stop), daemon=True, name="reaper").start()
    sys.stdout.write(f"OPENSANDBOX_DOUBLE_LISTENING {server.server_address[1]}\n")
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        stop.set()
        registry.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
