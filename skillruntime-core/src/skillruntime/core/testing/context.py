"""Per-test state of the conformance kit: unique conversations, runtimes to close, helpers."""

from __future__ import annotations

import logging
import posixpath
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from ..models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
    SkillRuntimeConfig,
)
from ..runtime.closing import Closeable
from ..runtime.spi import SkillRuntime
from .skills import SkillFactory


class KitSuite(Protocol):
    """What a context uses of the suite that opens it (:class:`~.base.ConformanceBase`)."""

    @property
    def conversation_mode(self) -> bool:
        """Whether runtimes come from :meth:`make_runtime` (one conversation per label)."""
        ...

    def conversations_root(self, tmp_path: Path) -> str:
        """The runtime path under which conversations live."""
        ...

    def skills_directory(self, working_directory: str) -> str:
        """Where a runtime without a conversation puts prepared copies."""
        ...

    def make_runtime(
        self,
        *,
        conversation_id: str,
        conversations_root: str,
        base_environment: Mapping[str, str],
    ) -> SkillRuntime:
        """A new runtime object for ``conversation_id`` under ``conversations_root``."""
        ...

    def make_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> SkillRuntime:
        """A new runtime object without a conversation."""
        ...

    def discard_conversations(self, conversation_ids: list[str]) -> None:
        """Called after each test with the conversations it used."""
        ...


__all__ = ["ConformanceContext"]

logger = logging.getLogger(__name__)


class ConformanceContext(Closeable):
    """What one kit test works with.

    Conversation ids are unique per context (``kit-<random>-<label>``), so every test gets fresh
    workspaces and a fresh skills root even when the conversations root is shared. Every runtime
    made through :meth:`runtime` is closed when the context closes.
    """

    def __init__(self, suite: KitSuite, tmp_path: Path) -> None:
        self.suite = suite
        self.tmp_path = tmp_path
        self.conversations_root = suite.conversations_root(tmp_path)
        self.prefix = f"kit-{uuid.uuid4().hex[:12]}"
        self.skills = SkillFactory(tmp_path / "kit-skills")
        self._runtimes: list[SkillRuntime] = []
        self._cleanups: list[Callable[[], None]] = []
        self._labels: list[str] = []

    # ------------------------------------------------------------ conversations

    def conversation_id(self, label: str = "a") -> str:
        """The conversation id this test uses for ``label``."""
        return f"{self.prefix}-{label}"

    def workspace(self, label: str = "a") -> str:
        """The runtime path of the conversation workspace for ``label`` (without a conversation:
        the default working directory the runtime for ``label`` is built with)."""
        return posixpath.join(self.conversations_root, self.conversation_id(label))

    def skills_directory(self, label: str = "a") -> str:
        """Where the runtime for ``label`` puts prepared copies."""
        if self.suite.conversation_mode:
            return posixpath.join(self.workspace(label), "skills")
        return self.suite.skills_directory(self.workspace(label))

    def runtime(
        self, label: str = "a", *, base_environment: Mapping[str, str] | None = None
    ) -> SkillRuntime:
        """A new runtime object on conversation ``label`` (closed with the context).

        Without a conversation (``conversation_mode`` off) the runtime has no conversation and
        :meth:`workspace` of ``label`` as its default working directory.
        """
        if self.suite.conversation_mode:
            runtime = self.suite.make_runtime(
                conversation_id=self.conversation_id(label),
                conversations_root=self.conversations_root,
                base_environment=dict(base_environment or {}),
            )
        else:
            runtime = self.suite.make_runtime_without_conversation(
                working_directory=self.workspace(label),
                base_environment=dict(base_environment or {}),
            )
        self._runtimes.append(runtime)
        self.track_label(label)
        return runtime

    def track_label(self, label: str) -> None:
        """Count ``label`` among this test's conversations (discarded when the context closes);
        :meth:`runtime` does it, a contract that builds a runtime itself calls it."""
        if label not in self._labels:
            self._labels.append(label)

    def add_cleanup(self, cleanup: Callable[[], None]) -> None:
        """Run ``cleanup`` when the context closes (before runtimes are closed)."""
        self._cleanups.append(cleanup)

    def close(self) -> None:
        """Run cleanups, close every runtime, then let the suite discard the conversations."""
        for cleanup in reversed(self._cleanups):
            try:
                cleanup()
            except Exception:
                logger.debug("conformance cleanup failed", exc_info=True)
        for runtime in self._runtimes:
            try:
                runtime.close()
            except Exception:
                logger.debug("closing a runtime under test failed", exc_info=True)
        try:
            self.suite.discard_conversations([self.conversation_id(x) for x in self._labels])
        except Exception:
            logger.warning("discarding the conformance conversations failed", exc_info=True)

    # -------------------------------------------------------------- shortcuts

    def run(
        self,
        runtime: SkillRuntime,
        command: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        max_output_bytes: int | None = None,
    ) -> SkillExecutionResult:
        """Execute ``command`` in ``runtime``."""
        fields: dict[str, object] = {
            "command": command,
            "working_directory": cwd,
            "timeout_seconds": timeout,
            "environment": dict(env or {}),
        }
        if max_output_bytes is not None:
            fields["max_output_bytes"] = max_output_bytes
        return runtime.execute(SkillExecutionRequest.model_validate(fields))

    def check_output(
        self,
        runtime: SkillRuntime,
        command: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
    ) -> str:
        """Execute ``command``, assert it succeeded, and return its stdout."""
        result = self.run(runtime, command, cwd=cwd, env=env, timeout=timeout)
        assert result.ok, (
            f"command {command!r} failed: exit={result.exit_code} timed_out={result.timed_out} "
            f"stderr={result.stderr[-500:]!r}"
        )
        return result.stdout

    def prepare(
        self,
        runtime: SkillRuntime,
        *skills: Skill,
        configs: Mapping[str, SkillRuntimeConfig] | None = None,
    ) -> list[Skill]:
        """Prepare ``skills`` in ``runtime``."""
        return runtime.prepare(
            SkillPreparationRequest(skills=tuple(skills), configs=dict(configs or {}))
        )

    def log_path(self, name: str, label: str = "a") -> str:
        """Runtime path of a kit log file in the workspace of ``label`` (bootstrap counters)."""
        return posixpath.join(self.workspace(label), f"kit-{name}.log")

    def count_lines(self, runtime: SkillRuntime, path: str) -> int:
        """Lines in the runtime file ``path`` (0 when it does not exist)."""
        fs = runtime.get_file_system()
        if fs.stat(path) is None:
            return 0
        return len(fs.read_text(path).splitlines())
