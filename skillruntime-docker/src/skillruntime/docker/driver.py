"""``DockerDriver``: the Docker Engine as a :class:`~skillruntime.core.conversations.sandboxes.
SandboxDriver` (containers are the sandboxes, their labels the tags).

The conversation rules (attach, create, replace, orphans, destroy) are core's
:class:`~skillruntime.core.conversations.sandboxes.ConversationSandboxes`; this module only
speaks to the engine. A conversation's containers mount its named volume (made here, with the
same labels, before the first container), so the files outlive every container. Labels cannot
change after creation, so :attr:`DockerDriver.retags` is false: a conversation's container is
labelled ``skillruntime-role=conversation`` from the start.

The handle of a container is its id.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping

from skillruntime.core.conversations.sandboxes import TaggedSandbox, tags_match
from skillruntime.core.observability.audit import audited

from .engine import DockerEngine
from .errors import DockerEngineError
from .security import ContainerSecurity

__all__ = ["ENDED_STATES", "DockerDriver"]

logger = logging.getLogger(__name__)

ENDED_STATES = frozenset({"dead", "removing"})
"""Container states a conversation never attaches to again (it is replaced)."""


class DockerDriver:
    """Containers of one runtime object on one engine.

    ``labels`` are every label of the runtime's containers (and of the conversation's volume);
    nothing is removed or attached that lacks one of them. ``volume`` is ``(name, mount point)``
    of the conversation's volume (``None`` for a private container). ``prepare`` runs on a new
    container's id while it starts (the runtime resolves its user and makes its workspace
    there). ``audit_fields`` are the fields of the ``sandbox.create`` audit event.
    """

    retags = False

    def __init__(
        self,
        engine: DockerEngine,
        *,
        image: str,
        security: ContainerSecurity,
        labels: Mapping[str, str],
        environment: Mapping[str, str],
        volume: tuple[str, str] | None,
        prepare: Callable[[str], None] | None = None,
        audit_fields: Callable[[], dict[str, object]] = dict,
    ) -> None:
        self.engine = engine
        self.image = image
        self.security = security
        self.labels = dict(labels)
        self.environment = dict(environment)
        self.volume = volume
        self.prepare = prepare
        self._audit_fields = audit_fields
        self._volume_born: float | None = None

    def create(self, tags: Mapping[str, str]) -> str:
        """Create and start a container carrying ``tags`` (on the conversation's volume, made
        first when missing); audited as ``sandbox.create``."""
        if self.volume is not None:
            self.ensure_volume()
        with audited("sandbox.create", **self._audit_fields()) as record:
            container_id = self.engine.create_container(
                image=self.image,
                user=None,
                labels=tags,
                security=self.security,
                volume=self.volume,
                environment=self.environment,
                prepare=self.prepare,
            )
            record.sandbox_id = container_id
        logger.info("created container %s", container_id[:12])
        return container_id

    def ensure_volume(self) -> str:
        """The conversation's volume, created when missing (one request). Notes its age: no
        container mounting it can be older, so :meth:`list_tagged` asked for containers older
        than that answers without asking the engine."""
        assert self.volume is not None
        name = self.volume[0]
        info, age = self.engine.ensure_volume(name, self.labels)
        if not tags_match(info.get("Labels"), self.labels):
            raise DockerEngineError(
                f"volume {name} exists without this conversation's labels; refusing to use it"
            )
        if age != float("inf"):
            self._volume_born = time.monotonic() - age
        return name

    def connect(self, sandbox_id: str) -> str | None:
        """The container when it exists, has not ended and carries every label (started when
        stopped); ``None`` otherwise (an ended container with every label is removed)."""
        info = self.engine.inspect(sandbox_id)
        if info is None:
            return None
        state = info.get("State", {})
        if not tags_match(info.get("Config", {}).get("Labels"), self.labels):
            return None
        if state.get("Status") in ENDED_STATES:
            self.engine.remove_container(sandbox_id)
            return None
        if not state.get("Running"):
            self.engine.start(sandbox_id)
        return sandbox_id

    def kill(self, sandbox_id: str) -> None:
        """Remove the container when it carries every label (one that does not is left, with a
        warning; one already gone is no error)."""
        info = self.engine.inspect(sandbox_id)
        if info is None:
            return
        if not tags_match(info.get("Config", {}).get("Labels"), self.labels):
            logger.warning(
                "not removing container %s: it lacks this runtime's labels", sandbox_id[:12]
            )
            return
        self.engine.remove_container(sandbox_id)

    def list_tagged(
        self, tags: Mapping[str, str], *, older_than: float = 0.0
    ) -> Iterator[TaggedSandbox]:
        """The containers the engine lists for ``tags``; none, without a request, when the
        conversation's volume is younger than ``older_than`` (see :meth:`ensure_volume`)."""
        born = self._volume_born
        if older_than > 0 and born is not None and time.monotonic() - born < older_than:
            return
        for item in self.engine.list_containers(tags):
            created = item.get("Created")
            yield TaggedSandbox(
                sandbox_id=str(item.get("Id", "")),
                tags=dict(item.get("Labels") or {}),
                created_at=float(created) if created else None,
            )

    def tag(self, sandbox_id: str, tags: Mapping[str, str]) -> None:
        """Labels are fixed at creation (:attr:`retags` is false): never called."""
        raise DockerEngineError("a container's labels cannot change")

    def identify(self, handle: str) -> str:
        """The handle is the container's id."""
        return handle

    def release(self, handle: str) -> None:
        """Nothing is held per container on the client."""

    def remove_volume(self) -> None:
        """Remove the conversation's volume when it carries every label, after every container
        carrying every label of the conversation: such a container mounts the volume (the
        engine refuses to remove a volume in use) and no record names it — a candidate left by
        a process that died between creating and recording it, within the orphan grace."""
        if self.volume is None:
            return
        name = self.volume[0]
        info = self.engine.inspect_volume(name)
        if info is None:
            return
        if not tags_match(info.get("Labels"), self.labels):
            logger.warning("not removing volume %s: it lacks this conversation's labels", name)
            return
        for item in self.engine.list_containers(self.labels):
            if tags_match(item.get("Labels"), self.labels):
                logger.warning("removing unrecorded container %s", str(item.get("Id", ""))[:12])
                self.engine.remove_container(str(item["Id"]))
        self.engine.remove_volume(name)
