"""``VikingClient``: the few OpenViking HTTP calls the store makes, with timeouts and retries.

Every request carries ``(connect_timeout, read_timeout)``. A ``409 CONFLICT`` whose details say
``path_busy``/``retryable`` (the integrity read's tree lock), a ``503`` and a refused connection
are retried with exponential backoff, a bounded number of times. The API key goes in
``X-API-Key`` and is never logged or put into an error.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import requests
from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from .errors import (
    SKILL_ACCESS_DENIED,
    SKILL_INVALID,
    SKILL_NOT_FOUND,
    SKILL_PACKAGE_TOO_LARGE,
    SKILL_UNAVAILABLE,
    VikingStoreError,
)
from .options import VikingStoreOptions

__all__ = ["VikingClient"]

logger = logging.getLogger(__name__)

_MAX_ERROR_BODY = 64 * 1024
_IDLE_SESSIONS = 16


class _RetryableError(Exception):
    """A transient answer (busy lock, 503, connection refused) worth another try."""

    def __init__(self, error: VikingStoreError) -> None:
        super().__init__(str(error))
        self.error = error


def _error_body(response: requests.Response) -> bytes | None:
    """The error body when it has at most ``_MAX_ERROR_BODY`` bytes (never more is held)."""
    body = bytearray()
    try:
        for chunk in response.iter_content(64 * 1024):
            body += chunk
            if len(body) > _MAX_ERROR_BODY:
                return None
    except requests.RequestException:
        return None
    return bytes(body)


def _envelope_error(response: requests.Response) -> tuple[str, str, dict[str, Any]]:
    """``(code, message, details)`` from an OpenViking error envelope (best effort)."""
    raw = _error_body(response)
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        details = error.get("details")
        return (
            str(error.get("code") or ""),
            str(error.get("message") or "")[:500],
            details if isinstance(details, dict) else {},
        )
    return "", "", {}


class VikingClient:
    """A thread-safe OpenViking client for skill reads and downloads: each request borrows a
    ``requests.Session`` from a small pool, all sharing the same headers and timeouts."""

    def __init__(self, options: VikingStoreOptions) -> None:
        self._options = options
        self._idle: queue.LifoQueue[requests.Session] = queue.LifoQueue(maxsize=_IDLE_SESSIONS)
        self._lock = threading.Lock()
        self._closed = False
        headers = {"Accept": "application/json", "User-Agent": "skillruntime-viking"}
        if options.api_key is not None:
            headers["X-API-Key"] = options.api_key.get_secret_value()
        if options.account:
            headers["X-OpenViking-Account"] = options.account
        if options.user:
            headers["X-OpenViking-User"] = options.user
        if options.agent:
            headers["X-OpenViking-Actor-Peer"] = options.agent
        self._headers = headers
        self._timeout = (options.connect_timeout, options.read_timeout)

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

    def _raise_for(self, response: requests.Response, what: str, uri: str) -> None:
        """Translate a non-2xx answer into a :class:`VikingStoreError` (retryable ones wrapped)."""
        code, message, details = _envelope_error(response)
        status = response.status_code
        text = f"{what} failed: HTTP {status} {code} {message}".rstrip()
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
        if status == 503:
            raise _RetryableError(VikingStoreError(text, code=SKILL_UNAVAILABLE, uri=uri))
        if 400 <= status < 500:
            raise VikingStoreError(text, code=SKILL_INVALID, uri=uri)
        raise VikingStoreError(text, code=SKILL_UNAVAILABLE, uri=uri)

    def _retrying(self) -> Retrying:
        options = self._options
        return Retrying(
            stop=stop_after_attempt(options.busy_retries + 1),
            wait=wait_exponential(multiplier=options.busy_backoff_seconds, max=2.0),
            retry=retry_if_exception(lambda error: isinstance(error, _RetryableError)),
            reraise=True,
        )

    def _get_json(self, path: str, params: Mapping[str, str], what: str, uri: str) -> Any:
        url = f"{self.base_url}{path}"

        def attempt() -> Any:
            try:
                with self._session() as session:
                    response = session.get(url, params=dict(params), timeout=self._timeout)
            except requests.ConnectionError as error:
                raise _RetryableError(
                    VikingStoreError(
                        f"{what} failed: cannot reach {self.base_url} ({type(error).__name__})",
                        code=SKILL_UNAVAILABLE,
                        uri=uri,
                    )
                ) from None
            except requests.RequestException as error:
                raise VikingStoreError(
                    f"{what} failed: {type(error).__name__}", code=SKILL_UNAVAILABLE, uri=uri
                ) from None
            if response.status_code >= 300:
                self._raise_for(response, what, uri)
            try:
                body = response.json()
            except ValueError:
                raise VikingStoreError(
                    f"{what} returned no JSON", code=SKILL_UNAVAILABLE, uri=uri
                ) from None
            if not isinstance(body, dict) or body.get("status") != "ok":
                raise VikingStoreError(
                    f"{what} returned no 'ok' envelope", code=SKILL_UNAVAILABLE, uri=uri
                )
            return body.get("result")

        try:
            return self._retrying()(attempt)
        except _RetryableError as busy:
            logger.warning(
                "%s: server still busy after %d tries", what, self._options.busy_retries + 1
            )
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

    @contextmanager
    def download(self, file_uri: str, *, skill_uri: str) -> Iterator[Iterator[bytes]]:
        """Stream ``GET /api/v1/content/download?uri=<file_uri>`` as chunks of ``chunk_bytes``.

        Transport failures, including a connection that breaks mid-body, raise
        :class:`VikingStoreError` (``SKILL_UNAVAILABLE``) from the iterator.
        """
        url = f"{self.base_url}/api/v1/content/download"
        what = f"downloading {file_uri}"
        with self._session() as session:
            try:
                response = session.get(
                    url, params={"uri": file_uri}, timeout=self._timeout, stream=True
                )
            except requests.RequestException as error:
                raise VikingStoreError(
                    f"{what} failed: {type(error).__name__}", code=SKILL_UNAVAILABLE, uri=skill_uri
                ) from None
            try:
                if response.status_code >= 300:
                    self._raise_for(response, what, skill_uri)

                def chunks() -> Iterator[bytes]:
                    try:
                        yield from response.iter_content(self._options.chunk_bytes)
                    except requests.RequestException as error:
                        raise VikingStoreError(
                            f"{what} broke off: {type(error).__name__}",
                            code=SKILL_UNAVAILABLE,
                            uri=skill_uri,
                        ) from None

                yield chunks()
            except _RetryableError as busy:
                raise busy.error from None
            finally:
                response.close()
