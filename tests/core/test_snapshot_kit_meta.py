"""Tests of the conformance kit's snapshot contracts themselves (docs/custom-runtime.md).

Each deliberately broken runtime (a proxy of the local runtime through its public SPI) breaks one
thing a snapshot relies on: the kit's tests for it must fail and the other snapshot tests must
still pass. The capability flags remove contracts rather than skip them.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import SNAPSHOT_CAPABILITY_TESTS, SnapshotConformance
from skillruntime.core.testing.snapshot_contracts import _build_script, _parse_tree, _tree_script
from skillruntime.local import LocalSkillRuntime
from workspace_snapshots import CountingRuntime, tree


class _CorruptingFileSystem:
    """Uploads every file with one byte more: what a lossy transport would do."""

    def __init__(self, inner: Any, scratch: Path) -> None:
        self._inner = inner
        self._scratch = scratch

    def upload_files(self, files: Iterable[tuple[Path, str, bool]]) -> int:
        altered = []
        for index, (local, remote, executable) in enumerate(files):
            copy = self._scratch / f"upload-{index}"
            shutil.copyfile(local, copy)
            with open(copy, "ab") as handle:
                handle.write(b"!")
            altered.append((copy, remote, executable))
        return int(self._inner.upload_files(altered))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _CorruptingUploads(CountingRuntime):
    def __init__(self, inner: Any, scratch: Path) -> None:
        super().__init__(inner)
        self._scratch = scratch

    def get_file_system(self) -> Any:
        return _CorruptingFileSystem(self.inner.get_file_system(), self._scratch)

    def close(self) -> None:
        self.inner.close()


class _Suite(SnapshotConformance):
    broken: ClassVar[str] = ""

    def make_snapshot_runtime(
        self, *, conversation_id: str, conversations_root: str
    ) -> SkillRuntime:
        if self.broken == "shared-workspace":
            # every conversation id lands in one workspace: no fresh sandbox
            conversation_id = "shared"
        runtime = LocalSkillRuntime(
            conversation_id=conversation_id, conversations_root=conversations_root
        )
        if self.broken == "corrupting-uploads":
            scratch = Path(conversations_root).parent / f"scratch-{conversation_id}"
            scratch.mkdir(parents=True, exist_ok=True)
            return _CorruptingUploads(runtime, scratch)  # type: ignore[return-value]
        return runtime


BROKEN: dict[str, set[str]] = {
    "corrupting-uploads": {
        "test_restore_after_changes_gives_the_snapshot_byte_for_byte",
        "test_restore_into_a_fresh_conversation_workspace",
        "test_skills_are_neither_stored_nor_touched",
    },
    "shared-workspace": {"test_restore_into_a_fresh_conversation_workspace"},
}


def _outcome(suite: SnapshotConformance, name: str, tmp_path: Path) -> str:
    with suite.open_snapshot_world(tmp_path) as world:
        try:
            getattr(suite, name)(world)
        except (AssertionError, pytest.fail.Exception):
            return "failed"
    return "passed"


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_kit_fails_exactly_the_broken_contracts(
    broken: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    suite = type(f"Suite_{broken}", (_Suite,), {"broken": broken})()
    outcomes = {
        name: _outcome(suite, name, tmp_path_factory.mktemp(name[5:40]))
        for name in suite.contract_names
    }
    assert {name for name, outcome in outcomes.items() if outcome == "failed"} == BROKEN[broken]
    assert set(outcomes.values()) <= {"passed", "failed"}


def test_kit_has_the_six_contracts() -> None:
    class Full(_Suite):
        pass

    assert len(Full.contract_names) == 6


def test_capability_tests_are_removed_not_skipped_when_the_flag_is_off() -> None:
    class WithoutLinks(_Suite):
        snapshot_symlinks = False

    for name in SNAPSHOT_CAPABILITY_TESTS:
        assert name not in WithoutLinks.contract_names
        assert getattr(WithoutLinks, name) is None
    assert len(WithoutLinks.contract_names) == 5


def test_without_capabilities_the_workspace_leaves_those_entries_out() -> None:
    class Plain(_Suite):
        snapshot_symlinks = False
        snapshot_newline_names = False
        snapshot_non_utf8_names = False

    paths = [node.path for node in Plain()._original()]
    assert not [path for path in paths if b"\n" in path or not path.isascii()]
    assert {node.kind for node in Plain()._original()} == {"file", "directory"}


def test_the_kits_view_of_a_workspace_is_byte_exact(tmp_path: Path) -> None:
    """What the kit builds and reads in the sandbox is what the host file system holds."""
    root = tmp_path / "conversations"
    with LocalSkillRuntime(conversation_id="view", conversations_root=root) as runtime:
        nodes = _Suite()._original()
        built = runtime.execute(_request(_build_script(nodes)))
        assert built.ok, built.stderr
        listed = runtime.execute(_request(_tree_script(runtime.default_working_directory)))
        assert listed.ok, listed.stderr
    seen = _parse_tree(listed.stdout)
    host = tree(root / "view", skip=())
    kinds = {"file": "file", "dir": "directory", "link": "symlink"}
    assert {
        path: (kinds[kind], mode, content if content is not None else b"")
        for path, (kind, mode, content) in host.items()
    } == seen
    assert seen[b"src/deep/private"] == ("file", 0o600, b"\x00\x01binary\xff\n")
    assert seen[b"src/run.sh"][1] == 0o755
    assert seen[b"latest"] == ("symlink", 0, b"src/main.py")


def _request(command: str) -> SkillExecutionRequest:
    return SkillExecutionRequest(command=command, max_output_bytes=16 * 1024 * 1024)
