"""``AioClient``: one ``requests.Session`` to an AIO Sandbox service, its envelope and its errors.

Every call has explicit connect and read timeouts. Calls marked idempotent (reads, stat, list,
download, uploads to a fresh staging path) are retried with tenacity on connection errors,
timeouts and HTTP 502/503/504; nothing else is ever retried — in particular no command execution.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import IO, Any, TypeVar
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from .errors import (
    AioAuthenticationError,
    AioNotFoundError,
    AioOperationError,
    AioRequestError,
    AioSandboxError,
    AioServerError,
    AioTransportError,
)

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_READ_TIMEOUT",
    "RETRYABLE_STATUSES",
    "AioClient",
]

logger = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT = 10.0
"""Seconds to establish a connection to the service."""

DEFAULT_READ_TIMEOUT = 60.0
"""Seconds to wait for a response to a call that does not run a command."""

RETRYABLE_STATUSES = frozenset({502, 503, 504})
"""HTTP statuses after which an idempotent call is retried."""

_MESSAGE_LIMIT = 300

T = TypeVar("T")


def _is_retryable(error: BaseException) -> bool:
    if isinstance(error, AioTransportError):
        return True
    return isinstance(error, AioServerError) and error.status in RETRYABLE_STATUSES


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 1] + "…"


def _server_message(body: Any) -> str:
    """The human part of an error body: ``message``, or FastAPI's ``detail`` (``loc``/``msg``
    only — never ``input``, which echoes request values)."""
    if not isinstance(body, Mapping):
        return ""
    message = body.get("message")
    if isinstance(message, str) and message:
        return _short(message)
    detail = body.get("detail")
    if isinstance(detail, str):
        return _short(detail)
    if isinstance(detail, list):
        parts = []
        for item in detail[:5]:
            if isinstance(item, Mapping):
                loc = ".".join(str(x) for x in item.get("loc", ()) if x != "body")
                parts.append(f"{loc}: {item.get('msg', '')}".strip(": "))
        return _short("; ".join(parts))
    return ""


def _error_type(body: Any) -> str | None:
    if isinstance(body, Mapping):
        data = body.get("data")
        if isinstance(data, Mapping):
            value = data.get("error_type")
            if isinstance(value, str):
                return value
    return None


class _MultipartBody:
    """A ``multipart/form-data`` body read in blocks from a seekable file (bounded memory).

    It has ``read`` and ``__len__`` but no ``__iter__``, so ``requests`` sends it with a
    ``Content-Length`` instead of chunked transfer encoding.
    """

    def __init__(self, fields: Mapping[str, str], source: IO[bytes], size: int, name: str) -> None:
        self.boundary = f"skillruntime-{uuid.uuid4().hex}"
        parts = []
        for key, value in fields.items():
            parts.append(
                f'--{self.boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n'
                f"{value}\r\n".encode()
            )
        parts.append(
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{name}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
        )
        self._head = b"".join(parts)
        self._tail = f"\r\n--{self.boundary}--\r\n".encode()
        self._source = source
        self._size = size
        self._stage = 0
        self._offset = 0

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    def __len__(self) -> int:
        return len(self._head) + self._size + len(self._tail)

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
        if token:
            self._session.headers["Authorization"] = f"Bearer {token}"
        if api_key:
            self._session.headers["X-AIO-API-Key"] = api_key
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
                    self._data(endpoint, response)
                finally:
                    response.close()
                raise AioOperationError(
                    f"AIO Sandbox {endpoint} answered with JSON instead of file content",
                    endpoint=endpoint,
                    status=response.status_code,
                )
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
        policy = Retrying(
            stop=stop_after_attempt(self._retry_attempts),
            wait=wait_exponential(multiplier=0.2, max=2.0),
            retry=retry_if_exception(_is_retryable),
            reraise=True,
            before_sleep=lambda state: logger.info(
                "retrying an idempotent AIO Sandbox call after: %s",
                state.outcome.exception() if state.outcome else "?",
            ),
        )
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
            raise AioTransportError(
                f"AIO Sandbox {endpoint} timed out (connect {timeout[0]:g}s, read {timeout[1]:g}s)",
                endpoint=endpoint,
            ) from exc
        except requests.RequestException as exc:
            raise AioTransportError(
                f"Cannot reach the AIO Sandbox service at {self.base_url} ({endpoint}): "
                f"{type(exc).__name__}; check base_url and that the service is running",
                endpoint=endpoint,
            ) from exc
        logger.debug(
            "AIO %s %s -> %d in %.3fs",
            method,
            endpoint,
            response.status_code,
            time.monotonic() - started,
        )
        return response

    def _data(self, endpoint: str, response: requests.Response) -> Any:
        if response.status_code >= 300:
            raise self._http_error(endpoint, response)
        try:
            body = response.json()
        except ValueError as exc:
            raise AioServerError(
                f"AIO Sandbox {endpoint} returned a body that is not JSON "
                f"(HTTP {response.status_code})",
                endpoint=endpoint,
                status=response.status_code,
            ) from exc
        if not isinstance(body, Mapping):
            return body
        if body.get("success", True) is False:
            message = _server_message(body) or "no message"
            raise AioOperationError(
                f"AIO Sandbox {endpoint} failed: {message}",
                endpoint=endpoint,
                status=response.status_code,
                error_type=_error_type(body),
            )
        return body.get("data") if "data" in body or "success" in body else body

    def _http_error(self, endpoint: str, response: requests.Response) -> AioSandboxError:
        status = response.status_code
        body: Any = None
        try:
            body = response.json()
        except ValueError:
            body = None
        message = _server_message(body)
        suffix = f": {message}" if message else ""
        if status in (401, 403):
            what = "rejected the credentials" if self._has_credentials else "requires credentials"
            return AioAuthenticationError(
                f"AIO Sandbox {what} (HTTP {status} on {endpoint}); set the `token` option "
                "(SKILLRUNTIME_AIO_TOKEN, sent as a Bearer JWT) or the `api_key` option "
                "(SKILLRUNTIME_AIO_API_KEY, sent as X-AIO-API-Key) to a value the service accepts",
                endpoint=endpoint,
                status=status,
            )
        if status == 404:
            return AioNotFoundError(
                f"AIO Sandbox {endpoint} not found (HTTP 404){suffix}",
                endpoint=endpoint,
                status=status,
                error_type=_error_type(body),
            )
        if status >= 500:
            return AioServerError(
                f"AIO Sandbox {endpoint} failed with HTTP {status}{suffix}",
                endpoint=endpoint,
                status=status,
                error_type=_error_type(body),
            )
        return AioRequestError(
            f"AIO Sandbox refused {endpoint} with HTTP {status}{suffix}",
            endpoint=endpoint,
            status=status,
            error_type=_error_type(body),
        )
