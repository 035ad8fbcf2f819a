"""HTTP request checks in process: the bearer token and the Origin/Host rules, with generated
inputs."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from mcp.server.transport_security import TransportSecurityMiddleware
from starlette.requests import Request

from skillruntime.mcp.http import LOOPBACK_HOSTS, BearerTokenMiddleware, transport_security

TOKEN = "correct-horse-battery-staple"
domains = st.from_regex(r"[a-z][a-z0-9-]{0,15}(\.[a-z]{2,6}){0,2}", fullmatch=True).filter(
    lambda name: name not in LOOPBACK_HOSTS
)
ports = st.integers(min_value=1, max_value=65535)


def _scope(headers: list[tuple[bytes, bytes]], method: str = "POST") -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "headers": headers,
        "scheme": "http",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 40000),
    }


def _call(headers: list[tuple[bytes, bytes]]) -> tuple[int, bool]:
    """(status sent, whether the inner app ran) for one request through the token check."""
    reached: list[bool] = []
    statuses: list[int] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        reached.append(True)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    asyncio.run(BearerTokenMiddleware(inner, TOKEN)(_scope(headers), receive, send))
    return statuses[0], bool(reached)


@given(st.binary(max_size=64))
def test_any_other_authorization_is_refused_before_the_app(value: bytes) -> None:
    if value == f"Bearer {TOKEN}".encode():
        return
    assert _call([(b"authorization", value)]) == (401, False)


def test_the_right_token_reaches_the_app_and_none_does_not() -> None:
    assert _call([(b"authorization", f"Bearer {TOKEN}".encode())]) == (200, True)
    assert _call([]) == (401, False)


def _verdict(host: str, headers: dict[str, str]) -> int | None:
    middleware = TransportSecurityMiddleware(transport_security(host))
    raw = [(b"content-type", b"application/json")]
    raw += [(key.lower().encode(), value.encode()) for key, value in headers.items()]
    response = asyncio.run(middleware.validate_request(Request(_scope(raw)), is_post=True))
    return None if response is None else response.status_code


@given(domains, ports, st.sampled_from(["http", "https"]))
def test_a_loopback_server_refuses_every_foreign_origin(name: str, port: int, scheme: str) -> None:
    headers = {"Host": "127.0.0.1:8000", "Origin": f"{scheme}://{name}:{port}"}
    assert _verdict("127.0.0.1", headers) == 403


@given(domains, ports)
def test_a_loopback_server_refuses_foreign_host_headers(name: str, port: int) -> None:
    assert _verdict("127.0.0.1", {"Host": f"{name}:{port}"}) == 421


@given(st.sampled_from(["127.0.0.1", "localhost"]), ports)
def test_loopback_origins_and_requests_without_origin_pass(name: str, port: int) -> None:
    assert (
        _verdict("127.0.0.1", {"Host": f"{name}:{port}", "Origin": f"http://{name}:{port}"}) is None
    )
    assert _verdict("127.0.0.1", {"Host": f"{name}:{port}"}) is None
