"""Artifacts as skill sources: materialized lazily, on the skill's first use, under a lease."""

from __future__ import annotations

import logging
import threading
from contextlib import ExitStack

from ..models import Skill
from ..runtime.closing import Closeable
from .spi import ArtifactStoreError, SkillArtifact, SkillArtifactStore

__all__ = ["ArtifactSkillSource"]

logger = logging.getLogger(__name__)


class ArtifactSkillSource(Closeable):
    """A ``SkillSource`` (the protocol of ``skillruntime.core.tools``) over an artifact.

    Building it makes no store call: ``name`` is the artifact name and ``description`` the one
    given (from the application's catalogue; the package is not read to find it). :meth:`load`,
    called on the skill's first activation, takes a lease on the artifact, loads its ``SKILL.md``
    strictly and returns the skill with ``base_path`` the materialized directory. The lease is kept
    until :meth:`close` (a runtime may prepare a skill in place), so close the source when the
    tools are done; it is also a context manager.
    """

    def __init__(
        self, store: SkillArtifactStore, artifact: SkillArtifact, *, description: str = ""
    ) -> None:
        if artifact.digest is None:
            logger.debug("artifact source %s has no digest; the store decides", artifact.label)
        self.store = store
        self.artifact = artifact
        self._description = description or f"Skill {artifact.label} (from an artifact store)"
        self._lock = threading.Lock()
        self._stack: ExitStack | None = None
        self._skill: Skill | None = None

    @property
    def name(self) -> str:
        """The artifact name, which the package's ``SKILL.md`` must declare."""
        return self.artifact.name

    @property
    def description(self) -> str:
        """The description given at construction."""
        return self._description

    @property
    def location(self) -> str:
        """``artifact:<name>@<version>`` (plus the digest when known)."""
        suffix = f"#{self.artifact.digest}" if self.artifact.digest else ""
        return f"artifact:{self.artifact.label}{suffix}"

    def load(self) -> Skill:
        """Materialize the artifact under a lease (once) and load its skill strictly."""
        from ..skills import load_skill

        with self._lock:
            if self._skill is not None:
                return self._skill
            stack = ExitStack()  # no skill loaded means no lease held
            try:
                directory = stack.enter_context(self.store.lease(self.artifact))
                skill = load_skill(directory, strict=True, unknown_keys="warn")
            except BaseException:
                stack.close()
                raise
            if skill is None or skill.name != self.artifact.name:
                stack.close()
                raise ArtifactStoreError(
                    f"artifact {self.artifact.label} does not hold a skill named "
                    f"{self.artifact.name!r}"
                )
            self._stack = stack
            self._skill = skill
            return skill

    def close(self) -> None:
        """Release the lease (idempotent); a later :meth:`load` takes a new one."""
        with self._lock:
            stack, self._stack, self._skill = self._stack, None, None
        if stack is not None:
            stack.close()
