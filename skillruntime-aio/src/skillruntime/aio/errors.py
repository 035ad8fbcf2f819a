"""Errors of the AIO Sandbox backend, all under :class:`~skillruntime.core.SkillRuntimeError`.

The client maps every way the service can fail — HTTP status, the ``{success, message, data}``
envelope with ``success: false``, transport failures — to one of these. Messages name the
endpoint and say what to do; they never contain tokens, API keys, environment values or bodies.
The tree::

    SkillRuntimeError
    └── AioSandboxError
        ├── AioAuthenticationError
        ├── AioNotFoundError
        ├── AioRequestError
        ├── AioServerError
        ├── AioOperationError
        └── AioTransportError
            └── AioProtocolError
"""

from __future__ import annotations

from skillruntime.core.errors import SkillRuntimeError

__all__ = [
    "AioAuthenticationError",
    "AioNotFoundError",
    "AioOperationError",
    "AioProtocolError",
    "AioRequestError",
    "AioSandboxError",
    "AioServerError",
    "AioTransportError",
]


class AioSandboxError(SkillRuntimeError):
    """A call to the AIO Sandbox service failed.

    ``endpoint`` is the API path (``/v1/bash/exec``), ``status`` the HTTP status (``None`` when
    no response arrived) and ``error_type`` the service's ``data.error_type`` when it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        endpoint: str = "",
        status: int | None = None,
        error_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.status = status
        self.error_type = error_type


class AioAuthenticationError(AioSandboxError):
    """HTTP 401/403: the token or API key is missing or wrong."""


class AioNotFoundError(AioSandboxError):
    """HTTP 404: the endpoint (an older image) or the addressed resource does not exist."""


class AioRequestError(AioSandboxError):
    """HTTP 4xx other than 401/403/404 (422 is a request the service's validation refused)."""


class AioServerError(AioSandboxError):
    """HTTP 5xx from the service or a gateway in front of it."""


class AioOperationError(AioSandboxError):
    """HTTP 200 with ``success: false``: the service handled the call and reports a failure."""


class AioTransportError(AioSandboxError):
    """No usable response: the service cannot be reached (connection refused, no route), a
    connect/read timeout, or (:class:`AioProtocolError`) an answer broken off or garbled."""


class AioProtocolError(AioTransportError):
    """A protocol error: the service accepted the connection, then dropped it mid-answer (closed
    or reset before the answer was whole) or sent an answer that is not parseable HTTP."""
