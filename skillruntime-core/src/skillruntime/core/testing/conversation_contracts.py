"""Contract 7 (``docs/architecture.md``): conversation workspaces, escapes, isolation and resume."""

from __future__ import annotations

import posixpath
from collections.abc import Callable

import pytest

from ..errors import WorkspaceEscapeError
from ..files.spi import SkillRuntimeFileSystem
from ..models import SkillRuntimeConfig
from ..runtime.spi import SkillRuntime
from .base import ConformanceBase
from .context import ConformanceContext

__all__ = ["ConversationContracts"]


def _escape_attempts(fs: SkillRuntimeFileSystem, target: str) -> list[Callable[[], object]]:
    """Every file operation aimed at ``target`` (a path outside the workspace)."""
    file_path = posixpath.join(target, "kit-escaped.txt")
    return [
        lambda: fs.write_text(file_path, "escaped"),
        lambda: fs.write_bytes(file_path, b"escaped"),
        lambda: fs.read_text(file_path),
        lambda: fs.read_bytes(file_path),
        lambda: fs.stat(file_path),
        lambda: fs.exists(file_path),
        lambda: fs.list_directory(target),
        lambda: fs.list_files(target),
        lambda: fs.make_directory(posixpath.join(target, "kit-escaped-dir")),
        lambda: fs.delete(file_path),
        lambda: fs.read_stream(file_path),
    ]


class ConversationContracts(ConformanceBase):
    """Workspace scoping, escapes refused before any backend call, isolation, resume."""

    def test_relative_paths_resolve_under_the_workspace(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        fs = runtime.get_file_system()
        fs.write_text("notes/today.txt", "relative\n")
        absolute = posixpath.join(conformance.workspace(), "notes/today.txt")
        info = fs.stat("notes/today.txt")
        assert info is not None
        assert info.path == absolute
        assert fs.read_text(absolute) == "relative\n"
        assert fs.read_text("./notes/../notes/today.txt") == "relative\n"
        assert conformance.check_output(runtime, f"cat '{absolute}'") == "relative\n"

    def _assert_refused_up_front(
        self, conformance: ConformanceContext, runtime: SkillRuntime, target: str
    ) -> None:
        counter = self.backend_call_counter(runtime)
        fs = runtime.get_file_system()
        before = counter() if counter else 0
        for attempt in _escape_attempts(fs, target):
            with pytest.raises(WorkspaceEscapeError):
                attempt()
        with pytest.raises(WorkspaceEscapeError):
            conformance.run(runtime, "touch kit-escaped-by-cwd.txt", cwd=target)
        if counter is not None:
            assert counter() == before, "an escaping path reached the backend before refusal"

    def test_dot_dot_escape_is_refused_before_any_backend_call(
        self, conformance: ConformanceContext
    ) -> None:
        victim = conformance.runtime("victim")
        victim.get_file_system().write_text("private.txt", "victim data")
        runtime = conformance.runtime("a")
        self._assert_refused_up_front(
            conformance, runtime, f"../{conformance.conversation_id('victim')}"
        )
        self._assert_refused_up_front(conformance, conformance.runtime("a"), "..")
        fs = victim.get_file_system()
        assert fs.stat("kit-escaped.txt") is None
        assert fs.stat("kit-escaped-dir") is None
        assert fs.stat("kit-escaped-by-cwd.txt") is None
        assert fs.read_text("private.txt") == "victim data"

    def test_absolute_path_outside_is_refused_before_any_backend_call(
        self, conformance: ConformanceContext
    ) -> None:
        victim = conformance.runtime("victim")
        victim.get_file_system().write_text("private.txt", "victim data")
        self._assert_refused_up_front(
            conformance, conformance.runtime("a"), conformance.workspace("victim")
        )
        self._assert_refused_up_front(conformance, conformance.runtime("a"), "/")
        fs = victim.get_file_system()
        assert fs.stat("kit-escaped.txt") is None
        assert fs.read_text("private.txt") == "victim data"

    def test_prefix_sibling_is_not_inside_the_workspace(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime("a")
        sibling = conformance.workspace("a") + "-sibling"
        with pytest.raises(WorkspaceEscapeError):
            runtime.get_file_system().write_text(posixpath.join(sibling, "x.txt"), "x")

    def test_the_workspace_itself_cannot_be_deleted(self, conformance: ConformanceContext) -> None:
        runtime = conformance.runtime()
        fs = runtime.get_file_system()
        fs.write_text("keep.txt", "kept")
        for path in (".", conformance.workspace(), "sub/.."):
            with pytest.raises(WorkspaceEscapeError):
                fs.delete(path)
        assert fs.read_text("keep.txt") == "kept"

    def test_conversations_are_isolated(self, conformance: ConformanceContext) -> None:
        one = conformance.runtime("one")
        two = conformance.runtime("two")
        one.get_file_system().write_text("same-name.txt", "from one")
        two.get_file_system().write_text("same-name.txt", "from two")
        one.get_file_system().write_text("only-one.txt", "x")
        assert one.get_file_system().read_text("same-name.txt") == "from one"
        assert two.get_file_system().read_text("same-name.txt") == "from two"
        assert two.get_file_system().stat("only-one.txt") is None
        assert conformance.check_output(two, "cat same-name.txt") == "from two"
        assert one.default_working_directory != two.default_working_directory

    def test_invalid_conversation_ids_are_rejected(self, conformance: ConformanceContext) -> None:
        for bad in ("..", "../other", "a/b", "", ".hidden", "x" * 129, "has space"):
            with pytest.raises(ValueError, match=r"(?i)conversation"):
                self.make_runtime(
                    conversation_id=bad,
                    conversations_root=conformance.conversations_root,
                    base_environment={},
                )

    def test_resumed_runtime_sees_files_and_keeps_prepared_skills(
        self, conformance: ConformanceContext
    ) -> None:
        skill = conformance.skills.create("resumable")
        log = conformance.log_path("resumable")
        config = SkillRuntimeConfig(
            environment={"KIT_RESUME": "yes"},
            bootstrap=(conformance.skills.counting_bootstrap(log),),
        )
        first = conformance.runtime()
        (prepared,) = conformance.prepare(first, skill, configs={"resumable": config})
        fs = first.get_file_system()
        fs.write_text("conversation-notes.txt", "kept across runtime objects\n")
        fs.write_text(posixpath.join(prepared.base_path, "runtime-made.txt"), "made at runtime")
        first.close()

        second = conformance.runtime()
        fs = second.get_file_system()
        assert fs.read_text("conversation-notes.txt") == "kept across runtime objects\n"
        (resumed,) = conformance.prepare(second, skill, configs={"resumable": config})
        assert resumed.base_path == prepared.base_path
        assert conformance.check_output(second, "printf '%s' \"$KIT_RESUME\"") == "yes"
        if self.resumes_prepared_skills:
            assert conformance.count_lines(second, log) == 1, "bootstrap ran again on resume"
            made = posixpath.join(resumed.base_path, "runtime-made.txt")
            assert fs.stat(made) is not None, "the prepared copy was uploaded again on resume"
        assert fs.read_text(posixpath.join(resumed.base_path, "bootstrap-marker.txt")) == "ready\n"

    def test_symlink_cannot_carry_a_file_operation_out(
        self, conformance: ConformanceContext
    ) -> None:
        victim = conformance.runtime("victim")
        victim.get_file_system().write_text("secret.txt", "victim secret")
        runtime = conformance.runtime("a")
        conformance.check_output(
            runtime,
            f"ln -s '{conformance.workspace('victim')}' link-out && ln -s "
            f"'{conformance.workspace('victim')}/secret.txt' file-link",
        )
        fs = runtime.get_file_system()
        for attempt in (
            lambda: fs.read_text("link-out/secret.txt"),
            lambda: fs.read_text("file-link"),
            lambda: fs.write_text("link-out/planted.txt", "x"),
            lambda: fs.list_directory("link-out"),
        ):
            with pytest.raises(WorkspaceEscapeError):
                attempt()
        with pytest.raises(WorkspaceEscapeError):
            conformance.run(runtime, "pwd", cwd="link-out")
        assert victim.get_file_system().stat("planted.txt") is None
