"""``VikingSessionClient``: the OpenViking 0.5.2 session calls, bounded in time and memory.

The calls (``docs/viking.md`` "Sessions"; the server's OpenAPI document, ``/openapi.json``):

* ``GET /api/v1/sessions/{id}``: the session's details (``pending_tokens``, ``message_count``…);
* ``GET /api/v1/sessions/{id}/context``: its messages (``{id, role, parts, turn_id…}``): the
  live ones and those of archives whose memory extraction has not ended;
* ``POST /api/v1/sessions/{id}/messages/batch`` ``{"messages": [...]}``: adds messages in one
  request (the session is created on first add);
* ``POST /api/v1/sessions/{id}/commit`` ``{}``: archives the messages (before it answers) and
  starts the memory extraction (``task_id``);
* ``DELETE /api/v1/sessions/{id}``.

Same conventions as :class:`~skillruntime.viking.client.VikingClient`: ``requests`` sessions
with the identity headers, ``(connect, read)`` timeouts cut to the operation's deadline
(``operation_timeout``), JSON answers refused over ``max_json_bytes``, server text redacted.
Reads retry a ``503``, a busy ``409`` and a ``500 INTERNAL`` within the deadline (tenacity);
writes retry only answers that prove nothing was done (``503``, busy ``409``, a connection
that could not be opened). Any other failure of a write is raised with ``uncertain=True``: the
server may have acted, so the caller decides (the session sink checks whether its turn is
stored before writing again).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import requests
from tenacity import RetryCallState, Retrying, retry_if_exception, wait_exponential
from urllib3.exceptions import NewConnectionError

from .client import _bounded_body, _Clock, _DeadlineError, _envelope_error, request_headers
from .errors import VikingSessionError
from .options import VikingStoreOptions
from .redaction import Redactor

__all__ = [
    "SESSION_ACCESS_DENIED",
    "SESSION_NOT_FOUND",
    "SESSION_REFUSED",
    "SESSION_UNAVAILABLE",
    "VikingSessionClient",
    "VikingSessionError",
]

logger = logging.getLogger(__name__)

SESSION_UNAVAILABLE = "SESSION_UNAVAILABLE"
"""The server could not be reached, failed (5xx), stayed busy or did not answer in time."""
SESSION_ACCESS_DENIED = "SESSION_ACCESS_DENIED"
"""The server refused the credentials (401/403)."""
SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
"""No such session for this identity (404)."""
SESSION_REFUSED = "SESSION_REFUSED"
"""The server refused the request (another 4xx, e.g. ``400 INVALID_URI`` for a ``skill_uri``)."""

_CONTEXT_TOKEN_BUDGET = 100_000_000


class _RetryError(Exception):
    """A failure worth another try within the deadline."""

    def __init__(self, error: VikingSessionError) -> None:
        super().__init__(str(error))
        self.error = error


def _not_sent(error: requests.RequestException) -> bool:
    """Whether the request surely never reached the server (the connection did not open)."""
    if isinstance(error, requests.ConnectTimeout):
        return True
    reason = getattr(error.args[0], "reason", None) if error.args else None
    return isinstance(reason, NewConnectionError)


class VikingSessionClient:
    """A thread-safe client for the session endpoints (see the module docstring)."""

    def __init__(self, options: VikingStoreOptions) -> None:
        self._options = options
        self._headers, key = request_headers(options)
        self._redact = Redactor([key])

    @property
    def base_url(self) -> str:
        """The server URL (no credentials are ever part of it)."""
        return self._options.server_url

    # -- calls -----------------------------------------------------------------------------
    def get_session(self, session_id: str) -> dict[str, Any]:
        """``GET /api/v1/sessions/{id}``: the session's details."""
        result = self._call("GET", self._path(session_id), None, "reading session", read=True)
        return result if isinstance(result, dict) else {}

    def messages(self, session_id: str, *, seconds: float | None = None) -> list[dict[str, Any]]:
        """The messages of the session's context: the live ones and those of archives whose
        memory extraction has not ended; ``[]`` for a missing session."""
        path = f"{self._path(session_id)}/context"
        try:
            result = self._call(
                "GET",
                path,
                None,
                "reading session messages",
                read=True,
                params={"token_budget": str(_CONTEXT_TOKEN_BUDGET)},
                seconds=seconds,
            )
        except VikingSessionError as error:
            if error.code == SESSION_NOT_FOUND:
                return []
            raise
        found = result.get("messages") if isinstance(result, dict) else None
        return [item for item in found if isinstance(item, dict)] if isinstance(found, list) else []

    def add_messages(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        seconds: float | None = None,
    ) -> dict[str, Any]:
        """``POST /api/v1/sessions/{id}/messages/batch``; the result (``added``,
        ``pending_tokens``…)."""
        payload = {"messages": [dict(message) for message in messages]}
        path = f"{self._path(session_id)}/messages/batch"
        result = self._call(
            "POST", path, payload, "writing session messages", read=False, seconds=seconds
        )
        return result if isinstance(result, dict) else {}

    def commit(self, session_id: str, *, seconds: float | None = None) -> dict[str, Any]:
        """``POST /api/v1/sessions/{id}/commit``: archive now, extract memories in the
        background; the result (``archived``, ``task_id``…)."""
        path = f"{self._path(session_id)}/commit"
        result = self._call("POST", path, {}, "committing session", read=False, seconds=seconds)
        return result if isinstance(result, dict) else {}

    def delete_session(self, session_id: str) -> None:
        """``DELETE /api/v1/sessions/{id}``."""
        self._call("DELETE", self._path(session_id), None, "deleting session", read=False)

    # -- transport -------------------------------------------------------------------------
    @staticmethod
    def _path(session_id: str) -> str:
        if not session_id or len(session_id) > 256:
            raise ValueError("a session id is 1 to 256 characters")
        return f"/api/v1/sessions/{quote(session_id, safe='')}"

    @contextmanager
    def _session(self) -> Iterator[requests.Session]:
        session = requests.Session()
        session.headers.update(self._headers)
        session.trust_env = False
        try:
            yield session
        finally:
            session.close()

    def _error(self, what: str, detail: str, *, code: str, uncertain: bool) -> VikingSessionError:
        return VikingSessionError(
            f"{what} failed: {self._redact(detail)}".rstrip(), code=code, uncertain=uncertain
        )

    def _answer(self, response: requests.Response, what: str, clock: _Clock, read: bool) -> Any:
        status = response.status_code
        if status >= 300:
            code, message, details = _envelope_error(response, clock=clock, redact=self._redact)
            detail = f"HTTP {status} {code} {message}"
            if status in (401, 403):
                raise self._error(what, detail, code=SESSION_ACCESS_DENIED, uncertain=False)
            if status == 404:
                raise self._error(what, detail, code=SESSION_NOT_FOUND, uncertain=False)
            busy = status == 409 and (
                details.get("conflict_type") == "path_busy" or details.get("retryable") is True
            )
            if busy or status == 503:
                raise _RetryError(
                    self._error(what, detail, code=SESSION_UNAVAILABLE, uncertain=False)
                )
            if 400 <= status < 500:
                raise self._error(what, detail, code=SESSION_REFUSED, uncertain=False)
            error = self._error(what, detail, code=SESSION_UNAVAILABLE, uncertain=True)
            if read and code == "INTERNAL":
                raise _RetryError(error)
            raise error
        try:
            raw = _bounded_body(response, self._options.max_json_bytes, clock)
        except _DeadlineError:
            raise self._late(what, clock) from None
        except (requests.RequestException, OSError) as error:
            raise self._error(
                what, f"broke off: {type(error).__name__}", code=SESSION_UNAVAILABLE, uncertain=True
            ) from None
        if raw is None:
            raise self._error(
                what,
                f"answered with more than {self._options.max_json_bytes} bytes",
                code=SESSION_UNAVAILABLE,
                uncertain=True,
            )
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict) or body.get("status") != "ok":
            # An error envelope is an error whatever the HTTP status says.
            envelope = body.get("error") if isinstance(body, dict) else None
            found = str(envelope.get("code") or "") if isinstance(envelope, dict) else ""
            if found == "NOT_FOUND":
                raise self._error(what, "NOT_FOUND", code=SESSION_NOT_FOUND, uncertain=False)
            raise self._error(
                what, "no 'ok' envelope", code=SESSION_UNAVAILABLE, uncertain=not read
            )
        return body.get("result")

    def _late(self, what: str, clock: _Clock) -> VikingSessionError:
        return self._error(
            what,
            f"no answer within {clock.seconds:g}s",
            code=SESSION_UNAVAILABLE,
            uncertain=True,
        )

    def _call(
        self,
        method: str,
        path: str,
        payload: Mapping[str, Any] | None,
        what: str,
        *,
        read: bool,
        params: Mapping[str, str] | None = None,
        seconds: float | None = None,
    ) -> Any:
        """One call within ``seconds`` (default ``operation_timeout``): the envelope's result."""
        options = self._options
        clock = _Clock(options.operation_timeout if seconds is None else max(seconds, 0.001))
        url = f"{self.base_url}{path}"

        def attempt() -> Any:
            if clock.remaining() <= 0:
                raise self._late(what, clock)
            left = max(clock.remaining(), 0.001)
            timeout = (min(options.connect_timeout, left), min(options.read_timeout, left))
            with self._session() as session:
                try:
                    response = session.request(
                        method,
                        url,
                        params=dict(params or {}),
                        json=None if payload is None else dict(payload),
                        timeout=timeout,
                        stream=True,
                    )
                except requests.RequestException as error:
                    if clock.remaining() <= 0:
                        raise self._late(what, clock) from None
                    failure = self._error(
                        what,
                        f"the OpenViking server at {self.base_url} did not answer "
                        f"({type(error).__name__})",
                        code=SESSION_UNAVAILABLE,
                        uncertain=not _not_sent(error),
                    )
                    if read or not failure.uncertain:
                        raise _RetryError(failure) from None
                    raise failure from None
                with response:
                    return self._answer(response, what, clock, read)

        busy_wait = wait_exponential(multiplier=options.busy_backoff_seconds, max=2.0)

        def stop(state: RetryCallState) -> bool:
            return state.attempt_number > options.busy_retries or clock.remaining() <= 0

        def wait(state: RetryCallState) -> float:
            return max(0.0, min(busy_wait(state), clock.remaining()))

        retrying = Retrying(
            stop=stop,
            wait=wait,
            retry=retry_if_exception(lambda error: isinstance(error, _RetryError)),
            reraise=True,
        )
        try:
            return retrying(attempt)
        except _RetryError as retry:
            logger.warning("%s: giving up after retries (%s)", what, retry.error.code)
            raise retry.error from None
