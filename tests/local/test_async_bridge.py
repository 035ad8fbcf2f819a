"""The sync/async bridges and ``create_async_runtime``, with the sync local runtime behind them."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillruntime.core.errors import (
    RuntimeClosedError,
    RuntimeFileNotFoundError,
    WorkspaceEscapeError,
)
from skillruntime.core.models import FileInfo, SkillExecutionRequest
from skillruntime.core.plugins import registry as plugins
from skillruntime.core.plugins.registry import (
    RuntimeOptions,
    RuntimeProvider,
    create_async_runtime,
    hookimpl,
    register_plugin,
    reset_plugin_manager,
)
from skillruntime.core.runtime.async_scoped import AsyncScopedFileSystem
from skillruntime.core.runtime.bridge import (
    ThreadedAsyncFileSystem,
    ThreadedAsyncRuntime,
    to_async,
    to_sync,
)
from skillruntime.core.runtime.workspace import ConversationWorkspace
from skillruntime.core.testing import process_is_dead_command
from skillruntime.local import LocalFileSystem, LocalSkillRuntime


def _request(command: str, **kwargs: object) -> SkillExecutionRequest:
    return SkillExecutionRequest(command=command, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def reference(tmp_path: Path) -> LocalSkillRuntime:
    return LocalSkillRuntime(conversation_id="conv", conversations_root=tmp_path / "c")


async def _chunks() -> AsyncIterator[bytes]:
    for part in (b"alpha-", b"beta-", b"gamma"):
        yield part


def test_to_async_runs_commands_and_files_through_the_sync_runtime(
    reference: LocalSkillRuntime,
) -> None:
    async def scenario() -> None:
        async with to_async(reference, max_workers=2) as runtime:
            assert runtime.name == reference.name
            result = await runtime.execute(_request("echo out; echo err >&2; exit 4"))
            assert (result.exit_code, result.stdout, result.stderr) == (4, "out\n", "err\n")
            files = await runtime.get_file_system()
            assert await files.write_stream("a/b.bin", _chunks()) == len(b"alpha-beta-gamma")
            assert await files.read_bytes("a/b.bin") == b"alpha-beta-gamma"
            streamed = [chunk async for chunk in files.read_stream("a/b.bin", 4)]
            assert b"".join(streamed) == b"alpha-beta-gamma"
            assert len(streamed) == 4
            assert [info.name for info in await files.list_files(".")] == ["b.bin"]
            with pytest.raises(RuntimeFileNotFoundError):
                await files.read_text("missing.txt")
        assert reference.closed

    asyncio.run(scenario())


def test_to_async_after_close_raises_closed(reference: LocalSkillRuntime) -> None:
    async def scenario() -> None:
        runtime = to_async(reference)
        await runtime.close()
        await runtime.close()
        with pytest.raises(RuntimeClosedError):
            await runtime.execute(_request("true"))
        with pytest.raises(RuntimeClosedError):
            await runtime.get_file_system()

    asyncio.run(scenario())


def test_cancelling_a_bridged_execute_kills_the_command_tree_through_the_runtime(
    reference: LocalSkillRuntime, tmp_path: Path
) -> None:
    pid_file = tmp_path / "c" / "conv" / "grandchild.pid"

    async def scenario() -> None:
        async with to_async(reference) as runtime:
            command = f"sh -c 'sleep 60 & echo $! > \"{pid_file}\"; wait' & sleep 60"
            task = asyncio.create_task(runtime.execute(_request(command, timeout_seconds=120)))
            while not (pid_file.exists() and pid_file.read_text().strip()):
                await asyncio.sleep(0.02)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            gone = await runtime.execute(_request(process_is_dead_command(str(pid_file))))
            assert gone.stdout == "dead\n"

    asyncio.run(scenario())


def test_without_kill_on_cancel_a_bridged_command_runs_to_its_end(
    reference: LocalSkillRuntime, tmp_path: Path
) -> None:
    marker = tmp_path / "c" / "conv" / "finished"
    gate = tmp_path / "gate"

    async def scenario() -> None:
        async with to_async(reference, kill_on_cancel=False) as runtime:
            command = f"while [ ! -e '{gate}' ]; do sleep 0.02; done; touch '{marker}'"
            task = asyncio.create_task(runtime.execute(_request(command, timeout_seconds=30)))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert not marker.exists()
            gate.touch()
            follow_up = await runtime.execute(
                _request(f"while [ ! -e '{marker}' ]; do sleep 0.02; done; echo seen")
            )
            assert follow_up.stdout == "seen\n"

    asyncio.run(scenario())


def test_to_sync_serves_an_async_runtime_to_several_threads(reference: LocalSkillRuntime) -> None:
    runtime = to_sync(to_async(reference))
    outputs: list[str] = []
    lock = threading.Lock()

    def work(index: int) -> None:
        result = runtime.execute(_request(f"echo {index}"))
        runtime.get_file_system().write_text(f"t{index}.txt", str(index))
        with lock:
            outputs.append(result.stdout.strip())

    threads = [threading.Thread(target=work, args=(index,)) for index in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outputs) == [str(index) for index in range(6)]
    assert runtime.get_file_system().read_text("t3.txt") == "3"
    assert b"".join(runtime.get_file_system().read_stream("t5.txt")) == b"5"
    runtime.close()
    runtime.close()
    with pytest.raises(RuntimeClosedError):
        runtime.execute(_request("true"))
    assert reference.closed


_SEGMENTS = st.lists(
    st.sampled_from(["..", ".", "a", "b", "conv", "c", "", "x..y"]), min_size=1, max_size=8
)


@settings(max_examples=100, deadline=None)
@given(segments=_SEGMENTS, absolute=st.booleans())
def test_async_scoped_paths_never_reach_the_backend_outside_the_workspace(
    segments: list[str], absolute: bool
) -> None:
    workspace = ConversationWorkspace("/srv/c", "conv")
    seen: list[str] = []

    class Recording(LocalFileSystem):
        def stat(self, path: str) -> FileInfo | None:
            seen.append(path)
            return None

    scoped = AsyncScopedFileSystem(
        ThreadedAsyncFileSystem(Recording("/srv/c/conv")), workspace=workspace
    )
    path = ("/" if absolute else "") + "/".join(segments)

    async def attempt() -> None:
        with contextlib.suppress(WorkspaceEscapeError, ValueError):
            await scoped.stat(path)

    asyncio.run(attempt())
    assert all(workspace.contains(item) for item in seen)


class _Options(RuntimeOptions):
    conversation_id: str = "conv"
    conversations_root: str


class _SyncOnly:
    @hookimpl
    def skillruntime_runtimes(self) -> list[RuntimeProvider[_Options]]:
        return [
            RuntimeProvider(
                "sync-only",
                "the sync local runtime, registered without an async class",
                _Options,
                lambda options: LocalSkillRuntime(
                    conversation_id=options.conversation_id,
                    conversations_root=options.conversations_root,
                ),
            )
        ]


@pytest.fixture
def only_registered_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(plugins, "_entry_points", list)
    reset_plugin_manager()
    yield
    reset_plugin_manager()


@pytest.mark.usefixtures("only_registered_plugins")
def test_a_backend_without_an_async_class_is_served_through_the_bridge(tmp_path: Path) -> None:
    register_plugin(_SyncOnly(), "sync-only")

    async def scenario() -> None:
        runtime = create_async_runtime("sync-only", conversations_root=str(tmp_path / "c"))
        assert isinstance(runtime, ThreadedAsyncRuntime)
        async with runtime:
            assert (await runtime.execute(_request("echo bridged"))).stdout == "bridged\n"

    asyncio.run(scenario())


def _bridge_threads() -> int:
    return sum(thread.name.startswith("skillruntime-bridge") for thread in threading.enumerate())


def test_open_bridged_runtimes_hold_no_thread_each(tmp_path: Path) -> None:
    """Many open bridged runtimes (a fleet of async Docker conversations) share the bridge's
    threads: idle open runtimes hold none of their own, so the threads are bounded by the
    calls running at once, not by the runtimes open (issue 48: 2 idle threads a runtime)."""

    async def scenario() -> None:
        before = _bridge_threads()
        runtimes = [
            to_async(LocalSkillRuntime(conversation_id=f"c{index}", conversations_root=tmp_path))
            for index in range(20)
        ]
        try:
            for runtime in runtimes:  # two calls at once on each, one runtime after the other
                results = await asyncio.gather(
                    runtime.execute(_request("true")), runtime.execute(_request("true"))
                )
                assert [result.exit_code for result in results] == [0, 0]
            assert _bridge_threads() <= before + 4  # two at once, a worker not yet idle again
        finally:
            for runtime in runtimes:
                await runtime.close()

    asyncio.run(scenario())


def test_max_workers_still_bounds_the_calls_of_one_runtime(reference: LocalSkillRuntime) -> None:
    async def scenario() -> None:
        async with to_async(reference, max_workers=1) as runtime:
            # each command fails when another one holds the directory at the same time
            command = "mkdir held && sleep 0.1 && rmdir held"
            results = await asyncio.gather(*(runtime.execute(_request(command)) for _ in range(3)))
            assert [result.exit_code for result in results] == [0, 0, 0], results

    asyncio.run(scenario())


def test_the_bound_serves_one_event_loop_after_another(reference: LocalSkillRuntime) -> None:
    """A bridged runtime used by ``asyncio.run`` per request, with more calls than
    ``max_workers`` waiting each time: the bound is kept on every loop (a semaphore bound to
    the first loop would refuse the second)."""
    runtime = to_async(reference, max_workers=1)

    async def burst() -> list[int]:
        command = "mkdir held && sleep 0.05 && rmdir held"
        results = await asyncio.gather(*(runtime.execute(_request(command)) for _ in range(3)))
        return [result.exit_code for result in results]

    assert asyncio.run(burst()) == [0, 0, 0]
    assert asyncio.run(burst()) == [0, 0, 0]
    asyncio.run(runtime.close())
