"""Sandbox lifecycle on the SDK: create, connect (health-checked), renew, inspect and kill.

:class:`SandboxClient` wraps ``SandboxSync`` and ``SandboxManagerSync`` with the runtime's
settings. Idempotent calls (connect = endpoint lookup + health check, renew, info) retry transient
failures for a bounded time; creating a sandbox is a POST and is sent once. Connecting classifies
failures: a sandbox the server no longer knows (404) or reports as ended raises
:class:`SandboxGoneError`; one that exists but does not answer raises
:class:`~.errors.SandboxUnavailableError`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from opensandbox.config.connection_sync import ConnectionConfigSync
from opensandbox.exceptions import SandboxConnectionException
from opensandbox.models.sandboxes import NetworkPolicy, SandboxFilter, SandboxInfo
from opensandbox.sync.manager import SandboxManagerSync
from opensandbox.sync.sandbox import SandboxSync
from skillruntime.core.observability.audit import audited

from .errors import (
    OpenSandboxError,
    SandboxUnavailableError,
    describe,
    is_not_found,
    sandbox_error,
)
from .retry import call_idempotent

NO_DOMAIN_MESSAGE = (
    "no OpenSandbox server is configured: pass the domain option (-o domain=HOST:PORT on the "
    "command line) or set SKILLRUNTIME_OPENSANDBOX_DOMAIN or OPEN_SANDBOX_DOMAIN"
)

__all__ = [
    "ENDED_STATES",
    "METADATA_VALUE_LIMIT",
    "SandboxClient",
    "SandboxGoneError",
    "SandboxSettings",
    "clip_metadata",
]

logger = logging.getLogger(__name__)

METADATA_VALUE_LIMIT = 63
"""Longest metadata value servers accept (label-value rules); longer values are cut."""

_LIST_PAGE_SIZE = 100

ENDED_STATES = frozenset({"terminated", "failed", "stopping"})
"""Sandbox states (lower-cased) after which a sandbox cannot be used again."""


def _carries(info: SandboxInfo, wanted: Mapping[str, str]) -> bool:
    """Whether the sandbox's metadata holds every ``wanted`` tag with exactly that value."""
    metadata = info.metadata or {}
    listed = all(metadata.get(key) == value for key, value in wanted.items())
    if not listed:
        logger.warning(
            "the server listed sandbox %s for a metadata filter its tags do not match; ignored",
            info.id,
        )
    return listed


def clip_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """``metadata`` with every value cut to :data:`METADATA_VALUE_LIMIT` characters."""
    return {str(key): str(value)[:METADATA_VALUE_LIMIT] for key, value in metadata.items()}


class SandboxGoneError(Exception):
    """The sandbox no longer exists (404) or has ended; it must be replaced."""

    def __init__(self, sandbox_id: str, reason: str) -> None:
        super().__init__(f"sandbox {sandbox_id} is gone ({reason})")
        self.sandbox_id = sandbox_id


@dataclass(frozen=True)
class SandboxSettings:
    """What a new sandbox is created with and how long calls may take."""

    image: str
    entrypoint: list[str] | None = None
    sandbox_timeout_seconds: float = 600.0
    ready_timeout_seconds: float = 30.0
    resources: Mapping[str, str] = field(default_factory=dict)
    environment: Mapping[str, str] = field(default_factory=dict, repr=False)
    network_policy: NetworkPolicy | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    retry_seconds: float = 20.0
    domain_configured: bool = True


class SandboxClient:
    """Creates and attaches sandboxes; every returned handle owns its own HTTP transport."""

    def __init__(self, config: ConnectionConfigSync, settings: SandboxSettings) -> None:
        self._config = config
        self._settings = settings
        self._manager: SandboxManagerSync | None = None
        self._lock = threading.Lock()
        self.audit_conversation_id: str | None = None
        """Conversation id put on this client's ``sandbox.*`` audit events."""

    def _manager_handle(self) -> SandboxManagerSync:
        with self._lock:
            if self._manager is None:
                self._manager = SandboxManagerSync.create(connection_config=self._config)
            return self._manager

    @property
    def settings(self) -> SandboxSettings:
        """The settings of the sandboxes this client creates."""
        return self._settings

    def create(
        self, metadata: Mapping[str, str], *, timeout_seconds: float | None = None
    ) -> SandboxSync:
        """Create a sandbox and wait until it is ready (not retried: it is a POST); audited as
        ``sandbox.create``. ``timeout_seconds``: its life (default the settings'
        ``sandbox_timeout_seconds``)."""
        with audited("sandbox.create", **self._audit_fields()) as record:
            sandbox = self._create(metadata, timeout_seconds)
            record.sandbox_id = sandbox.id
            return sandbox

    def _audit_fields(self, sandbox_id: str | None = None) -> dict[str, str | None]:
        return {
            "runtime": "opensandbox",
            "conversation_id": self.audit_conversation_id,
            "sandbox_id": sandbox_id,
        }

    def _create(self, metadata: Mapping[str, str], timeout_seconds: float | None) -> SandboxSync:
        settings = self._settings
        merged = {**settings.metadata, **metadata}
        life = settings.sandbox_timeout_seconds if timeout_seconds is None else timeout_seconds
        try:
            sandbox = SandboxSync.create(
                settings.image,
                timeout=timedelta(seconds=life),
                ready_timeout=timedelta(seconds=settings.ready_timeout_seconds),
                env=dict(settings.environment),
                metadata=clip_metadata(merged),
                resource=dict(settings.resources) or None,
                network_policy=settings.network_policy,
                entrypoint=list(settings.entrypoint) if settings.entrypoint else None,
                connection_config=self._config,
            )
        except SandboxConnectionException as exc:
            if not settings.domain_configured:
                raise OpenSandboxError(
                    f"{NO_DOMAIN_MESSAGE}; the SDK's default server refused the connection"
                ) from exc
            raise sandbox_error("creating a sandbox", exc) from exc
        except Exception as exc:
            raise sandbox_error("creating a sandbox", exc) from exc
        logger.info("created OpenSandbox sandbox %s", sandbox.id)
        return sandbox

    def connect(self, sandbox_id: str) -> SandboxSync:
        """Attach to ``sandbox_id`` (audited as ``sandbox.attach``); see :meth:`_connect`."""
        with audited("sandbox.attach", **self._audit_fields(sandbox_id)):
            return self._connect(sandbox_id)

    def _connect(self, sandbox_id: str) -> SandboxSync:
        """Attach to ``sandbox_id`` and check it answers.

        Raises :class:`SandboxGoneError` when it no longer exists and
        :class:`~.errors.SandboxUnavailableError` when it exists but cannot be reached.
        """
        ready = timedelta(seconds=self._settings.ready_timeout_seconds)

        def attach() -> SandboxSync:
            return SandboxSync.connect(
                sandbox_id, connection_config=self._config, connect_timeout=ready
            )

        deadline = time.monotonic() + self._settings.retry_seconds
        try:
            return call_idempotent(
                attach, budget_seconds=self._settings.retry_seconds, deadline=deadline
            )
        except Exception as exc:
            if is_not_found(exc):
                raise SandboxGoneError(sandbox_id, "not found") from exc
            state = self.state(sandbox_id, deadline=deadline)
            if state is None:
                raise SandboxGoneError(sandbox_id, "not found") from exc
            if state.lower() in ENDED_STATES:
                raise SandboxGoneError(sandbox_id, state) from exc
            if state.lower() == "paused":
                return self._resume(sandbox_id, ready)
            _, _, _, text = describe(exc)
            raise SandboxUnavailableError(
                f"The conversation's sandbox {sandbox_id} exists (state {state}) but cannot be "
                f"reached ({text}); its record was left unchanged — retry later, or call "
                "destroy_conversation_sandbox() to start over"
            ) from exc

    def _resume(self, sandbox_id: str, ready: timedelta) -> SandboxSync:
        try:
            return SandboxSync.resume(
                sandbox_id, connection_config=self._config, resume_timeout=ready
            )
        except Exception as exc:
            raise sandbox_error(f"resuming paused sandbox {sandbox_id}", exc) from exc

    def state(self, sandbox_id: str, *, deadline: float | None = None) -> str | None:
        """The server's state of ``sandbox_id`` (``Running``…), or ``None`` when unknown to it.

        Transient failures are retried for ``retry_seconds`` or until ``deadline`` (a
        :func:`time.monotonic` instant; one attempt when it has passed). Raises
        :class:`~.errors.SandboxUnavailableError` when the server cannot be asked.
        """
        info = self.info(sandbox_id, deadline=deadline)
        return None if info is None else str(info.status.state)

    def info(self, sandbox_id: str, *, deadline: float | None = None) -> SandboxInfo | None:
        """The server's info of ``sandbox_id`` (state, metadata…), or ``None`` when unknown to
        it; retried and raising as :meth:`state`."""
        manager = self._manager_handle()
        try:
            info = call_idempotent(
                lambda: manager.get_sandbox_info(sandbox_id),
                budget_seconds=self._settings.retry_seconds,
                deadline=deadline,
            )
        except Exception as exc:
            if is_not_found(exc):
                return None
            _, _, _, text = describe(exc)
            raise SandboxUnavailableError(
                f"The OpenSandbox server cannot be reached to check sandbox {sandbox_id} ({text})"
            ) from exc
        return info

    def renew(self, sandbox: SandboxSync) -> None:
        """Extend ``sandbox``'s life to now + the sandbox timeout (retried when transient)."""
        timeout = timedelta(seconds=self._settings.sandbox_timeout_seconds)
        try:
            call_idempotent(
                lambda: sandbox.renew(timeout), budget_seconds=self._settings.retry_seconds
            )
        except Exception as exc:
            if is_not_found(exc):
                raise SandboxGoneError(sandbox.id, "not found at renewal") from exc
            raise sandbox_error(f"renewing sandbox {sandbox.id}", exc) from exc

    def list_tagged(self, metadata: Mapping[str, str]) -> list[tuple[str, datetime | None]]:
        """``(id, created_at)`` of every live sandbox whose metadata holds all of ``metadata``
        (values clipped like those sent at creation); retried when transient."""
        return [(info.id, info.created_at) for info in self.list_tagged_infos(metadata)]

    def list_tagged_infos(self, metadata: Mapping[str, str]) -> list[SandboxInfo]:
        """The server's info (id, metadata, creation time…) of every live sandbox whose metadata
        holds all of ``metadata``; retried when transient.

        The server filters, and the client checks again: a sandbox listed without every asked
        tag at exactly its value (a server that ignores or misreads the filter) is left out, so
        nothing is ever done to a sandbox on the strength of the server's filter alone."""
        manager = self._manager_handle()
        wanted = clip_metadata(metadata)
        found: list[SandboxInfo] = []
        page = 1
        while True:
            listing = call_idempotent(
                lambda number=page: manager.list_sandbox_infos(  # type: ignore[misc]
                    SandboxFilter(metadata=wanted, page=number, page_size=_LIST_PAGE_SIZE)
                ),
                budget_seconds=self._settings.retry_seconds,
            )
            found.extend(info for info in listing.sandbox_infos if _carries(info, wanted))
            pagination = listing.pagination
            if pagination is None or not pagination.has_next_page:
                return found
            page += 1

    def tag(self, sandbox_id: str, metadata: Mapping[str, str]) -> None:
        """Merge ``metadata`` into the sandbox's metadata (values clipped)."""
        manager = self._manager_handle()
        patch: dict[str, str | None] = dict(clip_metadata(metadata))
        try:
            manager.patch_sandbox_metadata(sandbox_id, patch)
        except Exception as exc:
            raise sandbox_error(f"tagging sandbox {sandbox_id}", exc) from exc

    def kill(self, sandbox_id: str) -> None:
        """Terminate ``sandbox_id`` (audited as ``sandbox.destroy``); see :meth:`_kill`."""
        with audited("sandbox.destroy", **self._audit_fields(sandbox_id)):
            self._kill(sandbox_id)

    def _kill(self, sandbox_id: str) -> None:
        """Terminate ``sandbox_id``; a sandbox that is already gone counts as killed."""
        manager = self._manager_handle()
        try:
            manager.kill_sandbox(sandbox_id)
        except Exception as exc:
            if is_not_found(exc):
                return
            raise sandbox_error(f"killing sandbox {sandbox_id}", exc) from exc
        logger.info("killed OpenSandbox sandbox %s", sandbox_id)

    @staticmethod
    def release(sandbox: SandboxSync | None) -> None:
        """Close the local handle only (the remote sandbox keeps running)."""
        if sandbox is not None:
            with contextlib.suppress(Exception):
                sandbox.close()

    def close(self) -> None:
        """Close the manager's HTTP resources (idempotent)."""
        with self._lock:
            manager, self._manager = self._manager, None
        if manager is not None:
            with contextlib.suppress(Exception):
                manager.close()
