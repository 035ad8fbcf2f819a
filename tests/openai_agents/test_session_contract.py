"""The session contract of the SDK, call by call, on the local runtime: what the SDK's tools and
manifest application rely on (exec, read/write streams, ls, mkdir, rm, persist/hydrate, path
confinement, state round trip)."""

from __future__ import annotations

import asyncio
import io
import os
import tarfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from agents.sandbox.errors import (
    ExecTimeoutError,
    InvalidManifestPathError,
    WorkspaceArchiveWriteError,
    WorkspaceReadNotFoundError,
    WorkspaceWriteTypeError,
)
from agents.sandbox.files import EntryKind
from agents.sandbox.manifest import Manifest
from agents.sandbox.session import SandboxSession
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from skillruntime.openai_agents import (
    SPOOL_BYTES,
    SkillRuntimeSandboxClient,
    SkillRuntimeSandboxClientOptions,
    SkillRuntimeSandboxSessionState,
)

Body = Callable[[SandboxSession, Path], Awaitable[None]]


def _client(root: Path) -> SkillRuntimeSandboxClient:
    return SkillRuntimeSandboxClient.for_runtime("local", conversations_root=str(root))


def _run(tmp_path: Path, body: Body, conversation: str = "contract") -> None:
    root = tmp_path / "conversations"
    root.mkdir(exist_ok=True)

    async def main() -> None:
        client = _client(root)
        session = await client.create(
            options=SkillRuntimeSandboxClientOptions(conversation_id=conversation)
        )
        async with session:
            await body(session, root / conversation)
        await client.delete(session)

    asyncio.run(main())


def test_the_manifest_root_is_the_conversation_workspace(tmp_path: Path) -> None:
    async def body(session: SandboxSession, workspace: Path) -> None:
        assert session.state.manifest.root == str(workspace)
        result = await session.exec("pwd")
        assert result.exit_code == 0
        assert result.stdout.decode().strip() == str(workspace)

    _run(tmp_path, body)


def test_exec_reports_exit_codes_quotes_argv_and_times_out(tmp_path: Path) -> None:
    async def body(session: SandboxSession, workspace: Path) -> None:
        failed = await session.exec("echo out; echo err >&2; exit 3")
        assert (failed.exit_code, failed.stdout, failed.stderr) == (3, b"out\n", b"err\n")
        argv = await session.exec("printf", "%s|", "a b", "$(touch pwned)", shell=False)
        assert argv.stdout == b"a b|$(touch pwned)|"
        assert not (workspace / "pwned").exists()
        with pytest.raises(ExecTimeoutError):
            await session.exec("sleep 5", timeout=0.5)

    _run(tmp_path, body)


def test_streams_round_trip_binary_content_and_missing_files_are_typed(tmp_path: Path) -> None:
    payload = os.urandom(3 * 1024 * 1024 + 17)

    async def body(session: SandboxSession, workspace: Path) -> None:
        await session.write(Path("deep/dir/blob.bin"), io.BytesIO(payload))
        assert (workspace / "deep/dir/blob.bin").read_bytes() == payload
        stream = await session.read(Path("deep/dir/blob.bin"))
        try:
            assert stream.read() == payload
        finally:
            stream.close()
        assert await session.read_bounded(Path("deep/dir/blob.bin"), max_bytes=10) == payload[:10]
        large = os.urandom(SPOOL_BYTES + 4096)  # beyond the in-memory limit: spilled to disk
        await session.write(Path("large.bin"), io.BytesIO(large))
        spilled = await session.read(Path("large.bin"))
        try:
            assert not isinstance(spilled, io.BytesIO)
            assert spilled.read() == large
        finally:
            spilled.close()
        with pytest.raises(WorkspaceReadNotFoundError):
            await session.read(Path("missing.txt"))
        with pytest.raises(WorkspaceWriteTypeError):
            await session.write(Path("text.txt"), io.StringIO("not bytes"))

    _run(tmp_path, body)


def test_ls_mkdir_and_rm_follow_the_shell_semantics(tmp_path: Path) -> None:
    async def body(session: SandboxSession, workspace: Path) -> None:
        with pytest.raises(WorkspaceArchiveWriteError):
            await session.mkdir("a/b")  # no parent, no parents=True
        await session.mkdir("a/b", parents=True)
        await session.mkdir("a/b", parents=True)  # existing directory with parents: fine
        with pytest.raises(WorkspaceArchiveWriteError):
            await session.mkdir("a/b")
        await session.write(Path("a/file.txt"), io.BytesIO(b"12345"))
        entries = {Path(e.path).name: e for e in await session.ls("a")}
        assert entries["b"].kind is EntryKind.DIRECTORY
        assert entries["file.txt"].kind is EntryKind.FILE
        assert entries["file.txt"].size == 5
        with pytest.raises(WorkspaceArchiveWriteError):
            await session.rm("a")  # not empty, not recursive
        with pytest.raises(WorkspaceReadNotFoundError):
            await session.rm("nothing")
        await session.rm("nothing", recursive=True)
        await session.rm("a", recursive=True)
        assert not (workspace / "a").exists()
        with pytest.raises(WorkspaceArchiveWriteError):
            await session.rm(str(workspace), recursive=True)  # never the workspace root

    _run(tmp_path, body)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.sampled_from(["..", "x", "/", "etc", "."]), min_size=1, max_size=6).map("/".join)
)
def test_paths_leaving_the_workspace_are_refused_before_any_call(tmp_path: Path, path: str) -> None:
    async def body(session: SandboxSession, workspace: Path) -> None:
        resolved = os.path.normpath(path if path.startswith("/") else f"{workspace}/{path}")
        inside = resolved == str(workspace) or resolved.startswith(f"{workspace}/")
        if inside:
            return
        with pytest.raises(InvalidManifestPathError):
            await session.write(Path(path), io.BytesIO(b"x"))
        with pytest.raises(InvalidManifestPathError):
            await session.read(Path(path))
        with pytest.raises(InvalidManifestPathError):
            await session.rm(path, recursive=True)

    _run(tmp_path, body)


def test_file_operations_refuse_another_user(tmp_path: Path) -> None:
    async def body(session: SandboxSession, workspace: Path) -> None:
        with pytest.raises(ValueError, match="own user"):
            await session.read(Path("x"), user="root")

    _run(tmp_path, body)


def test_persist_and_hydrate_round_trip_and_hostile_archives_fail_closed(tmp_path: Path) -> None:
    async def body(session: SandboxSession, workspace: Path) -> None:
        await session.write(Path("keep/a.txt"), io.BytesIO(b"alpha"))
        (workspace / "keep" / "run.sh").write_text("#!/bin/sh\n")
        (workspace / "keep" / "run.sh").chmod(0o755)
        archive = await session.persist_workspace()
        data = archive.read()
        with tarfile.open(fileobj=io.BytesIO(data)) as listing:
            names = listing.getnames()
        assert "keep/a.txt" in names
        assert all(not n.startswith("/") for n in names)
        await session.rm("keep", recursive=True)
        await session.hydrate_workspace(io.BytesIO(data))
        assert (workspace / "keep/a.txt").read_bytes() == b"alpha"
        assert os.access(workspace / "keep/run.sh", os.X_OK)

        hard_link = _link("keep/hard", tarfile.LNKTYPE)
        for member in (_member("../escape.txt"), _member("/etc/evil"), hard_link):
            with pytest.raises((WorkspaceArchiveWriteError, InvalidManifestPathError)):
                await session.hydrate_workspace(io.BytesIO(member))
        # A symbolic link leading outside is skipped, never created (test_snapshot_links.py).
        await session.hydrate_workspace(io.BytesIO(_link("keep/link")))
        assert not (workspace.parent / "escape.txt").exists()
        assert not os.path.lexists(workspace / "keep/link")
        assert not os.path.lexists(workspace / "keep/hard")

    _run(tmp_path, body)


def _member(name: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    return buffer.getvalue()


def _link(name: str, kind: bytes = tarfile.SYMTYPE) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = "/etc/passwd"
        archive.addfile(info)
    return buffer.getvalue()


def test_state_round_trips_and_resume_reopens_the_same_workspace(tmp_path: Path) -> None:
    root = tmp_path / "conversations"
    root.mkdir()

    async def main() -> None:
        client = _client(root)
        session = await client.create(
            options=SkillRuntimeSandboxClientOptions(conversation_id="round-trip")
        )
        async with session:
            await session.write(Path("note.txt"), io.BytesIO(b"kept"))
        payload = client.serialize_session_state(session.state)
        await client.delete(session)

        other = _client(root)  # as on another node
        state = other.deserialize_session_state(dict(payload))
        assert isinstance(state, SkillRuntimeSandboxSessionState)
        assert state.conversation_id == "round-trip"
        resumed = await other.resume(state)
        async with resumed:
            stream = await resumed.read(Path("note.txt"))
            assert stream.read() == b"kept"
        await other.end_conversation(resumed)
        assert list((root / "round-trip").iterdir()) == []

    asyncio.run(main())


def test_a_manifest_with_a_foreign_root_is_refused(tmp_path: Path) -> None:
    async def main() -> None:
        client = _client(tmp_path)
        with pytest.raises(ValueError, match=r"manifest\.root"):
            await client.create(manifest=Manifest(root="/srv/elsewhere"), options=None)

    asyncio.run(main())


def test_apply_patch_creates_updates_and_deletes_through_the_runtime(tmp_path: Path) -> None:
    async def body(session: SandboxSession, workspace: Path) -> None:
        create = {"type": "create_file", "path": "docs/new.txt", "diff": "+hello\n+world\n"}
        await session.apply_patch(create)
        update = {
            "type": "update_file",
            "path": "docs/new.txt",
            "diff": "@@\n hello\n-world\n+there\n",
        }
        await session.apply_patch(update)
        assert (workspace / "docs/new.txt").read_text().splitlines() == ["hello", "there"]
        await session.apply_patch({"type": "delete_file", "path": "docs/new.txt"})
        assert not (workspace / "docs/new.txt").exists()

    _run(tmp_path, body)


def test_for_runtime_validates_options_when_the_client_is_built() -> None:
    with pytest.raises(ValueError, match="conversation_id"):
        SkillRuntimeSandboxClient.for_runtime("local", conversation_id="x")
    with pytest.raises(Exception, match="no_such_option"):
        SkillRuntimeSandboxClient.for_runtime("local", no_such_option=1)
