"""Subprocess worker for the exclusive-conversation tests.

Usage: python lease_hammer_worker.py URL TABLE ROOT INDEX MODE ROUNDS TTL [KIND]. The worker
opens an exclusive local runtime on conversation ``shared`` under ROOT (KIND ``sync``, the
default, or ``async``: the native async runtime driven by ``asyncio.run``), prints ``ready`` and
waits for ``go`` on stdin. MODE ``hammer`` runs ROUNDS commands that each append
``start``/``end`` markers to ``log`` in the workspace and take ``busy`` with ``mkdir`` (an
overlap makes ``mkdir`` fail and appends ``OVERLAP``), then prints ``done``. MODE ``hold``
prints ``holding <token>`` from inside a command and sleeps until it is killed; MODE ``tick``
does the same with a command that writes its pid to ``orphan.pid`` and then appends ``tick`` to
``ticks`` every 0.1 s until it is killed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, as pytest's pythonpath

from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime

MARK = (
    'echo "start {i}.$R" >> log; '
    "if ! mkdir busy 2>/dev/null; then echo OVERLAP >> log; fi; "
    "sleep 0.01; "
    'rmdir busy 2>/dev/null; echo "end {i}.$R" >> log'
)
TICK = "echo $$ > orphan.pid; while :; do echo tick >> ticks; sleep 0.1; done"


def main() -> None:
    url, table, root, index, mode = sys.argv[1:6]
    rounds, ttl = int(sys.argv[6]), float(sys.argv[7])
    if len(sys.argv) > 8 and sys.argv[8] == "async":
        asyncio.run(main_async(url, table, root, index, mode, rounds, ttl))
        return
    store = SqlConversationStore(url, table_name=table)
    runtime = LocalSkillRuntime(
        conversation_id="shared",
        conversations_root=root,
        conversation_store=store,
        exclusive=True,
        lease_ttl_seconds=ttl,
        lease_wait_seconds=120,
    )
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("never told to go")
    with runtime, store:
        if mode == "hammer":
            for number in range(rounds):
                result = runtime.execute(
                    SkillExecutionRequest(
                        command=MARK.format(i=index), environment={"R": str(number)}
                    )
                )
                if result.exit_code != 0:
                    raise SystemExit(f"command failed: {result.stderr}")
            print("done", flush=True)
            return
        with runtime.exclusive_session() as lease:
            assert lease is not None
            print(f"holding {lease.token}", flush=True)
            command = TICK if mode == "tick" else "sleep 120"
            runtime.execute(SkillExecutionRequest(command=command, timeout_seconds=300))


async def main_async(
    url: str, table: str, root: str, index: str, mode: str, rounds: int, ttl: float
) -> None:
    store = SqlConversationStore(url, table_name=table)
    runtime = AsyncLocalSkillRuntime(
        conversation_id="shared",
        conversations_root=root,
        conversation_store=store,
        exclusive=True,
        lease_ttl_seconds=ttl,
        lease_wait_seconds=120,
    )
    print("ready", flush=True)
    if (await asyncio.to_thread(sys.stdin.readline)).strip() != "go":
        raise SystemExit("never told to go")
    with store:
        async with runtime:
            if mode == "hammer":
                for number in range(rounds):
                    result = await runtime.execute(
                        SkillExecutionRequest(
                            command=MARK.format(i=index), environment={"R": str(number)}
                        )
                    )
                    if result.exit_code != 0:
                        raise SystemExit(f"command failed: {result.stderr}")
                print("done", flush=True)
                return
            async with runtime.exclusive_session() as lease:
                assert lease is not None
                print(f"holding {lease.token}", flush=True)
                command = TICK if mode == "tick" else "sleep 120"
                await runtime.execute(SkillExecutionRequest(command=command, timeout_seconds=300))


if __name__ == "__main__":
    main()
