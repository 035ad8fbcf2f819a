"""``OpenSandboxDriver``: an OpenSandbox server as a :class:`~skillruntime.core.conversations.
sandboxes.SandboxDriver` (sandboxes with their metadata as tags).

The conversation rules are core's
:class:`~skillruntime.core.conversations.sandboxes.ConversationSandboxes`; this module only
speaks to the server through :class:`.sandbox.SandboxClient`. Metadata can be patched after
creation, so :attr:`OpenSandboxDriver.retags` is true: a conversation's new sandbox is a
``candidate`` until its record names it. Values are cut to
:data:`.sandbox.METADATA_VALUE_LIMIT` characters by the server's rules; :meth:`OpenSandboxDriver.
list_tagged` reports a value held cut as the full value asked for, so the lifecycle's check of
every tag compares like with like.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC

from opensandbox.sync.sandbox import SandboxSync
from skillruntime.core.conversations.sandboxes import TaggedSandbox

from .sandbox import SandboxClient, SandboxGoneError, clip_metadata

__all__ = ["OpenSandboxDriver"]


class OpenSandboxDriver:
    """Sandboxes of one runtime object on one server; the handle is the SDK's
    :class:`~opensandbox.sync.sandbox.SandboxSync` (one HTTP transport each)."""

    retags = True

    def __init__(self, client: SandboxClient) -> None:
        self.client = client

    def create(self, tags: Mapping[str, str]) -> SandboxSync:
        """A new sandbox carrying ``tags`` and the deployment's metadata, once it is ready."""
        return self.client.create(tags)

    def connect(self, sandbox_id: str) -> SandboxSync | None:
        """The sandbox attached and renewed; ``None`` when it is gone or has ended. A sandbox
        that exists but cannot be reached raises
        :class:`~.errors.SandboxUnavailableError`."""
        try:
            sandbox = self.client.connect(sandbox_id)
        except SandboxGoneError:
            return None
        try:
            self.client.renew(sandbox)
        except SandboxGoneError:
            self.client.release(sandbox)
            return None
        except BaseException:
            self.client.release(sandbox)
            raise
        return sandbox

    def kill(self, sandbox_id: str) -> None:
        """Terminate the sandbox (one already gone counts as killed)."""
        self.client.kill(sandbox_id)

    def list_tagged(
        self, tags: Mapping[str, str], *, older_than: float = 0.0
    ) -> Iterator[TaggedSandbox]:
        """The live sandboxes whose metadata holds every tag (checked on the client too;
        ``older_than`` is left to the caller). A value the server holds cut to
        :data:`.sandbox.METADATA_VALUE_LIMIT` is reported as the value asked for."""
        wanted = dict(tags)
        stored_form = clip_metadata(wanted)
        for info in self.client.list_tagged_infos(wanted):
            found = dict(info.metadata or {})
            for key, value in wanted.items():
                if found.get(key) == stored_form[key]:
                    found[key] = value
            created = info.created_at
            if created is not None and created.tzinfo is None:
                created = created.replace(tzinfo=UTC)
            yield TaggedSandbox(
                sandbox_id=info.id,
                tags=found,
                created_at=created.timestamp() if created is not None else None,
            )

    def tag(self, sandbox_id: str, tags: Mapping[str, str]) -> None:
        """Merge ``tags`` into the sandbox's metadata."""
        self.client.tag(sandbox_id, tags)

    def identify(self, handle: SandboxSync) -> str:
        """The sandbox's id."""
        return handle.id

    def release(self, handle: SandboxSync) -> None:
        """Close the handle's transport (the sandbox runs on)."""
        self.client.release(handle)
