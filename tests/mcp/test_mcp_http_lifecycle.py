"""The HTTP server process under pressure: shutdown with open streams, oversized bodies read by
plain clients, and a flood of sessions that are never ended."""

from __future__ import annotations

import json
import signal
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest
import requests

from mcp_clients import serve_args
from mcp_http import http_server

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def local_args(skills_root: Path, conversations_root: Path, *extra: str) -> list[str]:
    return [*serve_args(skills_root, options=[f"conversations_root={conversations_root}"]), *extra]


def initialize(client: httpx2.Client, url: str) -> str:
    """Open an MCP session (initialize + initialized); its id."""
    opened = client.post(url, headers=MCP_HEADERS, content=json.dumps(INITIALIZE))
    assert opened.status_code == 200, opened.text
    session_id = opened.headers["mcp-session-id"]
    initialized = client.post(
        url,
        headers={**MCP_HEADERS, "mcp-session-id": session_id},
        content=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    assert initialized.status_code == 202
    return session_id


def open_get_stream(url: str, session_id: str) -> socket.socket:
    """A raw connection holding the session's GET stream open (response headers read)."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    stream = socket.create_connection((parts.hostname, parts.port), timeout=30)
    stream.sendall(
        (
            f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Accept: text/event-stream\r\nmcp-session-id: {session_id}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = stream.recv(4096)
        assert chunk, "the server closed the GET stream before answering"
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head
    return stream


def read_to_end(stream: socket.socket) -> bytes:
    """Everything the server still sends until it closes the connection."""
    data = b""
    while chunk := stream.recv(4096):
        data += chunk
    return data


def call_tool(url: str, session_id: str, name: str, arguments: dict[str, object]) -> str:
    """POST one tools/call on its own connection; the answer's body."""
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    with httpx2.Client(timeout=60) as client:
        answer = client.post(
            url, headers={**MCP_HEADERS, "mcp-session-id": session_id}, content=json.dumps(call)
        )
    assert answer.status_code == 200, answer.text
    return answer.text


def wait_for_file(pattern: str, root: Path) -> Path:
    """The first file matching ``pattern`` under ``root`` once it has content."""
    deadline = time.monotonic() + 30
    while True:
        found = [path for path in root.glob(pattern) if path.read_text().strip()]
        if found:
            return found[0]
        assert time.monotonic() < deadline, f"{pattern} never appeared"
        time.sleep(0.05)


@contextmanager
def stuck_request(client: httpx2.Client, url: str, session_id: str) -> Iterator[None]:
    """A request whose body never arrives, keeping its connection busy until this exits; the
    server has taken it in (a ping on ``client`` answered after it was sent)."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as stuck:
        stuck.sendall(
            (
                f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                f"Content-Type: application/json\r\nmcp-session-id: {session_id}\r\n"
                "Accept: application/json, text/event-stream\r\nContent-Length: 500\r\n\r\n{"
            ).encode()
        )
        probe = client.post(
            url,
            headers={**MCP_HEADERS, "mcp-session-id": session_id},
            content=json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
        )
        assert probe.status_code == 200
        yield


def test_sigterm_kills_the_command_closes_the_get_stream_and_exits_0_within_the_grace(
    skills_root: Path, conversations_root: Path
) -> None:
    args = local_args(skills_root, conversations_root, "--shutdown-grace", "60")
    with (
        http_server(args) as server,
        httpx2.Client(timeout=30) as client,
        ThreadPoolExecutor(1) as pool,
    ):
        session_id = initialize(client, server.url)
        stream = open_get_stream(server.url, session_id)
        with stream:
            command = "echo $$ > sleeper.pid; exec sleep 300"
            running = pool.submit(call_tool, server.url, session_id, "bash", {"command": command})
            sleeper = int(wait_for_file("*/sleeper.pid", conversations_root).read_text())
            started = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            assert server.process.wait(timeout=30) == 0
            elapsed = time.monotonic() - started
            read_to_end(stream)  # the stream was ended, not left hanging
            assert '"result"' in running.result(timeout=30)  # the call answered
        assert not Path(f"/proc/{sleeper}").exists()
        assert elapsed < 15, f"the server took {elapsed:.1f}s: it waited for the stream"


def test_sigterm_with_a_stuck_request_exits_0_at_the_grace(
    skills_root: Path, conversations_root: Path
) -> None:
    args = local_args(skills_root, conversations_root, "--shutdown-grace", "2")
    with http_server(args) as server, httpx2.Client(timeout=30) as client:
        session_id = initialize(client, server.url)
        with open_get_stream(server.url, session_id), stuck_request(client, server.url, session_id):
            started = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            assert server.process.wait(timeout=30) == 0
            elapsed = time.monotonic() - started
        assert elapsed < 2 + 8, f"the server took {elapsed:.1f}s with a 2s grace"


def test_a_second_sigterm_cuts_a_long_shutdown_short_with_status_143(
    skills_root: Path, conversations_root: Path
) -> None:
    args = local_args(skills_root, conversations_root, "--shutdown-grace", "120")
    with http_server(args) as server, httpx2.Client(timeout=30) as client:
        session_id = initialize(client, server.url)
        stream = open_get_stream(server.url, session_id)
        with stream, stuck_request(client, server.url, session_id):
            server.process.send_signal(signal.SIGTERM)
            read_to_end(stream)  # the GET stream is closed: the shutdown is under way
            assert server.process.poll() is None  # and held by the stuck request
            started = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            assert server.process.wait(timeout=60) == 128 + signal.SIGTERM
            elapsed = time.monotonic() - started
        assert elapsed < 30, f"the second signal took {elapsed:.1f}s to end a 120s grace"


def test_an_oversized_body_is_answered_413_to_requests_and_urllib(
    skills_root: Path, conversations_root: Path
) -> None:
    args = local_args(skills_root, conversations_root, "--max-body-bytes", "4096")
    # large enough that a server closing without reading it resets the connection
    body = json.dumps(dict(INITIALIZE, padding="x" * 20_000_000)).encode()
    with http_server(args) as server:
        answered = requests.post(server.url, data=body, headers=MCP_HEADERS, timeout=30)
        assert answered.status_code == 413
        assert answered.json()["error"] == "request body too large"

        def chunks() -> object:
            for start in range(0, len(body), 65536):
                yield body[start : start + 65536]

        chunked = requests.post(server.url, data=chunks(), headers=MCP_HEADERS, timeout=30)
        assert chunked.status_code == 413

        request = urllib.request.Request(server.url, data=body, headers=MCP_HEADERS)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 413
        assert json.loads(refused.value.read())["max_bytes"] == 4096

        accepted = requests.post(
            server.url, data=json.dumps(INITIALIZE), headers=MCP_HEADERS, timeout=30
        )
        assert accepted.status_code == 200


def test_a_flood_of_unended_sessions_evicts_idle_ones_not_one_in_use(
    skills_root: Path, conversations_root: Path
) -> None:
    args = local_args(skills_root, conversations_root, "--max-sessions", "5")
    with (
        http_server(args) as server,
        httpx2.Client(timeout=30) as client,
        ThreadPoolExecutor(1) as pool,
    ):
        active = initialize(client, server.url)
        stream = open_get_stream(server.url, active)  # in use while its GET stream is open
        busy = initialize(client, server.url)  # in use while its tool call runs
        command = "echo $$ > busy.pid; while [ ! -e go ]; do sleep 0.05; done; echo finished"
        running = pool.submit(call_tool, server.url, busy, "bash", {"command": command})
        busy_workspace = wait_for_file("*/busy.pid", conversations_root).parent
        with stream:
            flood = [initialize(client, server.url) for _ in range(40)]
            (busy_workspace / "go").touch()
            assert "finished" in running.result(timeout=30)
            newcomer = initialize(client, server.url)
            listed = client.post(
                server.url,
                headers={**MCP_HEADERS, "mcp-session-id": newcomer},
                content=json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            )
            assert listed.status_code == 200
            assert '"name":"skill"' in listed.text
            still = client.post(
                server.url,
                headers={**MCP_HEADERS, "mcp-session-id": active},
                content=json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
            )
            assert still.status_code == 200
            oldest = client.post(
                server.url,
                headers={**MCP_HEADERS, "mcp-session-id": flood[0]},
                content=json.dumps({"jsonrpc": "2.0", "id": 4, "method": "ping"}),
            )
            assert oldest.status_code == 404  # evicted: its client initializes again
            recent = client.post(
                server.url,
                headers={**MCP_HEADERS, "mcp-session-id": flood[-1]},
                content=json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
            )
            assert recent.status_code == 200


def test_when_every_session_is_in_use_a_new_one_is_refused_503(
    skills_root: Path, conversations_root: Path
) -> None:
    args = local_args(skills_root, conversations_root, "--max-sessions", "2")
    with http_server(args) as server, httpx2.Client(timeout=30) as client:
        streams = [open_get_stream(server.url, initialize(client, server.url)) for _ in range(2)]
        try:
            refused = client.post(server.url, headers=MCP_HEADERS, content=json.dumps(INITIALIZE))
            assert refused.status_code == 503
        finally:
            for stream in streams:
                stream.close()


def test_an_idle_session_ends_after_the_configured_timeout_and_its_workspace_goes(
    skills_root: Path, conversations_root: Path
) -> None:
    args = local_args(skills_root, conversations_root, "--session-idle-timeout", "1")
    with http_server(args) as server, httpx2.Client(timeout=30) as client:
        session_id = initialize(client, server.url)
        headers = {**MCP_HEADERS, "mcp-session-id": session_id}
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "write", "arguments": {"file_path": "a.txt", "content": "a"}},
        }
        assert client.post(server.url, headers=headers, content=json.dumps(call)).is_success
        assert len(list(conversations_root.iterdir())) == 1
        # no request meanwhile: each would restart the idle period
        deadline = time.monotonic() + 30
        while list(conversations_root.iterdir()):
            assert time.monotonic() < deadline, "the idle session's workspace was kept"
            time.sleep(0.1)
        ping = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert client.post(server.url, headers=headers, content=ping).status_code == 404
    assert server.process.returncode == 0
