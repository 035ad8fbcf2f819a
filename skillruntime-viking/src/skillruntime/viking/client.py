"""``VikingClient``: the few OpenViking HTTP calls the store makes, bounded in time and memory.

Every request carries ``(connect_timeout, read_timeout)`` and every body is read in small pieces
as they arrive, so the client never trusts the server with its memory or its time:

* a JSON answer over ``max_json_bytes`` is refused while it streams (``SKILL_PACKAGE_TOO_LARGE``);
* every read or listing, retries included, and every file download ends within
  ``operation_timeout`` seconds (a silent server is also cut by ``read_timeout``);
* a download slower on average than ``min_download_bytes_per_second`` once
  ``download_rate_grace_seconds`` have passed is stopped (``SKILL_UNAVAILABLE``).

A ``409 CONFLICT`` whose details say ``path_busy``/``retryable`` (the integrity read's tree lock)
and a ``503`` are retried with exponential backoff, a bounded number of times. A refused or failed
connection is retried briefly (twice, 0.2 s apart) and then reported as an unreachable server. The
API key goes in ``X-API-Key`` and is never logged or put into an error; text the server sends
(error codes and messages) is passed through :class:`~skillruntime.viking.redaction.Redactor`
first, so a server echoing the key or a token does not leak it.
"""

from __future__ import annotations

import functools
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import requests
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    wait_exponential,
)
from urllib3 import BaseHTTPResponse
from urllib3.exceptions import HTTPError as TransportError

from .errors import (
    SKILL_ACCESS_DENIED,
    SKILL_INVALID,
    SKILL_NOT_FOUND,
    SKILL_PACKAGE_TOO_LARGE,
    SKILL_UNAVAILABLE,
    VikingStoreError,
)
from .options import VikingStoreOptions
from .redaction import Redactor

__all__ = ["VikingClient"]

logger = logging.getLogger(__name__)

_MAX_ERROR_BODY = 64 * 1024
_IDLE_SESSIONS = 16
_READ_BYTES = 64 * 1024
_UNREACHABLE_RETRIES = 2
_UNREACHABLE_WAIT_SECONDS = 0.2


class _RetryableError(Exception):
    """A transient answer (busy lock, 503) worth another try."""

    def __init__(self, error: VikingStoreError) -> None:
        super().__init__(str(error))
        self.error = error


class _UnreachableError(_RetryableError):
    """The connection was refused or failed: retried briefly, then reported as unreachable."""


class _Clock:
    """The deadline of one operation."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = time.monotonic()
        self.deadline = self.started + seconds

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started


class _DeadlineError(Exception):
    """The operation's deadline passed while a body was being read."""


def _pieces(response: requests.Response, size: int) -> Iterator[bytes]:
    """The body as it arrives: each piece is what one read of the connection returned (at most
    ``size``), so the caller regains control after every read however slowly the server sends."""
    raw = response.raw
    if isinstance(raw, BaseHTTPResponse):
        read = functools.partial(raw.read1, size, decode_content=True)
    else:  # a plain binary stream (a transport adapter's body)
        read = functools.partial(raw.read1, size)
    while piece := read():
        yield piece


def _bounded_body(response: requests.Response, limit: int, clock: _Clock | None) -> bytes | None:
    """The whole body, or ``None`` once it grows over ``limit`` bytes (never more is held).

    Raises :class:`_DeadlineError` when ``clock`` runs out; transport errors propagate.
    """
    body = bytearray()
    for piece in _pieces(response, _READ_BYTES):
        body += piece
        if len(body) > limit:
            return None
        if clock is not None and clock.remaining() <= 0:
            raise _DeadlineError
    return bytes(body)


def _envelope_error(
    response: requests.Response,
    *,
    clock: _Clock | None = None,
    redact: Callable[[str], str] = str,
) -> tuple[str, str, dict[str, Any]]:
    """``(code, message, details)`` of an OpenViking error envelope (best effort), read within
    :data:`_MAX_ERROR_BODY` bytes and ``clock``; ``redact`` runs before anything is cut."""
    try:
        raw = _bounded_body(response, _MAX_ERROR_BODY, clock)
    except (_DeadlineError, requests.RequestException, TransportError, OSError):
        raw = None
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        details = error.get("details")
        return (
            redact(str(error.get("code") or ""))[:100],
            redact(str(error.get("message") or ""))[:500],
            details if isinstance(details, dict) else {},
        )
    return "", "", {}


def request_headers(options: VikingStoreOptions) -> tuple[dict[str, str], str | None]:
    """The headers of every request to the server (the API key, the account, user and agent
    identity) and the API key itself, to be redacted from messages."""
    headers = {"Accept": "application/json", "User-Agent": "skillruntime-viking"}
    key = options.api_key.get_secret_value() if options.api_key is not None else None
    if key is not None:
        headers["X-API-Key"] = key
    if options.account:
        headers["X-OpenViking-Account"] = options.account
    if options.user:
        headers["X-OpenViking-User"] = options.user
    if options.agent:
        headers["X-OpenViking-Actor-Peer"] = options.agent
    return headers, key


class VikingClient:
    """A thread-safe OpenViking client for skill reads and downloads: each request borrows a
    ``requests.Session`` from a small pool, all sharing the same headers and timeouts."""

    def __init__(self, options: VikingStoreOptions) -> None:
        self._options = options
        self._idle: queue.LifoQueue[requests.Session] = queue.LifoQueue(maxsize=_IDLE_SESSIONS)
        self._lock = threading.Lock()
        self._closed = False
        self._headers, key = request_headers(options)
        self._redact = Redactor([key])

    @property
    def base_url(self) -> str:
        """The server URL (no credentials are ever part of it)."""
        return self._options.server_url

    @contextmanager
    def _session(self) -> Iterator[requests.Session]:
        """A session for one request (or one streamed download); at most a few idle sessions
        (with their kept-alive connections) are kept for reuse."""
        try:
            session = self._idle.get_nowait()
        except queue.Empty:
            session = requests.Session()
            session.headers.update(self._headers)
            session.trust_env = False
        try:
            yield session
        finally:
            with self._lock:
                keep = not self._closed
            if keep:
                try:
                    self._idle.put_nowait(session)
                except queue.Full:
                    session.close()
            else:
                session.close()

    def close(self) -> None:
        """Close the idle sessions; sessions in use close when their request ends."""
        with self._lock:
            self._closed = True
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                break

    # -- bounded reading -------------------------------------------------------------------
    def _timeout(self, clock: _Clock) -> tuple[float, float]:
        """Connect and per-read timeouts, never beyond the operation's deadline."""
        left = max(clock.remaining(), 0.001)
        return (min(self._options.connect_timeout, left), min(self._options.read_timeout, left))

    def _late(self, clock: _Clock, what: str, uri: str) -> VikingStoreError:
        return VikingStoreError(
            f"{self._redact(what)} did not finish within {clock.seconds:g}s",
            code=SKILL_UNAVAILABLE,
            uri=uri,
        )

    def _read_body(
        self, response: requests.Response, limit: int, clock: _Clock, what: str, uri: str
    ) -> bytes | None:
        """:func:`_bounded_body` with failures as :class:`VikingStoreError`."""
        try:
            return _bounded_body(response, limit, clock)
        except _DeadlineError:
            raise self._late(clock, what, uri) from None
        except (requests.RequestException, TransportError, OSError) as error:
            raise self._transport_error(error, clock, what, uri) from None

    def _transport_error(
        self, error: BaseException, clock: _Clock, what: str, uri: str
    ) -> VikingStoreError:
        if clock.remaining() <= 0:
            return self._late(clock, what, uri)
        return VikingStoreError(
            f"{self._redact(what)} broke off: {type(error).__name__}",
            code=SKILL_UNAVAILABLE,
            uri=uri,
        )

    def _raise_for(
        self,
        response: requests.Response,
        what: str,
        uri: str,
        clock: _Clock,
        *,
        read: bool = False,
    ) -> None:
        """Translate a non-2xx answer into a :class:`VikingStoreError` (retryable ones wrapped).

        ``read``: the request is a JSON read (a skill read, a listing, a search), so a 500
        ``INTERNAL`` is retried too. The server answers that for any exception it did not
        expect, some of them transient: a search whose index changes between two of its pages
        (skills added meanwhile) fails with "pagination did not advance", and the same search
        a moment later succeeds."""
        code, message, details = _envelope_error(response, clock=clock, redact=self._redact)
        status = response.status_code
        text = f"{self._redact(what)} failed: HTTP {status} {code} {message}".rstrip()
        if status == 404:
            raise VikingStoreError(text, code=SKILL_NOT_FOUND, uri=uri)
        if status in (401, 403):
            raise VikingStoreError(text, code=SKILL_ACCESS_DENIED, uri=uri)
        if status == 429:
            raise VikingStoreError(text, code=SKILL_PACKAGE_TOO_LARGE, uri=uri)
        if status == 409 and (
            details.get("conflict_type") == "path_busy" or details.get("retryable") is True
        ):
            raise _RetryableError(VikingStoreError(text, code=SKILL_UNAVAILABLE, uri=uri))
        if status == 503 or (read and status == 500 and code == "INTERNAL"):
            raise _RetryableError(VikingStoreError(text, code=SKILL_UNAVAILABLE, uri=uri))
        if 400 <= status < 500:
            raise VikingStoreError(text, code=SKILL_INVALID, uri=uri)
        raise VikingStoreError(text, code=SKILL_UNAVAILABLE, uri=uri)

    def _unreachable(self, error: BaseException, what: str, uri: str) -> _UnreachableError:
        return _UnreachableError(
            VikingStoreError(
                f"{self._redact(what)} failed: the OpenViking server at {self.base_url} is "
                f"unreachable ({type(error).__name__}); check that it runs and server_url",
                code=SKILL_UNAVAILABLE,
                uri=uri,
            )
        )

    def _retrying(self, clock: _Clock) -> Retrying:
        options = self._options
        busy_wait = wait_exponential(multiplier=options.busy_backoff_seconds, max=2.0)

        def stop(state: RetryCallState) -> bool:
            error = state.outcome.exception() if state.outcome is not None else None
            if isinstance(error, _UnreachableError):
                return state.attempt_number > _UNREACHABLE_RETRIES
            return state.attempt_number > options.busy_retries or clock.remaining() <= 0

        def wait(state: RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome is not None else None
            pause = (
                _UNREACHABLE_WAIT_SECONDS
                if isinstance(error, _UnreachableError)
                else busy_wait(state)
            )
            return max(0.0, min(pause, clock.remaining()))

        return Retrying(
            stop=stop,
            wait=wait,
            retry=retry_if_exception(lambda error: isinstance(error, _RetryableError)),
            reraise=True,
        )

    def _get_json(
        self,
        path: str,
        params: Mapping[str, str],
        what: str,
        uri: str,
        *,
        payload: Mapping[str, Any] | None = None,
        seconds: float | None = None,
    ) -> Any:
        """``GET`` (or ``POST`` of the JSON ``payload``) returning the envelope's ``result``,
        within ``seconds`` (default: the operation timeout)."""
        url = f"{self.base_url}{path}"
        clock = _Clock(self._options.operation_timeout if seconds is None else seconds)

        def attempt() -> Any:
            if clock.remaining() <= 0:
                raise self._late(clock, what, uri)
            with self._session() as session:
                try:
                    if payload is None:
                        response = session.get(
                            url, params=dict(params), timeout=self._timeout(clock), stream=True
                        )
                    else:
                        response = session.post(
                            url,
                            params=dict(params),
                            json=dict(payload),
                            timeout=self._timeout(clock),
                            stream=True,
                        )
                except requests.ConnectionError as error:
                    if clock.remaining() <= 0:
                        raise self._late(clock, what, uri) from None
                    raise self._unreachable(error, what, uri) from None
                except requests.RequestException as error:
                    raise self._transport_error(error, clock, what, uri) from None
                with response:
                    if response.status_code >= 300:
                        self._raise_for(response, what, uri, clock, read=True)
                    raw = self._read_body(response, self._options.max_json_bytes, clock, what, uri)
            if raw is None:
                raise VikingStoreError(
                    f"{self._redact(what)} answered with more than "
                    f"{self._options.max_json_bytes} bytes of JSON",
                    code=SKILL_PACKAGE_TOO_LARGE,
                    uri=uri,
                )
            try:
                body = json.loads(raw)
            except ValueError:
                raise VikingStoreError(
                    f"{self._redact(what)} returned no JSON", code=SKILL_UNAVAILABLE, uri=uri
                ) from None
            if not isinstance(body, dict) or body.get("status") != "ok":
                raise VikingStoreError(
                    f"{self._redact(what)} returned no 'ok' envelope",
                    code=SKILL_UNAVAILABLE,
                    uri=uri,
                )
            return body.get("result")

        try:
            return self._retrying(clock)(attempt)
        except _UnreachableError as unreachable:
            logger.warning(
                "%s: the OpenViking server is unreachable after %d tries",
                self._redact(what),
                _UNREACHABLE_RETRIES + 1,
            )
            raise unreachable.error from None
        except _RetryableError as busy:
            logger.warning("%s: server still busy, giving up", self._redact(what))
            raise busy.error from None

    def get_skill(self, name: str, *, target_uri: str | None, uri: str) -> dict[str, Any]:
        """``GET /api/v1/skills/<name>`` with content, files and integrity; the ``result``."""
        params = {
            "include_content": "true",
            "include_files": "true",
            "include_integrity": "true",
            "include_source": "false",
        }
        if target_uri is not None:
            params["target_uri"] = target_uri
        result = self._get_json(f"/api/v1/skills/{name}", params, "reading the skill", uri)
        if not isinstance(result, dict):
            raise VikingStoreError("the skill read returned no object", code=SKILL_INVALID, uri=uri)
        return result

    def list_skills(self, *, target_uri: str | None, node_limit: int = 1000) -> dict[str, Any]:
        """``GET /api/v1/skills``: ``{root_uris, skills, total}``."""
        params = {"node_limit": str(node_limit)}
        if target_uri is not None:
            params["target_uri"] = target_uri
        scope = target_uri or "viking://"
        result = self._get_json("/api/v1/skills", params, "listing skills", scope)
        if not isinstance(result, dict):
            raise VikingStoreError("the listing returned no object", code=SKILL_INVALID, uri=scope)
        return result

    def find_skills(
        self, query: str, *, limit: int, score_threshold: float | None, seconds: float
    ) -> dict[str, Any]:
        """``POST /api/v1/skills/find`` (semantic search over the user and shared scopes)
        within ``seconds``: ``{root_uris, skills, total}``, each skill with a ``score``."""
        request: dict[str, Any] = {"query": query, "limit": limit}
        if score_threshold is not None:
            request["score_threshold"] = score_threshold
        result = self._get_json(
            "/api/v1/skills/find",
            {},
            "finding skills",
            "viking://",
            payload=request,
            seconds=seconds,
        )
        if not isinstance(result, dict):
            raise VikingStoreError(
                "the skill search returned no object", code=SKILL_INVALID, uri="viking://"
            )
        return result

    @contextmanager
    def download(self, file_uri: str, *, skill_uri: str) -> Iterator[Iterator[bytes]]:
        """Stream ``GET /api/v1/content/download?uri=<file_uri>`` in pieces of at most
        ``chunk_bytes``, within ``operation_timeout`` and above the minimum rate.

        Transport failures, including a connection that breaks mid-body, a deadline passed and
        a rate too low, raise :class:`VikingStoreError` (``SKILL_UNAVAILABLE``) from the
        iterator.
        """
        url = f"{self.base_url}/api/v1/content/download"
        what = f"downloading {file_uri}"
        options = self._options
        clock = _Clock(options.operation_timeout)
        with self._session() as session:
            try:
                response = session.get(
                    url, params={"uri": file_uri}, timeout=self._timeout(clock), stream=True
                )
            except requests.ConnectionError as error:
                raise self._unreachable(error, what, skill_uri).error from None
            except requests.RequestException as error:
                raise self._transport_error(error, clock, what, skill_uri) from None
            try:
                if response.status_code >= 300:
                    self._raise_for(response, what, skill_uri, clock)

                def chunks() -> Iterator[bytes]:
                    received = 0
                    try:
                        for piece in _pieces(response, options.chunk_bytes):
                            received += len(piece)
                            self._check_pace(clock, received, what, skill_uri)
                            yield piece
                    except (requests.RequestException, TransportError, OSError) as error:
                        raise self._transport_error(error, clock, what, skill_uri) from None

                yield chunks()
            except _RetryableError as busy:
                raise busy.error from None
            finally:
                response.close()

    def _check_pace(self, clock: _Clock, received: int, what: str, uri: str) -> None:
        """Stop a download past its deadline or, after the grace period, below the rate."""
        if clock.remaining() <= 0:
            raise self._late(clock, what, uri)
        elapsed = clock.elapsed()
        options = self._options
        floor = options.min_download_bytes_per_second
        if elapsed > options.download_rate_grace_seconds and received < floor * elapsed:
            raise VikingStoreError(
                f"{self._redact(what)} is too slow: {received} bytes in {elapsed:.1f}s, below "
                f"the minimum of {floor} bytes/s",
                code=SKILL_UNAVAILABLE,
                uri=uri,
            )
