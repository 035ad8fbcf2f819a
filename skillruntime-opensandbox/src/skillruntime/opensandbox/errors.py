"""Mapping of OpenSandbox SDK exceptions onto the skillruntime error hierarchy.

Every error raised by this distribution derives from
:class:`~skillruntime.core.errors.SkillRuntimeError` and carries what the SDK knew: the error
``code`` reported by the server (``FILE_NOT_FOUND``, ``DOCKER::SANDBOX_NOT_FOUND``…), the HTTP
``status_code`` and the server's ``request_id``. File errors are also typed by kind (not found,
is a directory, not a directory, permission denied; the core's ``kind``).
Messages never contain API keys, environment values or file bodies. The classes, under the core's
(:mod:`skillruntime.core.errors`), each with its further bases in parentheses::

    SkillRuntimeError
    └── OpenSandboxError (SdkErrorDetails)
        └── SandboxUnavailableError
    ExecutionTransportError
    └── OpenSandboxExecutionError (SdkErrorDetails)
        ├── SandboxReplacedError
        ├── CommandNotStartedError
        └── CommandOutcomeUnknownError
    RuntimeFileError
    └── OpenSandboxFileError (SdkErrorDetails)
        ├── OpenSandboxFileNotFoundError (RuntimeFileNotFoundError)
        ├── OpenSandboxIsADirectoryError (RuntimeIsADirectoryError)
        ├── OpenSandboxNotADirectoryError (NotADirectoryFileError)
        └── OpenSandboxPermissionError (RuntimePermissionError)
    SkillPrepareError
    └── SandboxReplacedWhilePreparingError
"""

from __future__ import annotations

import httpx

from opensandbox.exceptions import (
    SandboxApiException,
    SandboxConnectionException,
    SandboxException,
    SandboxRateLimitException,
    SandboxTimeoutException,
)
from skillruntime.core.errors import (
    ExecutionTransportError,
    NotADirectoryFileError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    RuntimeIsADirectoryError,
    RuntimePermissionError,
    SkillPrepareError,
    SkillRuntimeError,
    printable,
)

__all__ = [
    "TRANSIENT_STATUS_CODES",
    "CommandNotStartedError",
    "CommandOutcomeUnknownError",
    "OpenSandboxError",
    "OpenSandboxExecutionError",
    "OpenSandboxFileError",
    "OpenSandboxFileNotFoundError",
    "OpenSandboxIsADirectoryError",
    "OpenSandboxNotADirectoryError",
    "OpenSandboxPermissionError",
    "SandboxReplacedError",
    "SandboxReplacedWhilePreparingError",
    "SandboxUnavailableError",
    "SdkErrorDetails",
    "describe",
    "execution_error",
    "file_error",
    "is_not_found",
    "is_transient",
    "sandbox_error",
]

TRANSIENT_STATUS_CODES = frozenset({429, 502, 503})
"""HTTP statuses after which an idempotent call is retried."""


class SdkErrorDetails:
    """``code``, ``status_code`` and ``request_id`` of the SDK error behind an exception.

    ``code`` is the server's error code (``FILE_NOT_FOUND``, ``RUNTIME_ERROR``…); a file error's
    framework-neutral kind is the core's class-level ``kind`` (``permission_denied``…).
    """

    code: str | None
    status_code: int | None
    request_id: str | None

    def _set_details(
        self, code: str | None, status_code: int | None, request_id: str | None
    ) -> None:
        self.code = code
        self.status_code = status_code
        self.request_id = request_id


class OpenSandboxError(SkillRuntimeError, SdkErrorDetails):
    """A lifecycle call to the OpenSandbox server failed (create, connect, renew, kill…)."""

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status_code: int | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self._set_details(code, status_code, request_id)


class SandboxUnavailableError(OpenSandboxError):
    """The conversation's stored sandbox exists but cannot be reached; the record is untouched."""


class OpenSandboxExecutionError(ExecutionTransportError, SdkErrorDetails):
    """A command could not be started or its result could not be obtained."""

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status_code: int | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self._set_details(code, status_code, request_id)


class SandboxReplacedError(OpenSandboxExecutionError):
    """The sandbox vanished while a command ran in it; the command died with it and was not
    retried. ``sandbox_id`` names the vanished sandbox; the next call uses its replacement."""

    def __init__(self, message: str, *, sandbox_id: str) -> None:
        super().__init__(message)
        self.sandbox_id = sandbox_id


class CommandNotStartedError(OpenSandboxExecutionError):
    """The request failed before execd acknowledged the command (no ``init`` event)."""


class CommandOutcomeUnknownError(OpenSandboxExecutionError):
    """The command's wrapper was killed before it reported the command's result (execd's event
    said the wrapper died by a signal): the command may still be running, at most until its
    watchdog kills it at ``ends_by`` (a ``time.monotonic()`` value). The runtimes raise it only
    once that time has passed, so a lease held around the command outlives the command."""

    def __init__(self, message: str, *, ends_by: float) -> None:
        super().__init__(message)
        self.ends_by = ends_by


class OpenSandboxFileError(RuntimeFileError, SdkErrorDetails):
    """A file operation in the sandbox failed; the subclasses below name the kind."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        code: str | None = None,
        status_code: int | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, path=path)
        self._set_details(code, status_code, request_id)


class OpenSandboxFileNotFoundError(OpenSandboxFileError, RuntimeFileNotFoundError):
    """The sandbox path does not exist (HTTP 404 / ``FILE_NOT_FOUND``)."""


class OpenSandboxIsADirectoryError(OpenSandboxFileError, RuntimeIsADirectoryError):
    """The operation needs a file but the sandbox path is a directory."""


class OpenSandboxNotADirectoryError(OpenSandboxFileError, NotADirectoryFileError):
    """A component of the sandbox path that must be a directory is a file."""


class OpenSandboxPermissionError(OpenSandboxFileError, RuntimePermissionError):
    """execd may not write the path (permission denied, not permitted, read-only file system)."""


def _status(exc: BaseException) -> int | None:
    if isinstance(exc, SandboxApiException):
        return exc.status_code
    return None


def _code(exc: BaseException) -> str | None:
    if isinstance(exc, SandboxException) and exc.error is not None:
        code = exc.error.code
        return str(code) if code else None
    return None


def describe(exc: BaseException) -> tuple[str | None, int | None, str | None, str]:
    """``(code, status, request_id, text)`` of an SDK exception; ``text`` is one short line."""
    request_id = exc.request_id if isinstance(exc, SandboxException) else None
    code = _code(exc)
    status = _status(exc)
    parts = [type(exc).__name__]
    if status is not None:
        parts.append(f"HTTP {status}")
    if code:
        parts.append(printable(code))
    if request_id:
        parts.append(f"request id {printable(request_id)}")
    detail = printable(str(exc).splitlines()[0][:300]) if str(exc) else ""
    text = ", ".join(parts) + (f": {detail}" if detail else "")
    return code, status, request_id, text


def is_not_found(exc: BaseException) -> bool:
    """True for a 404 or a ``*NOT_FOUND`` error code."""
    code = _code(exc) or ""
    return _status(exc) == 404 or code.endswith("NOT_FOUND")


def is_transient(exc: BaseException) -> bool:
    """True for failures worth retrying on an idempotent call: connection errors (also the raw
    transport errors some SDK calls let through), timeouts of a single request, 429, 502 and
    503."""
    # A sandbox that never became ready (SandboxReadyTimeoutException) is not transient.
    if isinstance(
        exc,
        SandboxRateLimitException
        | SandboxConnectionException
        | SandboxTimeoutException
        | httpx.TransportError,
    ):
        return True
    return _status(exc) in TRANSIENT_STATUS_CODES


def sandbox_error(what: str, exc: BaseException) -> OpenSandboxError:
    """A lifecycle error for ``what`` (a phrase such as ``"creating a sandbox"``)."""
    code, status, request_id, text = describe(exc)
    return OpenSandboxError(
        f"OpenSandbox failed while {what} ({text})",
        code=code,
        status_code=status,
        request_id=request_id,
    )


def execution_error(what: str, exc: BaseException) -> OpenSandboxExecutionError:
    """An execution transport error for ``what``."""
    code, status, request_id, text = describe(exc)
    return OpenSandboxExecutionError(
        f"OpenSandbox failed while {what} ({text}); the command was not retried",
        code=code,
        status_code=status,
        request_id=request_id,
    )


_REASON_CLASSES: tuple[tuple[tuple[str, ...], type[OpenSandboxFileError]], ...] = (
    (
        ("permission denied", "operation not permitted", "read-only file system"),
        OpenSandboxPermissionError,
    ),
    (("is a directory",), OpenSandboxIsADirectoryError),
    (("not a directory",), OpenSandboxNotADirectoryError),
)
"""execd reports a failed system call as 500 ``RUNTIME_ERROR`` with Go's error text (``open
/x: permission denied``); the errno's text is all that names the kind."""


def _file_error_class(exc: BaseException) -> type[OpenSandboxFileError]:
    if is_not_found(exc):
        return OpenSandboxFileNotFoundError
    if isinstance(exc, SandboxApiException) and exc.status_code is not None:
        text = " ".join(
            part for part in (str(exc), exc.error.message if exc.error else None) if part
        ).lower()
        for reasons, cls in _REASON_CLASSES:
            if any(reason in text for reason in reasons):
                return cls
    return OpenSandboxFileError


def file_error(what: str, path: str, exc: BaseException) -> RuntimeFileError:
    """A typed file error for ``what`` on ``path``: not found for a 404, permission denied, is a
    directory or not a directory from execd's error text, else :class:`OpenSandboxFileError`."""
    code, status, request_id, text = describe(exc)
    cls = _file_error_class(exc)
    message = (
        f"Path does not exist in the sandbox: {printable(path)}"
        if cls is OpenSandboxFileNotFoundError
        else f"OpenSandbox failed while {what} {printable(path)} ({text})"
    )
    return cls(message, path=path, code=code, status_code=status, request_id=request_id)


class SandboxReplacedWhilePreparingError(SkillPrepareError):
    """The sandbox a skill was being prepared in vanished (or stopped being the conversation's);
    the preparation starts again from the beginning on the replacement."""

    def __init__(self, sandbox_id: str) -> None:
        super().__init__(f"sandbox {sandbox_id} was replaced while a skill was being prepared")
        self.sandbox_id = sandbox_id
