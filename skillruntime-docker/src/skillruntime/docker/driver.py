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
    ``deployment_labels`` are the deployment's own labels (those a warm-pool member carries).
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
        deployment_labels: Mapping[str, str] | None = None,
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
        self.default_volume = volume
        self._volume_labels = self.labels
        self._member_labels: dict[str, str] | None = None
        self.deployment_labels = dict(deployment_labels or {})

    def use_storage(self, storage: str | None) -> None:
        """The conversation's files live on volume ``storage`` (a warm-pool member's, named by
        the record's ``sandbox_storage``) or, ``None``, on its default volume. On a member's
        volume, the member itself (pool labels, its volume's label) is accepted as the
        conversation's container besides the containers carrying the conversation's labels."""
        if self.default_volume is None:
            return
        if storage is None or storage == self.default_volume[0]:
            self.volume = self.default_volume
            self._volume_labels = self.labels
            self._member_labels = None
            return
        from .pool import member_labels

        self.volume = (storage, self.default_volume[1])
        self._member_labels = member_labels(self.deployment_labels, storage)
        self._volume_labels = self._member_labels
        self._volume_born = None

    def accepts(self, labels: Mapping[str, str] | None) -> bool:
        """Whether a container with ``labels`` is one of this conversation's (or, on a
        member's volume, that member)."""
        if tags_match(labels, self.labels):
            return True
        return self._member_labels is not None and tags_match(labels, self._member_labels)

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
        info, age = self.engine.ensure_volume(name, self._volume_labels)
        if not tags_match(info.get("Labels"), self._volume_labels):
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
        if not self.accepts(info.get("Config", {}).get("Labels")):
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
        if not self.accepts(info.get("Config", {}).get("Labels")):
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
        """Remove the conversation's volume (and its default one, when it lives on a pool
        member's: a node that lost the first-record race may have made it) when it carries the
        expected labels, after every container carrying every label of the conversation: such a
        container mounts the volume (the engine refuses to remove a volume in use) and no record
        names it — a candidate left by a process that died between creating and recording it,
        within the orphan grace."""
        if self.volume is None:
            return
        for item in self.engine.list_containers(self.labels):
            if tags_match(item.get("Labels"), self.labels):
                logger.warning("removing unrecorded container %s", str(item.get("Id", ""))[:12])
                self.engine.remove_container(str(item["Id"]))
        volumes = [(self.volume[0], self._volume_labels)]
        if self.default_volume is not None and self.default_volume != self.volume:
            volumes.append((self.default_volume[0], self.labels))
        for name, required in volumes:
            info = self.engine.inspect_volume(name)
            if info is None:
                continue
            if not tags_match(info.get("Labels"), required):
                logger.warning("not removing volume %s: it lacks this conversation's labels", name)
                continue
            self.engine.remove_volume(name)
