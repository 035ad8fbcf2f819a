"""Symbolic links in SDK snapshots (``persist_workspace``/``hydrate_workspace``), local runtime.

Decision pinned here: a snapshot stores every symbolic link as a link (target verbatim, never
read through), so ``ln -s / x`` by a command no longer makes ``persist_workspace`` fail. Restoring
creates the links last and only those whose target stays inside the workspace; a link leading
outside is skipped with a warning, so a restored link never carries writes outside; members
under a link of the archive, and links over a directory or under a directory that resolves
outside, are refused.
"""

from __future__ import annotations

import io
import logging
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest
from agents.sandbox.errors import WorkspaceArchiveReadError, WorkspaceArchiveWriteError
from agents.sandbox.session import SandboxSession

from openai_agents.test_session_contract import _run
from skillruntime.core.errors import WorkspaceEscapeError
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.local import AsyncLocalSkillRuntime


def _archive(*members: tuple[str, str | bytes]) -> bytes:
    """A tar of ``(name, target)`` links (``str``) and ``(name, content)`` files (``bytes``)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, value in members:
            info = tarfile.TarInfo(name)
            if isinstance(value, str):
                info.type = tarfile.SYMTYPE
                info.linkname = value
                archive.addfile(info)
            else:
                info.size = len(value)
                archive.addfile(info, io.BytesIO(value))
    return buffer.getvalue()


def test_links_are_stored_as_links_and_only_inside_ones_are_restored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def body(session: SandboxSession, workspace: Path) -> None:
        await session.write(Path("keep/a.txt"), io.BytesIO(b"alpha"))
        made = await session.exec(
            "ln -s / x && ln -s keep/a.txt inside && ln -s ../.. up && ln -s keep dir"
            " && ln -s nowhere dangling && ln -s ../a.txt keep/sibling"
        )
        assert made.exit_code == 0
        snapshot = (await session.persist_workspace()).read()
        with tarfile.open(fileobj=io.BytesIO(snapshot)) as listing:
            members = {member.name: member for member in listing.getmembers()}
        links = {name: m.linkname for name, m in members.items() if m.issym()}
        assert links == {
            "x": "/",
            "inside": "keep/a.txt",
            "up": "../..",
            "dir": "keep",
            "dangling": "nowhere",
            "keep/sibling": "../a.txt",
        }
        assert members["keep/a.txt"].isfile()
        assert not any(name.startswith(("x/", "dir/", "up/")) for name in members)

        assert (await session.exec("rm -rf ./* && ls -A")).stdout == b""
        with caplog.at_level(logging.WARNING, logger="skillruntime.openai_agents.sandbox"):
            await session.hydrate_workspace(io.BytesIO(snapshot))
        assert (workspace / "keep/a.txt").read_bytes() == b"alpha"
        assert os.readlink(workspace / "inside") == "keep/a.txt"
        assert os.readlink(workspace / "dir") == "keep"
        assert os.readlink(workspace / "dangling") == "nowhere"
        assert os.readlink(workspace / "keep/sibling") == "../a.txt"
        assert not os.path.lexists(workspace / "x")
        assert not os.path.lexists(workspace / "up")
        skipped = [r.getMessage() for r in caplog.records if "leads outside" in r.getMessage()]
        assert len(skipped) == 2
        assert (await session.read(Path("inside"))).read() == b"alpha"

    _run(tmp_path, body)


def test_a_link_never_carries_the_restore_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()

    async def body(session: SandboxSession, workspace: Path) -> None:
        escapes = [
            _archive(("out", str(outside))),
            _archive(("keep/out", "../../../outside")),
        ]
        for data in escapes:
            await session.hydrate_workspace(io.BytesIO(data))
        assert not os.path.lexists(workspace / "out")
        assert not os.path.lexists(workspace / "keep/out")
        hostile = [
            _archive(("d", "keep"), ("d/f.txt", b"through the link")),
            _archive(("keep/f.txt", b"first"), ("keep", "elsewhere")),
            _archive(("d", "keep"), ("d", b"replace the link")),
        ]
        for data in hostile:
            with pytest.raises(WorkspaceArchiveWriteError):
                await session.hydrate_workspace(io.BytesIO(data))
        assert not os.path.lexists(workspace / "d")

        (workspace / "real").mkdir()
        with pytest.raises(WorkspaceArchiveWriteError):
            await session.hydrate_workspace(io.BytesIO(_archive(("real", "keep"))))
        assert (workspace / "real").is_dir()
        assert not (workspace / "real").is_symlink()

        # A directory of the workspace that a command pointed outside: no link is made there.
        assert (await session.exec(f"ln -s {outside} p")).exit_code == 0
        with pytest.raises((WorkspaceArchiveWriteError, WorkspaceEscapeError)):
            await session.hydrate_workspace(io.BytesIO(_archive(("p/l", "../keep"))))
        assert list(outside.iterdir()) == []

    _run(tmp_path, body)


def test_a_cut_link_listing_fails_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = AsyncLocalSkillRuntime.execute

    async def cut(self: AsyncLocalSkillRuntime, request: SkillExecutionRequest) -> Any:
        result = await original(self, request)
        if request.command.startswith("find . -type l"):
            return result.model_copy(update={"stdout_truncated": True})
        return result

    monkeypatch.setattr(AsyncLocalSkillRuntime, "execute", cut)

    async def body(session: SandboxSession, workspace: Path) -> None:
        assert (await session.exec("ln -s / x")).exit_code == 0
        with pytest.raises(WorkspaceArchiveReadError):
            await session.persist_workspace()

    _run(tmp_path, body)
