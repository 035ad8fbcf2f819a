"""The wire rules of the AIO Sandbox API, free of I/O: shared by the sync and the async client.

Both clients send the same requests and read the answers with these functions: the
``{success, message, data}`` envelope, the error classes by HTTP status, the messages (never
request values), the retry rule of idempotent calls and the framing of a streamed multipart
upload. A response is anything with ``status_code`` and ``json()`` (sync and async ``httpx``
responses both are); a streamed one must be read before it is given to :func:`http_error`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
from tenacity import RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential

from .errors import (
    AioAuthenticationError,
    AioNotFoundError,
    AioOperationError,
    AioProtocolError,
    AioRequestError,
    AioSandboxError,
    AioServerError,
    AioTransportError,
)

__all__ = [
    "RETRYABLE_STATUSES",
    "MultipartFrame",
    "WireResponse",
    "auth_headers",
    "envelope_data",
    "http_error",
    "is_retryable",
    "json_instead_of_content",
    "retry_settings",
    "transport_error",
]

logger = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({502, 503, 504})
"""HTTP statuses after which an idempotent call is retried."""

_MESSAGE_LIMIT = 300

# What httpx raises for an answer broken off after the connection was accepted (closed or reset
# while the request was sent or the answer read) or not parseable (framing, content encoding).
_BROKEN_ANSWER = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.DecodingError)


class WireResponse(Protocol):
    """What the rules read of an HTTP response."""

    @property
    def status_code(self) -> int: ...

    def json(self) -> Any: ...


def is_retryable(error: BaseException) -> bool:
    """True for the transient failures an idempotent call is retried after: no usable
    response (no connection, a timeout, a protocol error), or HTTP 502/503/504."""
    if isinstance(error, AioTransportError):
        return True
    return isinstance(error, AioServerError) and error.status in RETRYABLE_STATUSES


def _log_retry(state: RetryCallState) -> None:
    logger.info(
        "retrying an idempotent AIO Sandbox call after: %s",
        state.outcome.exception() if state.outcome else "?",
    )


def retry_settings(attempts: int) -> dict[str, Any]:
    """Keyword arguments of tenacity's ``Retrying``/``AsyncRetrying`` for idempotent calls:
    ``attempts`` tries with exponential back-off, on :func:`is_retryable` failures only."""
    return {
        "stop": stop_after_attempt(attempts),
        "wait": wait_exponential(multiplier=0.2, max=2.0),
        "retry": retry_if_exception(is_retryable),
        "reraise": True,
        "before_sleep": _log_retry,
    }


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


def transport_error(
    endpoint: str, base_url: str, error: Exception, *, timeout: tuple[float, float] | None
) -> AioTransportError:
    """The error of a call that got no usable answer; ``timeout`` (connect, read) when it timed
    out. A connection the service accepted and then dropped mid-answer (closed or reset), or an
    answer that cannot be parsed, is an :class:`AioProtocolError`; only a connection that could
    not be made says the service cannot be reached."""
    if timeout is not None:
        return AioTransportError(
            f"AIO Sandbox {endpoint} timed out (connect {timeout[0]:g}s, read {timeout[1]:g}s)",
            endpoint=endpoint,
        )
    kind = type(error).__name__
    if isinstance(error, httpx.LocalProtocolError):
        return AioProtocolError(
            f"AIO Sandbox {endpoint}: protocol error: the request could not be sent as valid "
            f"HTTP ({kind})",
            endpoint=endpoint,
        )
    if isinstance(error, _BROKEN_ANSWER):
        return AioProtocolError(
            f"AIO Sandbox {endpoint}: protocol error: the service at {base_url} accepted the "
            f"connection, then dropped it mid-answer or sent an answer that cannot be parsed "
            f"({kind}); the service or a proxy in front of it failed while answering",
            endpoint=endpoint,
        )
    return AioTransportError(
        f"Cannot reach the AIO Sandbox service at {base_url} ({endpoint}): "
        f"{kind}; check base_url and that the service is running",
        endpoint=endpoint,
    )


def envelope_data(endpoint: str, response: WireResponse, *, has_credentials: bool) -> Any:
    """The ``data`` of a JSON answer; raises the :class:`AioSandboxError` subclass of a non-2xx
    status, a body that is not JSON or a ``success: false`` envelope."""
    if response.status_code >= 300:
        raise http_error(endpoint, response, has_credentials=has_credentials)
    try:
        body = response.json()
    except ValueError as exc:
        raise AioServerError(
            f"AIO Sandbox {endpoint}: protocol error: the answer's body is not JSON "
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


def json_instead_of_content(endpoint: str, response: WireResponse) -> AioOperationError:
    """The error of a download answered with a JSON envelope (never file content); the
    envelope's own failure is raised first when it reports one."""
    envelope_data(endpoint, response, has_credentials=False)
    return AioOperationError(
        f"AIO Sandbox {endpoint} answered with JSON instead of file content",
        endpoint=endpoint,
        status=response.status_code,
    )


def http_error(endpoint: str, response: WireResponse, *, has_credentials: bool) -> AioSandboxError:
    """The :class:`AioSandboxError` subclass of a non-2xx answer (401/403, 404, 5xx, other)."""
    status = response.status_code
    body: Any = None
    try:
        body = response.json()
    except ValueError:
        body = None
    message = _server_message(body)
    suffix = f": {message}" if message else ""
    if status in (401, 403):
        what = "rejected the credentials" if has_credentials else "requires credentials"
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


def auth_headers(token: str | None, api_key: str | None) -> dict[str, str]:
    """The credential headers: ``Authorization: Bearer`` for ``token``, ``X-AIO-API-Key``."""
    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if api_key:
        headers["X-AIO-API-Key"] = api_key
    return headers


@dataclass(frozen=True)
class MultipartFrame:
    """The bytes around a file in a ``multipart/form-data`` upload: ``head`` (the form fields
    and the file part's header), then the file's bytes, then ``tail``."""

    boundary: str
    head: bytes
    tail: bytes

    @classmethod
    def build(cls, fields: Mapping[str, str], name: str) -> MultipartFrame:
        """A frame with a fresh boundary for ``fields`` and a file part named ``name``."""
        boundary = f"skillruntime-{uuid.uuid4().hex}"
        parts = [
            f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n'
            f"{value}\r\n".encode()
            for key, value in fields.items()
        ]
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{name}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
        )
        return cls(boundary, b"".join(parts), f"\r\n--{boundary}--\r\n".encode())

    @property
    def content_type(self) -> str:
        """The ``Content-Type`` header of the upload."""
        return f"multipart/form-data; boundary={self.boundary}"

    def length(self, size: int) -> int:
        """The body's length around a file of ``size`` bytes."""
        return len(self.head) + size + len(self.tail)
