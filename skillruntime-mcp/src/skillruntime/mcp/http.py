"""Serving over streamable HTTP: one conversation per MCP session, bearer token, Origin checks.

- **Conversations**: each MCP session (``Mcp-Session-Id``) gets its own conversation with a
  generated id, opened on its first request after ``initialize`` and discarded when the
  session ends (``DELETE``, idle timeout, eviction at the session cap) or the server stops. A
  client may name a conversation instead with the :data:`CONVERSATION_HEADER` header; sessions
  naming the same id share it, and it is kept (closed, not discarded) when the server stops
  (with a conversation store, another server process can resume it). A 2026-era client (no
  ``initialize`` handshake, so no session) must name one.
- **Authentication**: with a token, every HTTP request must carry ``Authorization: Bearer
  <token>`` (compared in constant time); anything else is answered 401 before the MCP layer.
- **Origin and Host**: requests whose ``Origin`` (when present) or ``Host`` is not allowed are
  refused with 403 and 421 (DNS-rebinding protection, as the MCP transport specification asks). On a
  loopback address only loopback origins and hosts are allowed by default; on another address,
  that address, plus the names given as ``allowed_hosts`` (on a wildcard bind such as
  ``0.0.0.0``, list the names clients use).
- **Limits**: request bodies above ``max_body_bytes`` are refused with 413 (see
  :class:`BodyLimitMiddleware`); at most ``max_sessions`` sessions at once, the least recently
  used idle one ended for a new client at the cap (see :mod:`skillruntime.mcp.sessions`).
- **Shutdown**: bounded by ``shutdown_grace`` seconds (see :func:`serve_http`).
- **Memory**: :data:`KEEP_ALIVE_SECONDS` + 1 seconds after the last open session has ended
  (its connections are closed by then), free memory is handed back to the system
  (:func:`~skillruntime.mcp.memory.release_free_memory`; docs/mcp.md "Memory").
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import math
from collections.abc import Callable, Generator, Sequence
from typing import Any

import uvicorn
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .conversations import ServeConfig, ServedConversation, generated_conversation_id
from .defaults import (
    CONVERSATION_HEADER,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_TIMEOUT,
    DEFAULT_SHUTDOWN_GRACE,
    LOOPBACK_HOSTS,
)
from .memory import release_free_memory
from .server import SkillMcpServer
from .sessions import SessionManager

__all__ = [
    "CONVERSATION_HEADER",
    "DEFAULT_DRAIN_BYTES",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_IDLE_TIMEOUT",
    "DEFAULT_SHUTDOWN_GRACE",
    "LOOPBACK_HOSTS",
    "BodyLimitMiddleware",
    "HttpConversations",
    "serve_http",
]

logger = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
MCP_PATH = "/mcp"
DEFAULT_DRAIN_BYTES = 64 * 1024 * 1024
"""How much of a refused (oversized) body is read and dropped before the 413 is sent."""
DRAIN_SECONDS = 10.0
"""How long the rest of a refused body is read at most before the 413 is sent."""
_FORCE_EXIT_SECONDS = 2.0
KEEP_ALIVE_SECONDS = 5
"""How long an idle HTTP connection is kept open (uvicorn's default). Free memory is released
one second after that, once the last session has ended: its connections are closed by then."""


class HttpConversations:
    """The conversations of an HTTP server: by MCP session, or by the name a client gives.

    One conversation is opened per key even under concurrent first requests. A session's
    conversation is closed by :meth:`end_session` once the session has ended (the session
    manager calls it however the session ended); its generated conversation is then discarded
    (see :meth:`ServedConversation.aclose`). Named conversations are kept until :meth:`aclose`.
    """

    def __init__(self, config: ServeConfig) -> None:
        self._config = config
        self._opening: dict[str, asyncio.Task[ServedConversation]] = {}

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
        return await self._get(f"session:{session_id}", None)

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
            generated = conversation_id is None
            chosen = conversation_id or generated_conversation_id()
            task = asyncio.ensure_future(
                ServedConversation.open(self._config, chosen, discard_on_close=generated)
            )
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
        """Close the conversation of MCP session ``session_id`` (the session has ended;
        idempotent)."""
        await self._close(f"session:{session_id}")

    async def aclose(self) -> None:
        """Close every open conversation (a failure to close one is logged; the others are
        still closed)."""
        for key in list(self._opening):
            await self._close(key)


class BodyLimitMiddleware:
    """Refuses (413) a request body above ``max_bytes`` in a way plain HTTP clients can read.

    A client that announced ``Expect: 100-continue`` is answered at once (it sends no body).
    Otherwise the body is read and discarded (up to ``drain_bytes``, for at most
    :data:`DRAIN_SECONDS`) before the 413 (with ``Connection: close``) is sent: clients that
    write the whole body before reading the answer (urllib, requests) would otherwise see the
    connection reset. A body within the limit is read here and handed on to the app unchanged.
    """

    def __init__(
        self, app: ASGIApp, max_bytes: int, drain_bytes: int = DEFAULT_DRAIN_BYTES
    ) -> None:
        self._app = app
        self._max = max_bytes
        self._drain = drain_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            declared = int(headers.get("content-length", ""))
        except ValueError:
            declared = None
        if declared is not None and declared > self._max:
            if "100-continue" not in headers.get("expect", "").lower():
                await self._discard(receive, 0)
            await self._refuse(scope, receive, send)
            return
        body = bytearray()
        trailing: Message | None = None
        complete = False
        while not complete:
            message = await receive()
            if message["type"] != "http.request":
                trailing = message
                break
            body.extend(message.get("body", b""))
            if len(body) > self._max:
                await self._discard(receive, len(body) - self._max)
                await self._refuse(scope, receive, send)
                return
            complete = not message.get("more_body", False)
        replay: list[Message] = [{"type": "http.request", "body": bytes(body), "more_body": False}]
        if trailing is not None:
            replay.append(trailing)

        async def replayed() -> Message:
            if replay:
                return replay.pop(0)
            return await receive()

        await self._app(scope, replayed, send)

    async def _discard(self, receive: Receive, already: int) -> None:
        """Read and drop the rest of the body: at most ``drain_bytes`` of it, for at most
        :data:`DRAIN_SECONDS`."""
        drained = already
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_SECONDS):
                while drained <= self._drain:
                    message = await receive()
                    if message["type"] != "http.request":
                        return
                    drained += len(message.get("body", b""))
                    if not message.get("more_body", False):
                        return

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        logger.info("refused a request body above %d bytes", self._max)
        response = JSONResponse(
            {"error": "request body too large", "max_bytes": self._max},
            status_code=413,
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


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
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT,
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
    stop: asyncio.Event | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until ``stop`` is set.

    ``on_ready`` receives the endpoint URL once the socket listens. At most ``max_sessions``
    MCP sessions are open; at the cap the least recently used idle one is ended for a new
    client, and a session idle for ``session_idle_timeout`` seconds is ended (see
    :mod:`skillruntime.mcp.sessions`).

    On ``stop``, within ``shutdown_grace`` seconds: every conversation is closed first (running
    commands are killed, so their calls answer), new sessions and ``GET`` streams are refused
    and the open ``GET`` streams closed, the listening socket is closed and the connections
    still open are given the rest of the grace; then whatever is left is cancelled and this
    returns.
    """
    if shutdown_grace <= 0:
        raise ValueError("shutdown_grace must be a positive number of seconds")
    conversations = HttpConversations(config)
    server = SkillMcpServer(config, conversations.resolve)
    manager = SessionManager(
        server.server,
        security_settings=transport_security(host, allowed_hosts, allowed_origins),
        max_request_body_size=max_body_bytes,
        max_sessions=max_sessions,
        session_idle_timeout=session_idle_timeout,
        on_session_end=conversations.end_session,
        on_idle=release_free_memory,
        idle_delay=KEEP_ALIVE_SECONDS + 1.0,
    )
    app: ASGIApp = Starlette(
        routes=[Route(MCP_PATH, endpoint=StreamableHTTPASGIApp(manager))],
        lifespan=lambda _app: manager.run(),
    )
    if token:
        app = BearerTokenMiddleware(app, token)
    app = BodyLimitMiddleware(app, max_body_bytes)
    web = _Uvicorn(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            lifespan="on",
            timeout_graceful_shutdown=max(1, math.ceil(shutdown_grace)),
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
        )
    )
    task = asyncio.ensure_future(web.serve())
    try:
        while not web.started and not task.done():
            await asyncio.sleep(0.01)
        if web.started and on_ready is not None:
            bound = web.servers[0].sockets[0].getsockname()
            name = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
            on_ready(f"http://{name}:{bound[1]}{MCP_PATH}")
        if stop is None:
            await task
            return
        waiter = asyncio.ensure_future(stop.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if task.done():
            task.result()
            return
        await _shut_down(web, task, manager, conversations, shutdown_grace)
    finally:
        if not task.done():
            web.should_exit = web.force_exit = True
            task.cancel()
        await conversations.aclose()


async def _shut_down(
    web: _Uvicorn,
    task: asyncio.Future[None],
    manager: SessionManager,
    conversations: HttpConversations,
    grace: float,
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    logger.info("shutting down: %d MCP sessions open", manager.session_count)
    try:
        async with asyncio.timeout(grace / 2):
            await conversations.aclose()
    except TimeoutError:
        logger.warning("closing the conversations took longer than %.1fs", grace / 2)
    manager.stop()
    web.should_exit = True
    await asyncio.wait({task}, timeout=max(0.0, deadline - loop.time()))
    if not task.done():
        logger.warning("connections still open after %.1fs: closing them", grace)
        web.force_exit = True
        await asyncio.wait({task}, timeout=_FORCE_EXIT_SECONDS)
        if not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=_FORCE_EXIT_SECONDS)
    if task.done() and not task.cancelled():
        task.result()
