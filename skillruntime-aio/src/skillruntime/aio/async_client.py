"""``AsyncAioClient``: one ``httpx.AsyncClient`` to an AIO Sandbox service.

``skillruntime.aio.async_client`` is the source of both faces: ``skillruntime.aio.client``
(``AioClient``, one ``httpx.Client``) is generated from it by ``scripts/generate_sync.py``. Both
send the same
requests and read the answers with the same envelope, errors and retry rule (:mod:`.wire`;
tenacity's ``AsyncRetrying``). Every call has explicit connect and read timeouts. Calls marked
idempotent (reads, stat, list, download, uploads to a fresh staging path) are retried on
connection errors, protocol errors (an answer broken off or garbled), timeouts and HTTP
502/503/504; nothing else is ever retried — in particular no command execution. Uploads
stream from a seekable file in bounded blocks with a ``Content-Length``; downloads are byte
streams the caller reads in bounded chunks.

**Any event loop** (async face). A connection pool belongs to the loop its sockets were opened
on, so the client keeps one pool per loop, opened on the loop's first call. When the loop is
shut down by :func:`asyncio.run` (or any runner that finalises async generators), that loop's
pool is closed on it; the pool of a loop closed otherwise is dropped when another loop makes a
call. The sync face has one pool, shared by every thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import IO, Any, TypeAlias, TypeVar
from urllib.parse import urlsplit

import httpx
from tenacity import AsyncRetrying

from skillruntime.core.runtime.loop_local import LoopLocal
from skillruntime.core.runtime.tls import shared_ssl_context

from .defaults import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT
from .errors import AioTransportError
from .wire import (
    RETRYABLE_STATUSES,
    MultipartFrame,
    auth_headers,
    envelope_data,
    http_error,
    json_instead_of_content,
    retry_settings,
    transport_error,
)

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_READ_TIMEOUT",
    "RETRYABLE_STATUSES",
    "AsyncAioClient",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_UPLOAD_BLOCK = 1 << 20

if True:  # unasync: async
    _Attempt: TypeAlias = Callable[[], Awaitable[T]]
else:  # unasync: sync
    _Attempt: TypeAlias = Callable[[], T]
"""One try of a call, what :meth:`AsyncAioClient.retrying` runs (and runs again)."""


async def _off_loop(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)``, a blocking file call: in a worker thread on the async face."""
    if True:  # unasync: async
        return await asyncio.to_thread(function, *args)
    else:  # unasync: sync
        return function(*args)


class AsyncAioClient:
    """HTTP access to one AIO Sandbox service (it never creates or stops the service).

    ``token`` is sent as ``Authorization: Bearer`` (JWT mode, or an API key the image accepts as
    a bearer token); ``api_key`` as ``X-AIO-API-Key``. ``pool_size`` is the number of idle
    connections a pool keeps (more are opened when more calls run at once). Safe to share
    between threads, and between the tasks of one event loop and consecutive event loops (each
    loop gets its own pool); :attr:`request_count` counts HTTP requests sent (retries included).
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        api_key: str | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        retry_attempts: int = 3,
        pool_size: int = 32,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("base_url must be an absolute http:// or https:// URL")
        if connect_timeout <= 0 or read_timeout <= 0:
            raise ValueError("connect_timeout and read_timeout must be greater than zero")
        if retry_attempts < 1:
            raise ValueError("retry_attempts must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._retry_attempts = retry_attempts
        self._has_credentials = bool(token or api_key)
        self._headers = auth_headers(token, api_key)
        self._pool_size = pool_size
        if True:  # unasync: async
            self._pools: LoopLocal[httpx.AsyncClient] = LoopLocal(
                self._new_http, aclose=httpx.AsyncClient.aclose
            )
        else:  # unasync: sync
            self._http = self._new_http()
        self._closed = False
        self._count_lock = threading.Lock()
        self._request_count = 0

    def __repr__(self) -> str:
        return f"AsyncAioClient({self.base_url!r})"

    @property
    def request_count(self) -> int:
        """HTTP requests sent so far by this client."""
        with self._count_lock:
            return self._request_count

    async def close(self) -> None:
        """Close the connection pools (the service keeps running); later calls raise
        ``RuntimeError``. On the async face the running loop's pool is closed here, a pool of
        another loop that still runs is closed on that loop, one of a closed loop is dropped."""
        self._closed = True
        if True:  # unasync: async
            await self._pools.aclose()
        else:  # unasync: sync
            self._http.close()

    async def _pool(self) -> httpx.AsyncClient:
        """The connection pool (on the async face: the running loop's, opened on its first
        call)."""
        if self._closed:
            raise RuntimeError("Cannot send a request, as the AIO client has been closed.")
        if True:  # unasync: async
            return await self._pools.aget()
        else:  # unasync: sync
            return self._http

    def _new_http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            headers=self._headers,
            # The process's one default TLS context, not a CA bundle loaded per pool.
            verify=shared_ssl_context(httpx.create_ssl_context),
            # ``pool_size`` connections are kept, more are opened when more calls run at once
            # (a long command never waits for a free connection).
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=self._pool_size),
            timeout=httpx.Timeout(self.read_timeout, connect=self.connect_timeout),
        )

    # ----------------------------------------------------------------- calls

    async def call(
        self,
        method: str,
        endpoint: str,
        *,
        json: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
        idempotent: bool = False,
        read_timeout: float | None = None,
    ) -> Any:
        """Send one JSON call and return the envelope's ``data``.

        Raises an :class:`~skillruntime.aio.errors.AioSandboxError` subclass for a non-2xx
        status, a ``success: false`` envelope or a transport failure; idempotent calls are
        retried first.
        """

        async def attempt() -> Any:
            http = await self._pool()
            request = http.build_request(
                method,
                self.base_url + endpoint,
                json=dict(json) if json is not None else None,
                params=dict(params) if params else None,
                timeout=self._timeout(read_timeout),
            )
            response = await self._send(endpoint, request)
            return envelope_data(endpoint, response, has_credentials=self._has_credentials)

        return await self.retrying(attempt, idempotent=idempotent)

    async def open_stream(
        self, endpoint: str, *, params: Mapping[str, str], idempotent: bool = True
    ) -> httpx.Response:
        """``GET`` a binary stream; the caller iterates ``aiter_bytes()`` and ``aclose()``\\ s
        the returned response. An error status or a JSON body is a typed error, raised with
        the response closed."""

        async def attempt() -> httpx.Response:
            http = await self._pool()
            request = http.build_request(
                "GET", self.base_url + endpoint, params=dict(params), timeout=self._timeout(None)
            )
            response = await self._send(endpoint, request, stream=True)
            try:
                if response.status_code >= 300:
                    await response.aread()
                    raise http_error(endpoint, response, has_credentials=self._has_credentials)
                if response.headers.get("Content-Type", "").startswith("application/json"):
                    # A JSON body on a download is an envelope, never file content.
                    await response.aread()
                    raise json_instead_of_content(endpoint, response)
            except BaseException:
                await response.aclose()
                raise
            return response

        return await self.retrying(attempt, idempotent=idempotent)

    async def upload(
        self,
        remote_path: str,
        source: IO[bytes],
        size: int,
        *,
        idempotent: bool = True,
        read_timeout: float | None = None,
    ) -> Any:
        """``POST /v1/file/upload`` the ``size`` bytes of the seekable ``source`` to
        ``remote_path`` (multipart with a ``Content-Length``, streamed from the current position
        in blocks of at most 1 MiB; on the async face they are read in a worker thread)."""
        start = source.tell()
        endpoint = "/v1/file/upload"

        async def body(frame: MultipartFrame) -> AsyncIterator[bytes]:
            yield frame.head
            await _off_loop(source.seek, start)
            left = size
            while left > 0:
                block = await _off_loop(source.read, min(_UPLOAD_BLOCK, left))
                if not block:
                    break
                left -= len(block)
                yield block
            yield frame.tail

        async def attempt() -> Any:
            frame = MultipartFrame.build({"path": remote_path}, "upload.bin")
            http = await self._pool()
            request = http.build_request(
                "POST",
                self.base_url + endpoint,
                content=body(frame),
                headers={
                    "Content-Type": frame.content_type,
                    "Content-Length": str(frame.length(size)),
                },
                timeout=self._timeout(read_timeout),
            )
            response = await self._send(endpoint, request)
            return envelope_data(endpoint, response, has_credentials=self._has_credentials)

        return await self.retrying(attempt, idempotent=idempotent)

    # -------------------------------------------------------------- plumbing

    async def retrying(self, attempt: _Attempt[T], *, idempotent: bool) -> T:
        """Run ``attempt()`` (on the async face a coroutine function: tenacity runs any other
        callable as a blocking one); when ``idempotent``, retry it on the transient failures of
        :func:`~skillruntime.aio.wire.is_retryable` with exponential back-off."""
        if not idempotent or self._retry_attempts == 1:
            return await attempt()
        policy = AsyncRetrying(**retry_settings(self._retry_attempts))
        result: T = await policy(attempt)
        return result

    def _timeout(self, read_timeout: float | None) -> httpx.Timeout:
        return httpx.Timeout(read_timeout or self.read_timeout, connect=self.connect_timeout)

    def transport_failure(
        self, endpoint: str, error: httpx.HTTPError, *, read_timeout: float | None = None
    ) -> AioTransportError:
        """The typed error of ``error``, raised by httpx while ``endpoint`` was sent or its
        answer read (also while a stream is read): a timeout, a protocol error (an answer
        broken off or garbled) or a service that cannot be reached."""
        if isinstance(error, httpx.TimeoutException):
            timeout = (self.connect_timeout, read_timeout or self.read_timeout)
            return transport_error(endpoint, self.base_url, error, timeout=timeout)
        return transport_error(endpoint, self.base_url, error, timeout=None)

    async def _send(
        self, endpoint: str, request: httpx.Request, *, stream: bool = False
    ) -> httpx.Response:
        """Send ``request``; unless ``stream``, its body is read before it returns. A failure
        to get (or read) the answer is an ``AioTransportError`` (:meth:`transport_failure`)."""
        http = await self._pool()
        with self._count_lock:
            self._request_count += 1
        started = time.monotonic()
        try:
            response = await http.send(request, stream=True)
            if not stream:
                try:
                    await response.aread()
                finally:
                    await response.aclose()
        except httpx.HTTPError as exc:
            read = request.extensions.get("timeout", {}).get("read")
            raise self.transport_failure(endpoint, exc, read_timeout=read) from exc
        logger.debug(
            "AIO %s %s -> %d in %.3fs",
            request.method,
            endpoint,
            response.status_code,
            time.monotonic() - started,
        )
        return response
