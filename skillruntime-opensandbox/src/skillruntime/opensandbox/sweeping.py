"""``OpenSandboxReaper``: what expiry sweeps do with OpenSandbox conversations.

:meth:`OpenSandboxReaper.destroy` kills the sandbox an idle conversation's record named (the
sweep deleted the record first). :meth:`OpenSandboxReaper.orphans` lists the live sandboxes the
runtime tagged with a conversation (metadata ``skillruntime-runtime=opensandbox`` and
``skillruntime-conversation-key``) that no record names, once they are older than
``orphan_grace_seconds`` — a younger candidate may be about to be recorded. Only sandboxes of this
reaper's server are considered (records carry the service key of the server URL).

A server shared by deployments with *different* stores must tell their sandboxes apart, or one
deployment's sweep would take the other's sandboxes for orphans: give each deployment's runtimes
a ``metadata`` tag (e.g. ``{"app": "billing"}``) and its reaper the same ``metadata``; the reaper
then only looks at sandboxes carrying it. Those tags are checked on the client too (a sandbox the
server lists without every one at exactly its value is ignored), and a sandbox any record names
is never an orphan, whichever conversation's tags it carries.

:meth:`OpenSandboxReaper.snapshot_workspace` lets ``skillruntime conversations sweep
--snapshot-store`` snapshot an idle conversation's workspace before the sweep kills its sandbox
(docs/durability.md, "Before a sweep"): an :class:`~skillruntime.opensandbox.
OpenSandboxSkillRuntime` built from the same ``SKILLRUNTIME_OPENSANDBOX_*`` options as the CLI's
runtimes attaches to the recorded sandbox, and the workspace is snapshotted as
:func:`~skillruntime.core.durability.automatic.snapshot_before_sweep` does. No sandbox is ever
created for it: a conversation whose sandbox is gone or has ended lost its workspace with it,
so there is nothing to snapshot (logged; the sweep goes on, and the store keeps the
conversation's earlier snapshots, which its next runtime restores).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from opensandbox.config.connection_sync import ConnectionConfigSync
from opensandbox.transport import RetryPolicy
from skillruntime.core.conversations import (
    ConversationRecord,
    service_key_for_url,
    storage_key_for,
)
from skillruntime.core.conversations.sandboxes import (
    TAG_CONVERSATION_ID,
    TAG_CONVERSATION_KEY,
    TAG_RUNTIME,
    conversation_orphans,
)
from skillruntime.core.conversations.sweeps import OrphanSandbox

from ._tls import connection_config as default_connection_config
from .driver import OpenSandboxDriver
from .errors import OpenSandboxError
from .options import OpenSandboxRuntimeOptions
from .retry import DEFAULT_RETRY_SECONDS
from .runtime import DEFAULT_ORPHAN_GRACE_SECONDS
from .sandbox import ENDED_STATES, SandboxClient, SandboxSettings, clip_metadata

if TYPE_CHECKING:
    from skillruntime.core.snapshots.spi import SnapshotStore

    from .runtime import OpenSandboxSkillRuntime

__all__ = ["OpenSandboxReaper", "reaper_from_environment"]

logger = logging.getLogger(__name__)

NO_DOMAIN_MESSAGE = (
    "no OpenSandbox server is configured for the sweep: set SKILLRUNTIME_OPENSANDBOX_DOMAIN or "
    "OPEN_SANDBOX_DOMAIN (HOST:PORT) in its environment, or pass domain= to OpenSandboxReaper"
)
"""What a reaper without a server says: a sweep has no ``-o`` option, unlike the runtime's
commands, so the message names the variables (:func:`reaper_from_environment` reads them)."""


class OpenSandboxReaper:
    """Kills idle conversations' sandboxes and finds orphans on one OpenSandbox server.

    ``domain``/``api_key`` fall back to ``OPEN_SANDBOX_DOMAIN``/``OPEN_SANDBOX_API_KEY`` like
    the runtime's; ``connection_config`` replaces the connection settings. Contacts nothing
    until used; :meth:`close` releases the HTTP resources. ``runtime_options`` are the options
    of the runtime :meth:`snapshot_workspace` opens (image, user, timeouts…; default: the
    ``SKILLRUNTIME_OPENSANDBOX_*`` environment, read when first needed); the server and the
    metadata are always this reaper's.
    """

    runtime = "opensandbox"

    def __init__(
        self,
        *,
        domain: str | None = None,
        api_key: str | None = None,
        protocol: str = "http",
        request_timeout_seconds: float = 30.0,
        use_server_proxy: bool = False,
        retry_seconds: float = DEFAULT_RETRY_SECONDS,
        orphan_grace_seconds: float = DEFAULT_ORPHAN_GRACE_SECONDS,
        connection_config: ConnectionConfigSync | None = None,
        metadata: Mapping[str, str] | None = None,
        runtime_options: OpenSandboxRuntimeOptions | None = None,
    ) -> None:
        if orphan_grace_seconds < 0:
            raise ValueError("orphan_grace_seconds must not be negative")
        self._config = connection_config or default_connection_config(
            domain=domain,
            api_key=api_key,
            protocol=protocol,
            request_timeout=timedelta(seconds=request_timeout_seconds),
            use_server_proxy=use_server_proxy,
            retry_policy=RetryPolicy.disabled(),
            disable_metrics=True,
        )
        # Without a configured server the SDK's default one is tried once, not retried: a sweep
        # of a runtime nobody set up fails in one request with a message saying what to set.
        self._configured = (
            connection_config is not None
            or domain is not None
            or bool(os.environ.get("OPEN_SANDBOX_DOMAIN"))
        )
        self._client = SandboxClient(
            self._config,
            SandboxSettings(
                image="unused",
                retry_seconds=retry_seconds if self._configured else 0.0,
                domain_configured=self._configured,
            ),
        )
        self._grace = orphan_grace_seconds
        self._metadata = dict(metadata or {})
        self.service_key = service_key_for_url(self._config.get_base_url())
        self._runtime_options = runtime_options

    def _live_sandbox(self, record: ConversationRecord) -> bool:
        """Whether the record's sandbox exists on this server, has not ended, and carries the
        deployment's metadata and this conversation's tags (values as the server holds them)."""
        if not record.sandbox_id:
            return False
        info = self._client.info(record.sandbox_id)
        if info is None or str(info.status.state).lower() in ENDED_STATES:
            return False
        wanted = clip_metadata(
            {
                **self._metadata,
                TAG_RUNTIME: self.runtime,
                TAG_CONVERSATION_KEY: storage_key_for(record.service_key, record.conversation_id),
                TAG_CONVERSATION_ID: record.conversation_id,
            }
        )
        found = info.metadata or {}
        if any(found.get(key) != value for key, value in wanted.items()):
            logger.warning(
                "not snapshotting through sandbox %s: it lacks the conversation's tags",
                record.sandbox_id,
            )
            return False
        return True

    def snapshot_workspace(self, record: ConversationRecord, store: SnapshotStore) -> None:
        """Snapshot the record's workspace into ``store`` before the sweep kills its sandbox
        (see the module docs), through a runtime attached to the recorded sandbox on
        :func:`~skillruntime.core.conversations.sweeps.record_copy_store` (the record the sweep
        holds is never written).

        A sandbox that is gone, has ended or lacks the conversation's tags is never replaced:
        nothing is snapshotted (logged) and the sweep goes on. A paused sandbox is resumed, as
        any runtime attaching to it does. The runtime is closed before returning; it leaves the
        recorded sandbox running (the sweep kills it)."""
        from skillruntime.core.durability.automatic import snapshot_swept_record

        if record.service_key != self.service_key:
            raise ValueError(
                f"conversation {record.conversation_id} lives on another OpenSandbox server"
            )
        if not self._live_sandbox(record):
            logger.info(
                "the sandbox of conversation %s is gone, and its workspace with it: nothing "
                "to snapshot",
                record.conversation_id,
            )
            return
        snapshot_swept_record(record, store, self._open_runtime)

    def _open_runtime(self, overrides: dict[str, Any]) -> OpenSandboxSkillRuntime:
        """A runtime with the environment's runtime options on this reaper's server and metadata,
        updated with ``overrides`` (the swept record's conversation, quiet)."""
        from .runtime import OpenSandboxSkillRuntime

        options = self._runtime_options or OpenSandboxRuntimeOptions()
        arguments = options.runtime_arguments()
        arguments.update(
            connection_config=self._config,
            metadata=dict(self._metadata),
            **overrides,
        )
        return OpenSandboxSkillRuntime(**arguments)

    def destroy(self, record: ConversationRecord) -> None:
        """Kill the record's sandbox (one already gone counts as killed)."""
        if record.service_key != self.service_key:
            raise ValueError(
                f"conversation {record.conversation_id} lives on another OpenSandbox server"
            )
        if record.sandbox_id:
            self._client.kill(record.sandbox_id)

    def orphans(self, records: Sequence[ConversationRecord]) -> list[OrphanSandbox]:
        """Tagged conversation sandboxes of this server that no record in ``records`` names
        (core's :func:`~skillruntime.core.conversations.sandboxes.conversation_orphans`)."""
        required = {**self._metadata, TAG_RUNTIME: self.runtime}
        try:
            listed = list(OpenSandboxDriver(self._client).list_tagged(required))
        except Exception as exc:  # the SDK's own or ours: which, the message need not say
            if self._configured:
                raise
            raise OpenSandboxError(
                f"{NO_DOMAIN_MESSAGE}; the SDK's default server did not answer"
            ) from exc
        return conversation_orphans(
            listed,
            records,
            runtime=self.runtime,
            required=required,
            grace_seconds=self._grace,
        )

    def destroy_orphan(self, orphan: OrphanSandbox) -> None:
        """Kill one orphan sandbox."""
        logger.warning("killing orphan sandbox %s", orphan.sandbox_id)
        self._client.kill(orphan.sandbox_id)

    def close(self) -> None:
        """Release the HTTP resources (idempotent)."""
        self._client.close()


def reaper_from_environment() -> OpenSandboxReaper:
    """A reaper configured like the runtime from ``SKILLRUNTIME_OPENSANDBOX_*`` variables
    (``domain``, ``api_key``, ``protocol``, ``request_timeout_seconds``, ``use_server_proxy``,
    ``metadata``; the runtime :meth:`OpenSandboxReaper.snapshot_workspace` opens takes every
    other option from them too)."""
    options = OpenSandboxRuntimeOptions()
    arguments = options.runtime_arguments()
    return OpenSandboxReaper(
        domain=arguments["domain"],
        api_key=arguments["api_key"],
        protocol=arguments["protocol"],
        request_timeout_seconds=arguments["request_timeout_seconds"],
        use_server_proxy=arguments["use_server_proxy"],
        metadata=arguments["metadata"],
        runtime_options=options,
    )
