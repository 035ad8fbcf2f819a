"""Rules of :class:`SkillRuntimeBackend` beyond the peer suite: timeouts, workspace confinement,
edits that stage nothing, the read window against deepagents' own line rules, skill stubs, and
the docs table naming every replaced peer test."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepagents_peer import OVERRIDDEN
from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.deepagents import RuntimeSkills, SkillRuntimeBackend
from skillruntime.deepagents.reading import MAX_OUTPUT_BYTES, LineWindow
from skillruntime.local import LocalSkillRuntime
from skillruntime.local.async_runtime import AsyncLocalSkillRuntime

DOCS = Path(__file__).resolve().parents[2] / "docs" / "deepagents.md"


@pytest.fixture
def local(tmp_path: Path) -> LocalSkillRuntime:
    return LocalSkillRuntime(conversation_id="rules", conversations_root=tmp_path / "c")


def test_every_replaced_peer_test_is_named_in_the_docs_table() -> None:
    text = DOCS.read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(test_[A-Za-z_]+)` \|", text, flags=re.MULTILINE))
    assert rows == set(OVERRIDDEN)


def test_a_timeout_is_reported_plainly_and_keeps_the_output(local: LocalSkillRuntime) -> None:
    with local:
        backend = SkillRuntimeBackend(local)
        result = backend.execute("echo started; sleep 30", timeout=1)
        assert result.exit_code == 124
        assert result.output.startswith("started\n")
        assert result.output.rstrip().endswith("Error: Command timed out after 1 seconds.")
        failed = backend.execute("echo out; echo err >&2; exit 3")
        assert (failed.exit_code, failed.output) == (3, "out\nerr\n")
        with pytest.raises(ValueError, match="negative"):
            backend.execute("true", timeout=-1)


def test_cancelling_a_native_aexecute_stops_the_command(
    local: LocalSkillRuntime, tmp_path: Path
) -> None:
    marker = tmp_path / "finished"
    with local:
        async_runtime = AsyncLocalSkillRuntime(
            conversation_id="rules", conversations_root=tmp_path / "c"
        )
        backend = SkillRuntimeBackend(local, async_runtime=async_runtime)

        async def scenario() -> None:
            task = asyncio.create_task(backend.aexecute(f"sleep 2 && touch {marker}"))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.sleep(2.5)

        asyncio.run(scenario())
        assert not marker.exists()


hostile_paths = st.one_of(
    st.sampled_from(["/etc/passwd", "/", "/tmp", "relative.txt", "../x", "/a/\0b", ""]),
    st.text(min_size=1, max_size=40).map(lambda s: "/" + s.replace("/", "")),
    st.text(max_size=40).map(lambda s: s.lstrip("/")),
)


@settings(max_examples=60, deadline=None)
@given(path=hostile_paths)
def test_paths_outside_the_workspace_are_refused_by_every_operation(
    tmp_path_factory: pytest.TempPathFactory, path: str
) -> None:
    root = tmp_path_factory.mktemp("conf")
    with LocalSkillRuntime(conversation_id="jail", conversations_root=root) as runtime:
        workspace = runtime.default_working_directory
        if path.startswith(workspace + "/"):
            return
        backend = SkillRuntimeBackend(runtime)
        assert backend.upload_files([(path, b"x")])[0].error == "invalid_path"
        assert backend.download_files([path])[0].error == "invalid_path"
        assert backend.write(path, "x").error is not None
        assert backend.read(path).file_data is None
        assert backend.edit(path, "a", "b").error is not None
        assert backend.ls(path).entries is None
        assert backend.delete(path).error is not None
        if path:  # an empty search path means the default root (the workspace)
            assert backend.glob("*", path=path).matches is None
            assert backend.grep("x", path=path).matches is None
    assert not any(p.name == "x" for p in root.rglob("*"))


def test_a_large_edit_stages_nothing_anywhere(tmp_path: Path) -> None:
    with (
        AioDouble() as double,
        AioSandboxSkillRuntime(
            base_url=double.url, token=double.token, conversation_id="edit"
        ) as runtime,
    ):
        backend = SkillRuntimeBackend(runtime)
        path = f"{runtime.default_working_directory}/big.txt"
        old = "a" * 60_000  # above deepagents' 50 000-byte inline limit (it stages in /tmp)
        assert backend.write(path, f"head\n{old}\ntail\n").error is None
        tmp_before = sorted(p.name for p in double.tmp.iterdir())
        workspace = double.host_path(runtime.default_working_directory)
        files_before = sorted(p.name for p in workspace.rglob("*"))
        result = backend.edit(path, old, "b" * 70_000)
        assert (result.error, result.occurrences) == (None, 1)
        assert sorted(p.name for p in double.tmp.iterdir()) == tmp_before
        assert sorted(p.name for p in workspace.rglob("*")) == files_before
        assert backend.download_files([path])[0].content == f"head\n{'b' * 70_000}\ntail\n".encode()


def _reference_page(text: str, offset: int, limit: int) -> list[str]:
    """deepagents' line rules: universal newlines, the ending dropped (``readline`` walk)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines[offset : offset + limit]


@settings(max_examples=200, deadline=None)
@given(
    text=st.lists(st.sampled_from(["a", "é", "😀", "\n", "\r", "\r\n", " "]), max_size=60).map(
        "".join
    ),
    offset=st.integers(min_value=0, max_value=12),
    limit=st.integers(min_value=1, max_value=12),
    chunk=st.integers(min_value=1, max_value=7),
)
def test_the_read_window_matches_deepagents_line_rules(
    text: str, offset: int, limit: int, chunk: int
) -> None:
    data = text.encode("utf-8")
    window = LineWindow(offset=offset, limit=limit, size=len(data))
    for start in range(0, len(data), chunk):
        window.feed(data[start : start + chunk])
    window.finish()
    result = window.result("/f")
    expected = _reference_page(text, offset, limit)
    if not expected:
        assert result.error is not None
        assert "exceeds file length" in result.error
        return
    assert result.file_data is not None
    assert result.file_data["content"] == "\n".join(expected)
    assert result.start_line == offset + 1
    assert result.end_line == offset + len(expected)
    total = len(_reference_page(text, 0, 10**6))
    assert result.total_lines == total
    assert result.next_offset == (result.end_line if result.end_line < total else None)


def test_a_page_over_the_output_cap_is_cut_with_the_notice() -> None:
    data = ("x" * 1000 + "\n").encode() * 1000
    window = LineWindow(offset=0, limit=2000, size=len(data))
    window.feed(data)
    window.finish()
    result = window.result("/f")
    assert result.file_data is not None
    assert len(result.file_data["content"].encode()) <= MAX_OUTPUT_BYTES
    assert result.file_data["content"].endswith("smaller limit to inspect the rest of the file.]")
    assert result.next_offset == result.end_line < 1000


def test_skill_entries_are_read_only_and_a_failed_preparation_is_a_read_error(
    local: LocalSkillRuntime, skills_root: Path
) -> None:
    broken = skills_root / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text(
        "---\nname: broken\ndescription: Fails to bootstrap.\nmetadata:\n  skillruntime:\n"
        "    bootstrap:\n      - exit 7\n---\nbody\n"
    )
    with local:
        skills = RuntimeSkills([skills_root / "text-stats", broken])
        backend = SkillRuntimeBackend(local, skills=skills)
        (source,) = backend.skill_sources
        entry = f"{source}/text-stats/SKILL.md"
        listed = backend.ls(source)
        assert sorted(e["path"] for e in listed.entries or []) == [
            f"{source}/broken",
            f"{source}/text-stats",
        ]
        assert "Read this file" in (backend.download_files([entry])[0].content or b"").decode()
        assert skills.prepared("text-stats") is None  # listing and downloads prepare nothing
        assert backend.write(entry, "x").error is not None
        assert backend.upload_files([(entry, b"x")])[0].error == "permission_denied"
        assert backend.edit(entry, "Read", "Skip").error is not None
        failed = backend.read(f"{source}/broken/SKILL.md")
        assert failed.error is not None
        assert "could not be prepared" in failed.error
        assert skills.prepared("broken") is None
        page = backend.read(entry, offset=0, limit=3)
        assert page.file_data is not None
        assert page.next_offset == 3
        assert skills.prepared("text-stats") is not None
