"""The hooks and capability flags a runtime author sets on :class:`RuntimeConformance`."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from ..runtime.spi import BaseSkillRuntime, SkillRuntime
from .context import ConformanceContext
from .spy import install_backend_spy

__all__ = ["ConformanceBase"]


class ConformanceBase:
    """Hooks, capability flags and the ``conformance`` fixture shared by every contract group.

    Override :meth:`make_runtime` (required) and, for a runtime whose paths are not host paths,
    :meth:`conversations_root`. Capability flags switch off checks of contracts that are optional
    for some runtimes; everything else is required by the contracts (``docs/architecture.md``).
    """

    conversation_mode: ClassVar[bool] = True
    """Runtimes come from :meth:`make_runtime`, one conversation workspace per label. Set it to
    ``False`` in a second subclass to run the kit without a conversation: runtimes then come
    from :meth:`make_runtime_without_conversation` and the contracts that only exist with a
    workspace (escapes, conversation ids, the undeletable workspace, symlink scoping) are
    removed from that subclass."""

    prepares_in_place: ClassVar[bool] = False
    """Without a conversation, ``prepare`` uses a skill where it is and returns its source
    directory instead of copying it (the local runtime with neither conversation nor work root).
    The copy contracts are replaced by the in-place one. Only without a conversation."""

    keeps_files_across_runtime_objects: ClassVar[bool] = True
    """A new runtime object on the same working directory sees the files an earlier one left
    there. Always required with a conversation; off for a no-conversation mode in which every
    runtime object owns a private sandbox."""

    makes_unwritable_directories: ClassVar[bool] = False
    """:meth:`make_directory_unwritable` is implemented, so the permission-denied contract runs."""

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

    def make_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> SkillRuntime:
        """Build a new runtime object without a conversation (used when ``conversation_mode`` is
        off) whose :attr:`~SkillRuntime.default_working_directory` is ``working_directory``.

        ``working_directory`` is a fresh runtime path under :meth:`conversations_root` that does
        not exist yet: the runtime creates it on first use (a runtime whose default directory is
        the process's working directory may create it in the hook). Called several times per
        test with the same directory for the same label. Invalid environment names must raise
        ``ValueError``.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement make_runtime_without_conversation()"
        )

    def skills_directory(self, working_directory: str) -> str:
        """Where a runtime without a conversation puts prepared copies (default:
        ``<working_directory>/skills``); with a conversation it is always the workspace's
        ``skills/``."""
        return posixpath.join(working_directory, "skills")

    def make_directory_unwritable(self, runtime: SkillRuntime, path: str) -> Callable[[], None]:
        """Make the existing runtime directory ``path`` (inside the working directory of
        ``runtime``) one whose entries the runtime's user cannot create, rename or delete, and
        return a function that undoes it. Set ``makes_unwritable_directories`` when implemented.

        Tests often run as root, for whom mode bits are no obstacle: make the directory
        immutable (:func:`~skillruntime.core.testing.immutable_host_directory` on the host
        directory behind ``path``) or mount it read-only, as the backend allows.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement make_directory_unwritable()"
        )

    def conversations_root(self, tmp_path: Path) -> str:
        """The runtime path under which conversations live (default: a host temp directory).

        A remote runtime returns a path inside its sandbox, e.g. ``/workspace/conversations``;
        conversation ids are unique per test, so the root may be shared between tests. Without
        a conversation the kit's working directories are made under it the same way.
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
