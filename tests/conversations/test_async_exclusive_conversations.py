"""Exclusive conversations from asyncio: tasks, processes and sync holders take turns with async
runtimes, a killed async holder is taken over, loss is typed, the loop never blocks."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from conversations.conversation_backends import Backend, SqlBackend
from conversations.lease_hammer_worker import MARK
from conversations.test_exclusive_conversations import _overlaps, _spawn
from skillruntime.core.conversations import (
    ConversationStore,
    InMemoryConversationStore,
    storage_key_for,
)
from skillruntime.core.conversations.async_leases import AsyncLeaseKeeper
from skillruntime.core.conversations.exclusive import local_service_key
from skillruntime.core.conversations.leases import (
    ConversationLease,
    LeaseLostError,
    LeaseTimeoutError,
)
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.plugins.registry import create_async_runtime
from skillruntime.core.tools import AsyncSkillTools
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime

KEY = "k" * 64


def _async_runtime(backend: Backend, root: Path, **options: object) -> AsyncLocalSkillRuntime:
    settings: dict[str, object] = {"lease_ttl_seconds": 3.0, "lease_wait_seconds": 1.0}
    settings.update(options)
    return AsyncLocalSkillRuntime(
        conversation_id="conv",
        conversations_root=root,
        conversation_store=backend.open(),
        exclusive=True,
        **settings,  # type: ignore[arg-type]
    )


# ------------------------------------------------------------------------- the keeper


def test_async_keepers_serialise_tasks_and_renew_while_held(backend: Backend) -> None:
    async def scenario() -> tuple[int, int]:
        inside = overlaps = completed = 0

        async def work(index: int) -> None:
            nonlocal inside, overlaps, completed
            keeper = AsyncLeaseKeeper(
                backend.open(), KEY, owner=f"task-{index}", ttl_seconds=3.0, wait_seconds=60
            )
            for _ in range(3):
                async with keeper.hold():
                    inside += 1
                    overlaps += inside > 1
                    await asyncio.sleep(0.02)
                    inside -= 1
                completed += 1

        await asyncio.gather(*(work(index) for index in range(5)))
        # A hold longer than the TTL survives through renewals from the renewer task. As in the
        # threaded keeper's test: the store is used once first, and a renewal may come back
        # 2.25 s late without the lease being lost.
        store = backend.open()
        released = await asyncio.to_thread(store.get_lease, KEY)
        assert released is None or released.owner is None  # every task released it
        keeper = AsyncLeaseKeeper(store, KEY, ttl_seconds=2.5, renew_every_seconds=0.25)
        async with keeper.hold():
            await asyncio.sleep(2.75)
            keeper.check()
            intruder = await asyncio.to_thread(backend.open().acquire_lease, KEY, "intruder", 5)
            assert intruder is None
        return overlaps, completed

    assert asyncio.run(scenario()) == (0, 15)


def test_waiting_for_the_lease_never_blocks_the_loop(backend: Backend) -> None:
    holder = backend.open().acquire_lease(KEY, "holder", 30)
    assert holder is not None

    async def scenario() -> int:
        ticks = 0
        waiting = True

        async def ticker() -> None:
            nonlocal ticks
            while waiting:
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        keeper = AsyncLeaseKeeper(backend.open(), KEY, ttl_seconds=5, wait_seconds=0.5)
        with pytest.raises(LeaseTimeoutError, match="leased by another owner"):
            async with keeper.hold():
                pass
        waiting = False
        await task
        return ticks

    # The ticker ran during the wait: the loop kept turning (sleeps, not blocking calls).
    assert asyncio.run(scenario()) >= 5


def test_async_keeper_reports_a_takeover_as_lost(backend: Backend) -> None:
    store = backend.open()

    async def scenario() -> None:
        # A TTL of ten renewal periods, as in the threaded keeper's test.
        keeper = AsyncLeaseKeeper(
            store, KEY, ttl_seconds=3.0, renew_every_seconds=0.3, wait_seconds=5
        )
        async with keeper.hold():
            lease = keeper.lease
            assert lease is not None
            assert store.release_lease(lease)
            assert store.acquire_lease(KEY, "thief", 30) is not None
            deadline = time.monotonic() + 10
            while keeper.held and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            with pytest.raises(LeaseLostError):
                keeper.check()

    with pytest.raises(LeaseLostError, match="another owner took it over"):
        asyncio.run(scenario())


class _SlowAcquireStore(InMemoryConversationStore):
    """An in-memory store whose acquire answers only once ``proceed`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = threading.Event()
        self.proceed = threading.Event()

    def acquire_lease(
        self, lease_key: str, owner: str, ttl_seconds: float
    ) -> ConversationLease | None:
        self.sent.set()
        self.proceed.wait(30)
        return super().acquire_lease(lease_key, owner, ttl_seconds)


def test_a_hold_cancelled_while_acquiring_releases_what_it_took() -> None:
    store = _SlowAcquireStore()

    async def scenario() -> ConversationLease | None:
        keeper = AsyncLeaseKeeper(store, KEY, ttl_seconds=30, wait_seconds=5)

        async def hold() -> None:
            async with keeper.hold():
                raise AssertionError("the cancelled hold must not run its block")

        task = asyncio.create_task(hold())
        await asyncio.to_thread(store.sent.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        store.proceed.set()  # the request in flight does take the lease...
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            lease = store.get_lease(KEY)
            if lease is not None and lease.expired():
                break
            await asyncio.sleep(0.02)
        return store.get_lease(KEY)

    left = asyncio.run(scenario())
    assert left is not None
    assert left.expired()  # ...and it is released at once, not held for the 30 s TTL


# ------------------------------------------------------------------- async runtimes


@pytest.mark.slow
def test_tasks_of_async_runtimes_and_a_sync_runtime_never_overlap(
    sql_backend: SqlBackend, tmp_path: Path
) -> None:
    rounds, tasks = 3, 6
    errors: list[BaseException] = []

    def sync_holder() -> None:
        try:
            with LocalSkillRuntime(
                conversation_id="shared",
                conversations_root=tmp_path,
                conversation_store=sql_backend.open(),
                exclusive=True,
                lease_ttl_seconds=10.0,  # releases are immediate: only a starved renewer waits
                lease_wait_seconds=120,
            ) as runtime:
                for number in range(rounds):
                    runtime.execute(
                        SkillExecutionRequest(
                            command=MARK.format(i="sync"), environment={"R": str(number)}
                        )
                    )
        except BaseException as error:  # collected and asserted below
            errors.append(error)

    async def task(index: int) -> None:
        async with AsyncLocalSkillRuntime(
            conversation_id="shared",
            conversations_root=tmp_path,
            conversation_store=sql_backend.open(),
            exclusive=True,
            lease_ttl_seconds=10.0,  # releases are immediate: only a starved renewer waits
            lease_wait_seconds=120,
        ) as runtime:
            for number in range(rounds):
                result = await runtime.execute(
                    SkillExecutionRequest(
                        command=MARK.format(i=index), environment={"R": str(number)}
                    )
                )
                assert result.exit_code == 0, result.stderr

    async def scenario() -> None:
        thread = threading.Thread(target=sync_holder)
        thread.start()
        try:
            await asyncio.gather(*(task(index) for index in range(tasks)))
        finally:
            await asyncio.to_thread(thread.join, 240)

    asyncio.run(scenario())
    assert errors == []
    log = (tmp_path / "shared" / "log").read_text().splitlines()
    assert len(log) == 2 * (tasks + 1) * rounds
    assert _overlaps(log) == 0
    assert not (tmp_path / "shared" / "busy").exists()


@pytest.mark.slow
def test_sync_and_async_processes_never_overlap_in_one_conversation(
    sql_backend: SqlBackend, tmp_path: Path
) -> None:
    rounds = 3
    kinds = ["async", "sync"] * 3
    workers = [
        _spawn(sql_backend, tmp_path, index, "hammer", rounds, 3.0, kind)
        for index, kind in enumerate(kinds)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "ready"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        for worker in workers:
            out, err = worker.communicate(timeout=300)
            assert worker.returncode == 0, err
            assert out.strip() == "done"
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    log = (tmp_path / "shared" / "log").read_text().splitlines()
    assert len(log) == 2 * len(kinds) * rounds
    assert _overlaps(log) == 0
    assert not (tmp_path / "shared" / "busy").exists()


@pytest.mark.slow
def test_a_killed_async_holder_is_taken_over_after_its_ttl(
    sql_backend: SqlBackend, tmp_path: Path
) -> None:
    ttl = 2.0
    holder = _spawn(sql_backend, tmp_path, 0, "hold", 0, ttl, "async")
    try:
        assert holder.stdout is not None
        assert holder.stdin is not None
        assert holder.stdout.readline().strip() == "ready"
        holder.stdin.write("go\n")
        holder.stdin.flush()
        line = holder.stdout.readline().split()
        assert line[0] == "holding", line
        token = int(line[1])
        time.sleep(ttl)  # a few renewals by the renewer task happen while the command runs
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    store = sql_backend.open()
    key = storage_key_for(local_service_key(str(tmp_path)), "shared")
    left = store.get_lease(key)
    assert left is not None
    assert left.owner is not None
    assert left.token == token

    async def take_over() -> str:
        async with AsyncLocalSkillRuntime(
            conversation_id="shared",
            conversations_root=tmp_path,
            conversation_store=store,
            exclusive=True,
            lease_ttl_seconds=ttl,
            lease_wait_seconds=60,
        ) as runtime:
            async with runtime.exclusive_session() as lease:
                assert lease is not None
                assert lease.token == token + 1
                result = await runtime.execute(SkillExecutionRequest(command="echo ok"))
            return result.stdout

    assert asyncio.run(take_over()).strip() == "ok"


def test_losing_the_lease_stops_further_async_operations(backend: Backend, tmp_path: Path) -> None:
    store = backend.open()
    key = storage_key_for(local_service_key(str(tmp_path)), "conv")

    async def scenario() -> None:
        async with _async_runtime(backend, tmp_path) as runtime:

            async def run_until_lost() -> None:
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    await runtime.execute(SkillExecutionRequest(command="true"))
                    await asyncio.sleep(0.1)

            async def session_with_takeover() -> None:
                async with runtime.exclusive_session() as lease:
                    assert lease is not None
                    assert store.release_lease(lease)  # another node takes it over meanwhile
                    assert store.acquire_lease(key, "other-node", 30) is not None
                    with pytest.raises(LeaseLostError):
                        await run_until_lost()

            with pytest.raises(LeaseLostError, match="conversation conv was lost"):
                await session_with_takeover()
            # Outside the session the runtime waits for the other node's lease, with a bound.
            files = await runtime.get_file_system()
            with pytest.raises(LeaseTimeoutError):
                await files.write_text("a.txt", "x")

    asyncio.run(scenario())
    assert not (tmp_path / "conv" / "a.txt").exists()


def test_async_exclusive_file_operations_and_records(backend: Backend, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _async_runtime(backend, tmp_path) as runtime:
            assert runtime.exclusive
            files = await runtime.get_file_system()
            await files.write_text("note.txt", "hello")
            assert await files.read_text("note.txt") == "hello"
            assert [chunk async for chunk in files.read_stream("note.txt")] == [b"hello"]
            assert [item.path for item in await files.list_files(".")] == [
                str(tmp_path / "conv" / "note.txt")
            ]

    asyncio.run(scenario())
    key = storage_key_for(local_service_key(str(tmp_path)), "conv")
    record = backend.open().get(key)
    assert record is not None
    assert record.runtime == "local"
    assert record.workspace_root == str(tmp_path)
    lease = backend.open().get_lease(key)
    assert lease is not None
    assert lease.expired()


def test_a_sync_session_keeps_an_async_runtime_out(backend: Backend, tmp_path: Path) -> None:
    with LocalSkillRuntime(
        conversation_id="conv",
        conversations_root=tmp_path,
        conversation_store=backend.open(),
        exclusive=True,
        lease_ttl_seconds=3.0,
    ) as sync_runtime:
        with sync_runtime.exclusive_session():

            async def blocked() -> None:
                async with _async_runtime(backend, tmp_path, lease_wait_seconds=0.3) as runtime:
                    await runtime.execute(SkillExecutionRequest(command="touch late"))

            with pytest.raises(LeaseTimeoutError):
                asyncio.run(blocked())
        assert not (tmp_path / "conv" / "late").exists()

        async def after() -> int:
            async with _async_runtime(backend, tmp_path) as runtime:
                return (
                    await runtime.execute(SkillExecutionRequest(command="touch late"))
                ).exit_code

        assert asyncio.run(after()) == 0
    assert (tmp_path / "conv" / "late").exists()


def test_async_exclusive_needs_a_store_and_the_plugin_passes_the_options(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match="needs a conversation_store"):
        AsyncLocalSkillRuntime(conversation_id="c", conversations_root=tmp_path, exclusive=True)
    with pytest.raises(ValueError, match="need a conversation_id"):
        AsyncLocalSkillRuntime(exclusive=True)
    runtime = create_async_runtime(
        "local",
        conversation_id="c",
        conversations_root=str(tmp_path),
        conversation_store=f"sqlite:///{tmp_path / 'c.db'}",
        exclusive=True,
        lease_ttl_seconds=4.0,
        lease_wait_seconds=2.0,
    )

    async def scenario() -> str:
        assert isinstance(runtime, AsyncLocalSkillRuntime)
        async with runtime:
            assert runtime.exclusive
            async with runtime.exclusive_session() as lease:
                assert lease is not None
                return (await runtime.execute(SkillExecutionRequest(command="echo in"))).stdout

    assert asyncio.run(scenario()) == "in\n"


def test_async_skill_tools_hold_the_lease_per_call(backend: Backend, tmp_path: Path) -> None:
    async def scenario() -> str:
        with pytest.raises(ValueError, match=r"AsyncSkillTools\(exclusive=True\)"):
            AsyncSkillTools(
                AsyncLocalSkillRuntime(conversation_id="c", conversations_root=tmp_path),
                exclusive=True,
            )
        async with _async_runtime(backend, tmp_path) as runtime:
            tools = AsyncSkillTools(runtime, exclusive=True)
            written = await tools.adispatch("write", {"path": "a.txt", "content": "x"})
            assert written.startswith("Successfully created")
            key = storage_key_for(local_service_key(str(tmp_path)), "conv")
            other: ConversationStore = backend.open()
            assert await asyncio.to_thread(other.acquire_lease, key, "other-node", 30) is not None
            return await tools.adispatch("bash", {"command": "echo hi"})

    answer = asyncio.run(scenario())
    assert answer.startswith("Error:")
    assert "leased by another owner" in answer
