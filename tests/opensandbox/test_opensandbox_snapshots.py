"""Workspace snapshots through the OpenSandbox runtime on the protocol double: a round trip, and a
sandbox killed behind the runtime's back whose replacement is restored from the snapshot."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.durability import AsyncWorkspaceSnapshots, WorkspaceSnapshots
from skillruntime.core.durability.common import decode_listing, listing_request
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.snapshots import ListingEntry, LocalSnapshotStore
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime

POPULATE = r"""
set -e
mkdir -p src/deep empty/nested 'odd dir'
printf 'print(1)\n' > src/main.py
printf '#!/bin/sh\necho ran\n' > src/run.sh && chmod 755 src/run.sh
printf 'secret' > src/deep/private && chmod 600 src/deep/private
printf 'nl' > "$(printf 'line\nbreak')"
printf 'tab' > "$(printf 'tab\tname')"
printf 'q' > "odd dir/it's a [quote] *"
printf 'dash' > ./-dash
: > zero.bin
ln -s src/main.py latest
ln -s ../empty src/up
i=0; while [ $i -lt 40 ]; do printf "n$i" > "src/f$i.txt"; i=$((i+1)); done
chmod 750 'odd dir'
"""


@pytest.fixture
def make(opensandbox_double: OpenSandboxDouble) -> Iterator[Any]:
    store = InMemoryConversationStore()
    made: list[OpenSandboxSkillRuntime] = []

    def factory(conversation: str) -> OpenSandboxSkillRuntime:
        runtime = OpenSandboxSkillRuntime(
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            conversation_id=conversation,
            conversation_store=store,
        )
        made.append(runtime)
        return runtime

    yield factory
    for runtime in made:
        with contextlib.suppress(Exception):
            runtime.close()
        with contextlib.suppress(Exception):
            runtime.destroy_conversation_sandbox()


def _listing(runtime: OpenSandboxSkillRuntime) -> list[ListingEntry]:
    result = runtime.execute(listing_request(timeout_seconds=120, max_output_bytes=1 << 24))
    return [e for e in decode_listing(result, max_entries=100_000) if e.path != "skills"]


def _populate(runtime: OpenSandboxSkillRuntime) -> None:
    result = runtime.execute(SkillExecutionRequest(command=POPULATE))
    assert result.ok, result.stderr


def test_a_round_trip_through_the_opensandbox_runtime(make: Any, tmp_path: Path) -> None:
    conversation = f"os-{uuid.uuid4().hex[:12]}"
    snapshots = WorkspaceSnapshots(LocalSnapshotStore(tmp_path / "snapshots"))
    runtime = make(conversation)
    _populate(runtime)
    before = _listing(runtime)
    result = snapshots.snapshot(runtime, conversation_id=conversation)
    assert result.changed
    runtime.execute(SkillExecutionRequest(command="rm -rf -- ./* && printf x > stray"))
    restored = snapshots.restore(runtime, conversation_id=conversation)
    assert restored.files == len({e.path for e in before if e.kind == "file"})
    assert _listing(runtime) == before
    runtime.execute(SkillExecutionRequest(command="printf changed > src/f7.txt"))
    again = snapshots.snapshot(runtime, conversation_id=conversation)
    assert again.objects_uploaded == 1
    assert again.requests == 1  # the listing brought the changed file back inside its output


def test_a_sandbox_killed_behind_the_back_is_restored_in_its_replacement(
    make: Any, opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    conversation = f"os-{uuid.uuid4().hex[:12]}"
    snapshots = WorkspaceSnapshots(LocalSnapshotStore(tmp_path / "snapshots"))
    runtime = make(conversation)
    _populate(runtime)
    before = _listing(runtime)
    snapshots.snapshot(runtime, conversation_id=conversation)
    old = runtime.sandbox_id
    assert old is not None
    runtime.close()
    assert opensandbox_double.kill_behind_back(old)
    replacement = make(conversation)
    assert _listing(replacement) == []  # the replacement starts empty
    assert replacement.sandbox_id != old
    restored = snapshots.restore(replacement, conversation_id=conversation)
    assert restored.deleted == 0
    assert _listing(replacement) == before


def test_the_async_face_restores_a_killed_sandbox(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    conversation = f"os-{uuid.uuid4().hex[:12]}"
    store = InMemoryConversationStore()
    snapshots = AsyncWorkspaceSnapshots(LocalSnapshotStore(tmp_path / "snapshots"))

    def runtime() -> AsyncOpenSandboxSkillRuntime:
        return AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            conversation_id=conversation,
            conversation_store=store,
        )

    async def listing(rt: AsyncOpenSandboxSkillRuntime) -> list[ListingEntry]:
        result = await rt.execute(listing_request(timeout_seconds=120, max_output_bytes=1 << 24))
        return [e for e in decode_listing(result, max_entries=100_000) if e.path != "skills"]

    async def scenario() -> None:
        async with runtime() as first:
            assert (await first.execute(SkillExecutionRequest(command=POPULATE))).ok
            before = await listing(first)
            taken = await snapshots.snapshot(first, conversation_id=conversation)
            assert taken.changed
            old = first.sandbox_id
        assert old is not None
        assert opensandbox_double.kill_behind_back(old)
        async with runtime() as second:
            assert await listing(second) == []
            await snapshots.restore(second, conversation_id=conversation)
            assert await listing(second) == before
            await second.destroy_conversation_sandbox()

    asyncio.run(scenario())
