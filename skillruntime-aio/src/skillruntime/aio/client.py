"""``AioClient``: one ``requests.Session`` to an AIO Sandbox service, its envelope and its errors.

Every call has explicit connect and read timeouts. Calls marked idempotent (reads, stat, list,
download, uploads to a fresh staging path) are retried with tenacity on connection errors,
timeouts and HTTP 502/503/504; nothing else is ever retried — in particular no command execution.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import IO, Any, TypeVar
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from tenacity import Retrying

from .defaults import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT
from .errors import AioSandboxError
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
    "AioClient",
]

logger = logging.getLogger(__name__)


T = TypeVar("T")


class _MultipartBody:
    """A ``multipart/form-data`` body read in blocks from a seekable file (bounded memory).

    It has ``read`` and ``__len__`` but no ``__iter__``, so ``requests`` sends it with a
    ``Content-Length`` instead of chunked transfer encoding.
    """

    def __init__(self, fields: Mapping[str, str], source: IO[bytes], size: int, name: str) -> None:
        frame = MultipartFrame.build(fields, name)
        self.boundary = frame.boundary
        self._frame = frame
        self._head = frame.head
        self._tail = frame.tail
        self._source = source
        self._size = size
        self._stage = 0
        self._offset = 0

    @property
    def content_type(self) -> str:
        return self._frame.content_type

    def __len__(self) -> int:
        return self._frame.length(self._size)

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = 1 << 20
        while self._stage < 3:
            if self._stage == 0:
                chunk = self._head[self._offset : self._offset + size]
                if chunk:
                    self._offset += len(chunk)
                    return chunk
                self._stage, self._offset = 1, 0
            elif self._stage == 1:
                chunk = self._source.read(min(size, self._size - self._offset))
                if chunk:
                    self._offset += len(chunk)
                    return chunk
                self._stage, self._offset = 2, 0
            else:
                chunk = self._tail[self._offset : self._offset + size]
                if chunk:
                    self._offset += len(chunk)
                    return chunk
                self._stage = 3
        return b""


class AioClient:
    """HTTP access to one AIO Sandbox service (it never creates or stops the service).

    ``token`` is sent as ``Authorization: Bearer`` (JWT mode, or an API key the image accepts as
    a bearer token); ``api_key`` as ``X-AIO-API-Key``. The client is safe to share between
    threads; :attr:`request_count` counts HTTP requests sent (retries included).
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
        self._session = requests.Session()
        adapter = HTTPAdapter(pool_connections=4, pool_maxsize=pool_size)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self._session.headers.update(auth_headers(token, api_key))
        self._count_lock = threading.Lock()
        self._request_count = 0

    def __repr__(self) -> str:
        return f"AioClient({self.base_url!r})"

    @property
    def request_count(self) -> int:
        """HTTP requests sent so far by this client."""
        with self._count_lock:
            return self._request_count

    def close(self) -> None:
        """Close the connection pool (the service keeps running)."""
        self._session.close()

    # ----------------------------------------------------------------- calls

    def call(
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

        Raises an :class:`AioSandboxError` subclass for a non-2xx status, a ``success: false``
        envelope or a transport failure; idempotent calls are retried first.
        """

        def attempt() -> Any:
            response = self._send(
                method, endpoint, json=json, params=params, read_timeout=read_timeout
            )
            try:
                return self._data(endpoint, response)
            finally:
                response.close()

        return self.retrying(attempt, idempotent=idempotent)

    def open_stream(
        self, endpoint: str, *, params: Mapping[str, str], idempotent: bool = True
    ) -> requests.Response:
        """``GET`` a binary stream; the caller iterates and closes the returned response."""

        def attempt() -> requests.Response:
            response = self._send("GET", endpoint, params=params, stream=True)
            if response.status_code >= 300:
                try:
                    raise self._http_error(endpoint, response)
                finally:
                    response.close()
            content_type = response.headers.get("Content-Type", "")
            if content_type.startswith("application/json"):
                # A JSON body on a download is an envelope, never file content.
                try:
                    raise json_instead_of_content(endpoint, response)
                finally:
                    response.close()
            return response

        return self.retrying(attempt, idempotent=idempotent)

    def upload(
        self,
        remote_path: str,
        source: IO[bytes],
        size: int,
        *,
        idempotent: bool = True,
        read_timeout: float | None = None,
    ) -> Any:
        """``POST /v1/file/upload`` the ``size`` bytes of the seekable ``source`` to
        ``remote_path`` (multipart, streamed from the current position)."""
        start = source.tell()
        endpoint = "/v1/file/upload"

        def attempt() -> Any:
            source.seek(start)
            body = _MultipartBody({"path": remote_path}, source, size, "upload.bin")
            response = self._send(
                "POST",
                endpoint,
                data=body,
                headers={"Content-Type": body.content_type},
                read_timeout=read_timeout,
            )
            try:
                return self._data(endpoint, response)
            finally:
                response.close()

        return self.retrying(attempt, idempotent=idempotent)

    # -------------------------------------------------------------- plumbing

    def retrying(self, attempt: Callable[[], T], *, idempotent: bool) -> T:
        """Run ``attempt``; when ``idempotent``, retry it on transient failures (connection
        errors, timeouts, HTTP 502/503/504) with exponential back-off."""
        if not idempotent or self._retry_attempts == 1:
            return attempt()
        policy = Retrying(**retry_settings(self._retry_attempts))
        return policy(attempt)

    def _send(
        self,
        method: str,
        endpoint: str,
        *,
        json: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
        data: Any = None,
        headers: Mapping[str, str] | None = None,
        stream: bool = False,
        read_timeout: float | None = None,
    ) -> requests.Response:
        url = self.base_url + endpoint
        timeout = (self.connect_timeout, read_timeout or self.read_timeout)
        with self._count_lock:
            self._request_count += 1
        started = time.monotonic()
        try:
            response = self._session.request(
                method,
                url,
                json=json,
                params=params,
                data=data,
                headers=dict(headers) if headers else None,
                stream=stream,
                timeout=timeout,
            )
        except requests.Timeout as exc:
            raise transport_error(endpoint, self.base_url, exc, timeout=timeout) from exc
        except requests.RequestException as exc:
            raise transport_error(endpoint, self.base_url, exc, timeout=None) from exc
        logger.debug(
            "AIO %s %s -> %d in %.3fs",
            method,
            endpoint,
            response.status_code,
            time.monotonic() - started,
        )
        return response

    def _data(self, endpoint: str, response: requests.Response) -> Any:
        return envelope_data(endpoint, response, has_credentials=self._has_credentials)

    def _http_error(self, endpoint: str, response: requests.Response) -> AioSandboxError:
        return http_error(endpoint, response, has_credentials=self._has_credentials)
