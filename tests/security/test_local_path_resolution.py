"""Generated symbolic-link layouts: the local file API follows links inside a workspace exactly as
the kernel does and never reaches outside it."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from skillruntime.core.errors import (
    InvalidPathError,
    RuntimeFileError,
    SkillRuntimeError,
    WorkspaceEscapeError,
)
from skillruntime.local import LocalSkillRuntime

NAMES = ["a", "b", "l1", "l2", "l3", "f"]
relative_targets = st.lists(st.sampled_from([*NAMES, "..", "."]), min_size=1, max_size=4).map(
    "/".join
)
link_specs = st.lists(
    st.tuples(
        st.sampled_from(["l1", "a/l2", "a/b/l3", "l2", "a/l1"]),
        st.sampled_from(["relative", "inside", "outside"]),
        relative_targets,
    ),
    max_size=4,
    unique_by=lambda spec: spec[0],
)
queries = st.lists(st.sampled_from([*NAMES, ".."]), min_size=1, max_size=5).map("/".join)


@pytest.fixture(scope="module")
def tree() -> Iterator[tuple[LocalSkillRuntime, Path, Path]]:
    with tempfile.TemporaryDirectory() as base:
        outside = Path(base, "outside")
        for directory in ("", "a", "a/b"):
            (outside / directory).mkdir(parents=True, exist_ok=True)
            (outside / directory / "f").write_bytes(b"OUTSIDE " + directory.encode())
        with LocalSkillRuntime(conversation_id="gen", conversations_root=Path(base, "c")) as rt:
            workspace = Path(rt.default_working_directory)
            for directory in ("", "a", "a/b"):
                rt.get_file_system().write_bytes(
                    f"{directory}/f".lstrip("/"), b"in " + directory.encode()
                )
            yield rt, workspace, outside


def _lay_out(workspace: Path, outside: Path, specs: list[tuple[str, str, str]]) -> None:
    keep = {"f", "a", "a/f", "a/b", "a/b/f"}
    for path in sorted(workspace.rglob("*"), reverse=True):  # what earlier examples created
        if str(path.relative_to(workspace)) not in keep:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    prefixes = {"relative": "", "inside": f"{workspace}/", "outside": f"{outside}/"}
    for location, kind, target in specs:
        (workspace / location).symlink_to(prefixes[kind] + target)


def _kernel_read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _inside(path: Path, workspace: Path) -> bool:
    real = os.path.realpath(path)
    return real == str(workspace) or real.startswith(f"{workspace}/")


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(specs=link_specs, query=queries)
# a link to "name/." or "name/" needs a directory: to a file it is not-a-directory
@example(specs=[("l1", "relative", "f/.")], query="l1")
@example(specs=[("a/l2", "inside", "a/f/")], query="a/l2")
def test_reads_match_the_kernel_inside_and_never_reach_outside(
    tree: tuple[LocalSkillRuntime, Path, Path], specs: list[tuple[str, str, str]], query: str
) -> None:
    runtime, workspace, outside = tree
    _lay_out(workspace, outside, specs)
    fs = runtime.get_file_system()
    target = Path(os.path.normpath(workspace / query))  # the workspace normalises lexically
    kernel = _kernel_read(target)
    try:
        ours: bytes | None = fs.read_bytes(query)
    except WorkspaceEscapeError:
        ours = None
        climbs = any(".." in link for _, _, link in specs)
        assert climbs or not _inside(target, workspace) or kernel is None
    except (InvalidPathError, RuntimeFileError):
        ours = None
    if ours is not None:
        assert not ours.startswith(b"OUTSIDE")
        assert ours == kernel
        assert _inside(target, workspace)
    elif kernel is not None and not any(".." in link for _, _, link in specs):
        assert not _inside(target, workspace), "a link inside was not followed"


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(specs=link_specs, query=queries)
def test_writes_never_change_anything_outside(
    tree: tuple[LocalSkillRuntime, Path, Path], specs: list[tuple[str, str, str]], query: str
) -> None:
    runtime, workspace, outside = tree
    _lay_out(workspace, outside, specs)
    before = sorted((p, p.read_bytes() if p.is_file() else b"") for p in outside.rglob("*"))
    with contextlib.suppress(SkillRuntimeError, ValueError):
        runtime.get_file_system().write_bytes(f"{query}/new.txt", b"x")
    after = sorted((p, p.read_bytes() if p.is_file() else b"") for p in outside.rglob("*"))
    assert after == before
