"""Hostile paths end in the project's own errors with a clear message, never a bare
``RuntimeError`` (symlink loop), ``RecursionError`` (a path tens of thousands of components deep),
``UnicodeEncodeError`` (a lone surrogate) or a raw ``OSError`` (a ZIP member name too long to
extract)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "artifacts"))
from artifact_helpers import build_zip, skill_md

from skillruntime.core.artifacts import (
    PackageRejectedError,
    SkillArtifact,
    SkillPackage,
    ZipSkillArtifactStore,
)
from skillruntime.core.errors import InvalidPathError
from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.runtime.workspace import (
    ConversationWorkspace,
    local_real_path_checker,
)
from skillruntime.core.tools import SkillTools
from skillruntime.local import LocalFileSystem, LocalSkillRuntime

segment = st.text(alphabet="abcxyz0123456789_-.", min_size=1, max_size=8).filter(
    lambda s: s not in (".", "..")
)


def _operations(fs: SkillRuntimeFileSystem, path: str) -> list[Callable[[], object]]:
    """Operations that must resolve ``path`` itself (a write of a final link replaces the link,
    so it is not among them)."""
    return [
        lambda: fs.read_bytes(path),
        lambda: fs.write_bytes(f"{path}/below", b"x"),
        lambda: fs.list_directory(path),
        lambda: fs.make_directory(f"{path}/below"),
        lambda: fs.stat(f"{path}/below"),
    ]


@settings(max_examples=40, deadline=None)
@given(length=st.integers(1, 6), names=st.lists(segment, min_size=6, max_size=6, unique=True))
def test_symlink_loops_are_invalid_paths(length: int, names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as base:
        runtime = LocalSkillRuntime(conversation_id="loops", conversations_root=base)
        workspace = Path(runtime.default_working_directory)
        workspace.mkdir(parents=True)
        ring = names[:length]
        for index, name in enumerate(ring):
            (workspace / name).symlink_to(ring[(index + 1) % length])
        scoped = runtime.get_file_system()
        unconfined = LocalFileSystem(str(workspace))
        for fs in (scoped, unconfined):
            for operation in _operations(fs, ring[0]):
                with pytest.raises(InvalidPathError, match="symbolic links"):
                    operation()
            fs.delete(ring[-1])  # a looping link is still removable
            (workspace / ring[-1]).symlink_to(ring[0])
        with pytest.raises(InvalidPathError):
            runtime.execute(SkillExecutionRequest(command="pwd", working_directory=ring[0]))
        read = SkillTools(runtime).dispatch("read", {"file_path": ring[0]})
        assert read.startswith("Error:")
        checker = local_real_path_checker(ConversationWorkspace(base, "loops"))
        with pytest.raises(InvalidPathError):
            checker(str(workspace / ring[0]))
        runtime.close()


@settings(max_examples=15, deadline=None)
@given(components=st.integers(2_100, 40_000), name=segment)
def test_very_deep_paths_are_invalid_paths(components: int, name: str) -> None:
    path = "/".join([name] * components)
    with tempfile.TemporaryDirectory() as base:
        runtime = LocalSkillRuntime(conversation_id="deep", conversations_root=base)
        for fs in (runtime.get_file_system(), LocalFileSystem(base)):
            operations = [*_operations(fs, path), lambda fs=fs: fs.write_bytes(path, b"x")]
            for operation in operations:
                with pytest.raises(InvalidPathError, match="bytes long") as caught:
                    operation()
                assert len(str(caught.value)) < 300
            with pytest.raises(InvalidPathError):
                fs.delete(path)
        assert os.listdir(base) == ["deep"] or os.listdir(base) == []
        result = SkillTools(runtime).dispatch("write", {"file_path": path, "content": "x"})
        assert result.startswith("Error:")
        runtime.close()


@settings(max_examples=30, deadline=None)
@given(
    prefix=segment,
    # U+DC80..U+DCFF are the file-system encoding's escapes for undecodable bytes: valid paths
    surrogate=st.integers(0xD800, 0xDC7F).map(chr),
)
def test_unencodable_paths_are_invalid_paths(prefix: str, surrogate: str) -> None:
    with tempfile.TemporaryDirectory() as base:
        runtime = LocalSkillRuntime(conversation_id="enc", conversations_root=base)
        path = prefix + surrogate
        for operation in _operations(runtime.get_file_system(), path):
            with pytest.raises(InvalidPathError, match="cannot be encoded"):
                operation()
        runtime.close()


@settings(max_examples=40, deadline=None)
@given(
    segments=st.lists(st.integers(1, 400), min_size=1, max_size=30),
    letter=st.sampled_from("abcé"),
)
def test_long_zip_member_names_are_refused_by_reason(segments: list[int], letter: str) -> None:
    name = "/".join(letter * length for length in segments)
    encoded = len(name.encode())
    longest = max(len((letter * n).encode()) for n in segments)
    data = build_zip([("SKILL.md", skill_md("pdf")), (name, "x")])
    with tempfile.TemporaryDirectory() as base:
        store = ZipSkillArtifactStore(base)
        artifact = SkillArtifact(name="pdf", version="1")
        if encoded > 1024 or longest > 255:
            with pytest.raises(PackageRejectedError) as caught:
                store.install(artifact, SkillPackage.from_bytes(data))
            assert caught.value.reason == "NAME_TOO_LONG"
            assert len(str(caught.value)) < 600
            assert store.list_artifacts() == []
        else:
            installed = store.install(artifact, SkillPackage.from_bytes(data))
            with store.lease(installed) as directory:
                assert (directory / name).read_text() == "x"


def test_a_looping_link_is_described_as_itself(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to("loop")
    fs = LocalFileSystem(str(tmp_path))
    info = fs.stat("loop")
    assert info is not None
    assert not info.is_directory
    assert [entry.name for entry in fs.list_directory(str(tmp_path))] == ["loop"]
