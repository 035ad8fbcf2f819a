"""The hooks and capability flags a runtime author sets on :class:`RuntimeConformance`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from ..runtime import BaseSkillRuntime, SkillRuntime
from .context import ConformanceContext
from .spy import install_backend_spy

__all__ = ["ConformanceBase"]


class ConformanceBase:
    """Hooks, capability flags and the ``conformance`` fixture shared by every contract group.

    Override :meth:`make_runtime` (required) and, for a runtime whose paths are not host paths,
    :meth:`conversations_root`. Capability flags switch off checks of contracts that are optional
    for some runtimes; everything else is required by DESIGN §3.
    """

    resolves_symlinks: ClassVar[bool] = False
    """The runtime refuses file operations whose path reaches outside the workspace through a
    symbolic link (the local runtime does; remote runtimes check paths lexically only)."""

    supports_base_environment: ClassVar[bool] = True
    """``make_runtime`` honours ``base_environment`` (the lowest level of env precedence)."""

    resumes_prepared_skills: ClassVar[bool] = True
    """A new runtime object on the same conversation finds prepared skills without uploading
    or bootstrapping them again."""

    bounds_output_memory: ClassVar[bool] = True
    """Output is held in bounded memory *in this process* whatever a command prints (measured
    with :mod:`tracemalloc`); off for a runtime whose client library buffers whole responses."""

    timeout_seconds: ClassVar[float] = 1.0
    """Timeout used by the timeout contracts; raise it for slow remote round trips."""

    kill_settle_seconds: ClassVar[float] = 5.0
    """How long the tree-kill contract waits for a killed grandchild to disappear."""

    large_file_bytes: ClassVar[int] = 20 * 1024 * 1024
    """Size of the file streamed by the large-file contract."""

    concurrency: ClassVar[int] = 8
    """Threads used by the concurrency contracts."""

    # ------------------------------------------------------------------ hooks

    def make_runtime(
        self,
        *,
        conversation_id: str,
        conversations_root: str,
        base_environment: Mapping[str, str],
    ) -> SkillRuntime:
        """Build a new runtime object for ``conversation_id`` under ``conversations_root``.

        Called several times per test: a second object on the same conversation must resume it
        (same workspace, same prepared skills), a different conversation must be isolated. An
        invalid ``conversation_id`` or environment name must raise ``ValueError``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement make_runtime()")

    def conversations_root(self, tmp_path: Path) -> str:
        """The runtime path under which conversations live (default: a host temp directory).

        A remote runtime returns a path inside its sandbox, e.g. ``/workspace/conversations``;
        conversation ids are unique per test, so the root may be shared between tests.
        """
        return str(tmp_path / "conversations")

    def discard_conversations(self, conversation_ids: list[str]) -> None:
        """Called after each test with the conversations it used (default: nothing).

        A remote runtime may destroy their sandboxes or records here.
        """

    def backend_call_counter(self, runtime: SkillRuntime) -> Callable[[], int] | None:
        """A counter of calls that reach the backend, or ``None`` when it cannot be observed.

        Called on a fresh runtime. The default spies on :class:`BaseSkillRuntime`'s ``_run`` and
        ``_raw_file_system`` hooks; a runtime with its own transport may return a counter of its
        requests instead.
        """
        if isinstance(runtime, BaseSkillRuntime):
            spy = install_backend_spy(runtime)
            return lambda: spy.count
        return None

    # ---------------------------------------------------------------- fixture

    @pytest.fixture
    def conformance(self, tmp_path: Path) -> Iterator[ConformanceContext]:
        """A :class:`ConformanceContext` for one test; closes its runtimes afterwards."""
        with ConformanceContext(self, tmp_path) as context:
            yield context
