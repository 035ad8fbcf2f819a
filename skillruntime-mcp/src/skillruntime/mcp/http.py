"""Serving over streamable HTTP: one conversation per MCP session, bearer token, Origin checks.

- **Conversations**: each MCP session (``Mcp-Session-Id``) gets its own conversation with a
  generated id, opened on its first request after ``initialize`` and closed when the client
  ends the session (``DELETE``), when the session has been idle longer than the SDK's session
  idle timeout (the SDK has then expired it), or when the server stops. A client may name a
  conversation instead with the :data:`CONVERSATION_HEADER` header; sessions naming the same id
  share it, and it is kept until the server stops (with a conversation store, another server
  process can resume it). A 2026-era client (no ``initialize`` handshake, so no session) must
  name one.
- **Authentication**: with a token, every HTTP request must carry ``Authorization: Bearer
  <token>`` (compared in constant time); anything else is answered 401 before the MCP layer.
- **Origin and Host**: requests whose ``Origin`` (when present) or ``Host`` is not allowed are
  refused with 403 and 421 (DNS-rebinding protection, as the MCP transport specification asks). On a
  loopback address only loopback origins and hosts are allowed by default; on another address,
  that address, plus the names given as ``allowed_hosts`` (on a wildcard bind such as
  ``0.0.0.0``, list the names clients use).
- **Limits**: request bodies above ``max_body_bytes`` are refused with 413; at most
  ``max_sessions`` sessions at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import uuid
from collections.abc import Callable, Generator, Sequence
from typing import Any

import uvicorn
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import DEFAULT_SESSION_IDLE_TIMEOUT
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from .conversations import ServeConfig, ServedConversation
from .server import SkillMcpServer

__all__ = [
    "CONVERSATION_HEADER",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_SESSIONS",
    "LOOPBACK_HOSTS",
    "HttpConversations",
    "serve_http",
]

logger = logging.getLogger(__name__)

CONVERSATION_HEADER = "X-Skillruntime-Conversation"
"""Request header naming the conversation a request belongs to."""
SESSION_HEADER = "mcp-session-id"
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_SESSIONS = 100
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class HttpConversations:
    """The conversations of an HTTP server: by MCP session, or by the name a client gives.

    One conversation is opened per key even under concurrent first requests. A session's
    conversation unused for ``session_idle_timeout`` seconds (the idle period after which the
    SDK closes the session) is closed on the next request of any session.
    """

    def __init__(
        self, config: ServeConfig, session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT
    ) -> None:
        self._config = config
        self._idle_timeout = session_idle_timeout
        self._opening: dict[str, asyncio.Task[ServedConversation]] = {}
        self._last_used: dict[str, float] = {}

    async def resolve(self, ctx: ServerRequestContext[Any, Any]) -> ServedConversation:
        """The conversation of the request in ``ctx`` (opened on first use)."""
        headers = getattr(ctx.request, "headers", None) or {}
        named = headers.get(CONVERSATION_HEADER.lower())
        if named:
            return await self._get(f"name:{named}", named)
        session_id = headers.get(SESSION_HEADER)
        if not session_id:
            raise MCPError(
                types.INVALID_REQUEST,
                f"this request has no MCP session: name a conversation with the "
                f"{CONVERSATION_HEADER} header",
            )
        key = f"session:{session_id}"
        now = asyncio.get_running_loop().time()
        await self._close_idle(now)
        self._last_used[key] = now
        return await self._get(key, None)

    async def _close_idle(self, now: float) -> None:
        idle = [key for key, used in self._last_used.items() if now - used > self._idle_timeout]
        for key in idle:
            del self._last_used[key]
            await self._close(key)

    async def _close(self, key: str) -> None:
        task = self._opening.pop(key, None)
        if task is None:
            return
        try:
            conversation = await task
        except Exception as exc:  # it never opened: nothing to close
            logger.debug("a conversation that failed to open is skipped: %s", exc)
            return
        try:
            await conversation.aclose()
        except Exception as exc:
            logger.warning("closing a conversation failed: %s", exc)

    async def _get(self, key: str, conversation_id: str | None) -> ServedConversation:
        task = self._opening.get(key)
        if task is None:
            chosen = conversation_id or f"mcp-{uuid.uuid4().hex[:12]}"
            task = asyncio.ensure_future(ServedConversation.open(self._config, chosen))
            self._opening[key] = task
        try:
            return await asyncio.shield(task)
        except Exception as exc:
            if self._opening.get(key) is task:
                del self._opening[key]
            raise MCPError(
                types.INTERNAL_ERROR, f"the conversation could not be opened: {exc}"
            ) from None

    async def end_session(self, session_id: str) -> None:
        """Close the conversation of MCP session ``session_id`` (the client ended it)."""
        key = f"session:{session_id}"
        self._last_used.pop(key, None)
        await self._close(key)

    async def aclose(self) -> None:
        """Close every open conversation (a failure to close one is logged; the others are
        still closed)."""
        self._last_used.clear()
        for key in list(self._opening):
            await self._close(key)


class BearerTokenMiddleware:
    """Refuses (401) every HTTP request without ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            supplied = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(supplied, self._expected):
                response = JSONResponse(
                    {"error": "unauthorized", "message": "a valid bearer token is required"},
                    status_code=401,
                    headers={"WWW-Authenticate": 'Bearer realm="skillruntime-mcp"'},
                )
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


class SessionEndMiddleware:
    """Closes a session's conversation once its ``DELETE`` has been answered."""

    def __init__(self, app: ASGIApp, conversations: HttpConversations) -> None:
        self._app = app
        self._conversations = conversations

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)
        if scope["type"] == "http" and scope["method"] == "DELETE":
            session_id = dict(scope["headers"]).get(SESSION_HEADER.encode())
            if session_id:
                await self._conversations.end_session(session_id.decode("latin-1"))


def transport_security(
    host: str, allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = ()
) -> TransportSecuritySettings:
    """The Host/Origin rules: the loopback names on a loopback address, else ``host`` itself,
    plus ``allowed_hosts`` (names clients reach the server by, any port) and
    ``allowed_origins`` (exact origins such as ``https://app.example``)."""
    names = [*(LOOPBACK_HOSTS if host in LOOPBACK_HOSTS else (host,)), *allowed_hosts]
    hosts = [f"[{name}]:*" if ":" in name else f"{name}:*" for name in names]
    hosts += [name for name in names if ":" not in name]
    origins = [f"{scheme}://{entry}" for entry in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[*origins, *allowed_origins],
    )


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handling (the caller handles SIGINT/SIGTERM)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


async def serve_http(
    config: ServeConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    stop: asyncio.Event | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until ``stop`` is set.

    ``on_ready`` receives the endpoint URL once the socket listens. On ``stop``, every
    conversation is closed first (running commands are killed), then the server shuts down.
    """
    conversations = HttpConversations(config)
    server = SkillMcpServer(config, conversations.resolve)
    app: ASGIApp = server.server.streamable_http_app(
        host=host,
        transport_security=transport_security(host, allowed_hosts, allowed_origins),
        max_request_body_size=max_body_bytes,
        max_sessions=max_sessions,
        session_idle_timeout=DEFAULT_SESSION_IDLE_TIMEOUT,
    )
    app = SessionEndMiddleware(app, conversations)
    if token:
        app = BearerTokenMiddleware(app, token)
    web = _Uvicorn(uvicorn.Config(app, host=host, port=port, log_config=None, lifespan="on"))
    task = asyncio.ensure_future(web.serve())
    try:
        while not web.started and not task.done():
            await asyncio.sleep(0.01)
        if web.started and on_ready is not None:
            bound = web.servers[0].sockets[0].getsockname()
            name = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
            on_ready(f"http://{name}:{bound[1]}/mcp")
        if stop is None:
            await task
        else:
            waiter = asyncio.ensure_future(stop.wait())
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
        await conversations.aclose()
        web.should_exit = True
        await task
    finally:
        if not task.done():
            web.should_exit = True
            task.cancel()
        await conversations.aclose()
