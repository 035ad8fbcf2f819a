"""``AsyncAioClient``: one ``httpx.AsyncClient`` to an AIO Sandbox service.

The twin of :class:`~skillruntime.aio.client.AioClient`: the same requests, envelope, errors and
retry rule (:mod:`.wire`; tenacity's ``AsyncRetrying``), awaited on the event loop with one
connection pool per event loop and no thread per call. Uploads stream from a seekable file
with a ``Content-Length``; downloads are async byte streams.

**Any event loop.** A connection pool belongs to the loop its sockets were opened on, so the
client keeps one pool per loop, opened on the loop's first call. When the loop is shut down by
:func:`asyncio.run` (or any runner that finalises async generators), that loop's pool is closed
on it; the pool of a loop closed otherwise is dropped when another loop makes a call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import IO, Any, TypeVar
from urllib.parse import urlsplit

import httpx
from tenacity import AsyncRetrying

from skillruntime.core.runtime.async_spi import LoopLocal

from .client import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT
from .wire import (
    MultipartFrame,
    auth_headers,
    envelope_data,
    http_error,
    json_instead_of_content,
    retry_settings,
    transport_error,
)

__all__ = ["AsyncAioClient"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_UPLOAD_BLOCK = 1 << 20


class AsyncAioClient:
    """Async HTTP access to one AIO Sandbox service (it never creates or stops the service).

    Arguments as :class:`~skillruntime.aio.client.AioClient`; ``pool_size`` is the number
    of idle connections each pool keeps. Safe to share between the tasks of one event loop and
    between consecutive event loops (each gets its own pool); :attr:`request_count` counts HTTP
    requests sent (retries included).
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
        self._pools: LoopLocal[httpx.AsyncClient] = LoopLocal(
            self._new_http, aclose=httpx.AsyncClient.aclose
        )
        self._closed = False
        self._request_count = 0

    def __repr__(self) -> str:
        return f"AsyncAioClient({self.base_url!r})"

    @property
    def request_count(self) -> int:
        """HTTP requests sent so far by this client."""
        return self._request_count

    async def close(self) -> None:
        """Close the connection pools (the service keeps running); later calls raise
        ``RuntimeError``. The running loop's pool is closed here, a pool of another loop that
        still runs is closed on that loop, one of a closed loop is dropped."""
        self._closed = True
        await self._pools.aclose()

    async def _pool(self) -> httpx.AsyncClient:
        """The connection pool of the running loop (opened on the loop's first call)."""
        if self._closed:
            raise RuntimeError("Cannot send a request, as the AIO client has been closed.")
        return await self._pools.aget()

    def _new_http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            headers=self._headers,
            # Like the sync client's pool: ``pool_size`` connections are kept, more are opened
            # when more calls run at once (a long command never waits for a free connection).
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
        """Send one JSON call and return the envelope's ``data`` (see ``AioClient.call``)."""

        async def attempt() -> Any:
            request = (await self._pool()).build_request(
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
        the returned response."""

        async def attempt() -> httpx.Response:
            request = (await self._pool()).build_request(
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
        ``remote_path`` (multipart, streamed from the current position in blocks read in a
        worker thread)."""
        start = source.tell()
        endpoint = "/v1/file/upload"

        async def body(frame: MultipartFrame) -> AsyncGenerator[bytes, None]:
            yield frame.head
            await asyncio.to_thread(source.seek, start)
            left = size
            while left > 0:
                block = await asyncio.to_thread(source.read, min(_UPLOAD_BLOCK, left))
                if not block:
                    break
                left -= len(block)
                yield block
            yield frame.tail

        async def attempt() -> Any:
            frame = MultipartFrame.build({"path": remote_path}, "upload.bin")
            request = (await self._pool()).build_request(
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

    async def retrying(self, attempt: Callable[[], Awaitable[T]], *, idempotent: bool) -> T:
        """Await ``attempt()`` (a coroutine function: tenacity runs any other callable as a
        blocking one); when ``idempotent``, retry it on the transient failures of
        :func:`~skillruntime.aio.wire.is_retryable` with exponential back-off."""
        if not idempotent or self._retry_attempts == 1:
            return await attempt()
        policy = AsyncRetrying(**retry_settings(self._retry_attempts))
        result: T = await policy(attempt)
        return result

    def _timeout(self, read_timeout: float | None) -> httpx.Timeout:
        return httpx.Timeout(read_timeout or self.read_timeout, connect=self.connect_timeout)

    async def _send(
        self, endpoint: str, request: httpx.Request, *, stream: bool = False
    ) -> httpx.Response:
        """Send ``request``; unless ``stream``, its body is read before it returns. A failure
        to get (or read) the answer is an ``AioTransportError``."""
        http = await self._pool()
        self._request_count += 1
        started = time.monotonic()
        try:
            response = await http.send(request, stream=True)
            if not stream:
                try:
                    await response.aread()
                finally:
                    await response.aclose()
        except httpx.TimeoutException as exc:
            read = request.extensions.get("timeout", {}).get("read") or self.read_timeout
            raise transport_error(
                endpoint, self.base_url, exc, timeout=(self.connect_timeout, read)
            ) from exc
        except httpx.HTTPError as exc:
            raise transport_error(endpoint, self.base_url, exc, timeout=None) from exc
        logger.debug(
            "AIO %s %s -> %d in %.3fs",
            request.method,
            endpoint,
            response.status_code,
            time.monotonic() - started,
        )
        return response
