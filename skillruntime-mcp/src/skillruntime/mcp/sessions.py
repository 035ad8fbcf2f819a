"""The MCP sessions of the HTTP server: the SDK's session manager with a cap that evicts idle
sessions, an end hook, and a shutdown that closes the open streams.

:class:`SessionManager` extends the SDK's
:class:`~mcp.server.streamable_http_manager.StreamableHTTPSessionManager`:

- **Cap with eviction.** When ``max_sessions`` sessions are open and a client opens another,
  the least recently used *idle* session is ended (as if its idle timeout had run out; its id
  then answers 404 and its client initializes again) instead of refusing the new client. A
  session is in use while one of its requests is being served, an open ``GET`` stream
  included; only when every open session is in use is the new client refused with 503.
- **Idle timeout.** A session with no request in flight for ``session_idle_timeout`` seconds is
  ended (the SDK's own expiry).
- **End hook.** ``on_session_end(session_id)`` is awaited once a session has ended, however it
  ended (``DELETE``, idle timeout, eviction, shutdown); the HTTP server closes the session's
  conversation there.
- **Idle hook.** ``on_idle()`` is called ``idle_delay`` seconds after the last open session
  has ended, if no session opened meanwhile (the delay lets the ended sessions' tasks and
  connections wind down and free what they hold); the HTTP server passes
  :func:`~skillruntime.mcp.memory.release_free_memory` (the allocators' free memory goes back
  to the system, so that a burst of sessions does not leave the process at its high-water
  mark; docs/mcp.md "Memory").
- **Stopping.** :meth:`SessionManager.stop` refuses new sessions and new ``GET`` streams with
  503 and closes the open ``GET`` streams, so that the HTTP server can finish its connections.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

__all__ = ["SessionManager"]

logger = logging.getLogger(__name__)

_SESSION_HEADER = MCP_SESSION_ID_HEADER.encode("ascii")


def _header(headers: Any, name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


class SessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager with idle-session eviction at the cap (see the module docs).

    ``max_sessions`` and ``session_idle_timeout`` are those of the SDK's manager;
    ``on_session_end`` is awaited (shielded from cancellation) after a session ended;
    ``on_idle`` is called ``idle_delay`` seconds after the last open session ended, unless a
    session opened meanwhile.
    """

    def __init__(
        self,
        *args: Any,
        on_session_end: Callable[[str], Awaitable[None]] | None = None,
        on_idle: Callable[[], object] | None = None,
        idle_delay: float = 1.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._on_session_end = on_session_end
        self._on_idle = on_idle
        self._idle_delay = idle_delay
        self._ending = 0  # sessions being ended (their end hook not finished)
        self._idle_generation = 0  # bumped by every session opened and every idle period
        self._in_flight: dict[str, int] = {}
        self._last_used: OrderedDict[str, float] = OrderedDict()
        self._stopping = False

    @property
    def session_count(self) -> int:
        """How many sessions are open."""
        return len(self._server_instances)

    # ------------------------------------------------------------ bookkeeping

    def _begin(self, session_id: str) -> None:
        if session_id in self._in_flight:
            self._in_flight[session_id] += 1

    def _done(self, session_id: str) -> None:
        if session_id in self._in_flight:
            self._in_flight[session_id] -= 1
            self._last_used[session_id] = anyio.current_time()
            self._last_used.move_to_end(session_id)

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        session_id = _header(scope["headers"], _SESSION_HEADER)
        if self._stopping and (session_id is None or scope["method"] == "GET"):
            response = JSONResponse({"error": "the server is shutting down"}, status_code=503)
            await response(scope, receive, send)
            return
        if session_id is not None:
            self._begin(session_id)
            try:
                await super()._handle_stateful_request(scope, receive, send)
            finally:
                self._done(session_id)
            return
        opened: str | None = None

        async def watch(message: Message) -> None:
            nonlocal opened
            if message["type"] == "http.response.start":
                opened = _header(message.get("headers", []), _SESSION_HEADER)
            await send(message)

        try:
            await super()._handle_stateful_request(scope, receive, watch)
        finally:
            if opened is not None:
                self._done(opened)

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            self._evict_idle_session()
        transport = super()._admit_session(requestor)
        self._idle_generation += 1
        if transport is not None and transport.mcp_session_id is not None:
            # the opening request is in flight until it has been answered
            self._in_flight[transport.mcp_session_id] = 1
            self._last_used[transport.mcp_session_id] = anyio.current_time()
        return transport

    def _evict_idle_session(self) -> None:
        """End the least recently used session with no request in flight, if there is one."""
        victim = next(
            (
                session_id
                for session_id in self._last_used
                if self._in_flight.get(session_id, 0) == 0 and session_id in self._server_instances
            ),
            None,
        )
        if victim is None:
            return
        transport = self._server_instances.pop(victim)
        self._session_owners.pop(victim, None)
        self._in_flight.pop(victim, None)
        self._last_used.pop(victim, None)
        logger.info(
            "ending idle session %s: %d sessions are open", victim[:12], len(self._server_instances)
        )
        if transport.idle_scope is not None:
            transport.idle_scope.cancel()  # the SDK's expiry: the session task discards it
        elif self._task_group is not None:
            self._task_group.start_soon(self._discard_session, victim, transport)

    async def _discard_session(
        self, session_id: str, transport: StreamableHTTPServerTransport
    ) -> None:
        tracked = session_id in self._server_instances  # else an earlier call ended it
        self._ending += 1
        try:
            await super()._discard_session(session_id, transport)
            self._in_flight.pop(session_id, None)
            self._last_used.pop(session_id, None)
            if self._on_session_end is not None:
                with anyio.CancelScope(shield=True):
                    try:
                        await self._on_session_end(session_id)
                    except Exception as exc:
                        logger.warning("ending session %s failed: %s", session_id[:12], exc)
        finally:
            self._ending -= 1
        # the last session to finish ending, when none is open any more
        idle = not self._server_instances and self._ending == 0
        if tracked and idle and self._on_idle is not None and self._task_group is not None:
            self._idle_generation += 1
            self._task_group.start_soon(self._call_on_idle, self._idle_generation)

    async def _call_on_idle(self, generation: int) -> None:
        """Call ``on_idle`` after the delay unless a session opened or ended meanwhile."""
        await anyio.sleep(self._idle_delay)
        if generation != self._idle_generation or self._server_instances or self._ending:
            return
        assert self._on_idle is not None
        try:
            self._on_idle()
        except Exception as exc:
            logger.warning("the idle hook failed: %s", exc)

    # --------------------------------------------------------------- shutdown

    def stop(self) -> None:
        """Refuse new sessions and ``GET`` streams (503) and close the open ``GET`` streams;
        requests being served finish normally."""
        self._stopping = True
        for transport in list(self._server_instances.values()):
            transport.close_standalone_sse_stream()
