"""The Agents SDK sandbox adapter against the runtime it wraps, as ratios measured in one run.

    .venv/bin/python tests/benchmarks/bench_openai_agents.py [--runs 200] [--read-runs 50]

For each backend (the native async local runtime, the OpenSandbox double through the thread
bridge, the AIO double's native async runtime), on one conversation session made by
``SkillRuntimeSandboxClient`` (the SDK's instrumented ``SandboxSession`` wrapper, what ``Runner``
calls):

1. ``session.exec("true")`` against ``runtime.execute("true")`` on the same runtime object,
   interleaved, medians. Target ratio ≤ 1.1.
2. A 1 MiB read: ``(await session.read(path)).read()`` against ``fs.read_bytes(path)`` on the
   runtime's file system, interleaved, medians. Target ratio ≤ 1.1.

Each is measured twice: through the SDK's ``SandboxSession`` wrapper (its own instrumentation
and path normalisation included) and on the adapter's session itself (``session._inner``).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.sandbox.session import SandboxSession
from bench_common import Row
from skillruntime.openai_agents import SkillRuntimeSandboxClient, SkillRuntimeSandboxClientOptions

from doubles.aio import AioDouble
from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.opensandbox import OpenSandboxSkillRuntime

logger = logging.getLogger("bench_openai_agents")

MIB = 1024 * 1024


async def _interleaved(
    runs: int, adapter: Callable[[], Awaitable[Any]], direct: Callable[[], Awaitable[Any]]
) -> tuple[float, float]:
    adapter_times: list[float] = []
    direct_times: list[float] = []
    for _ in range(3):  # warm up both paths
        await adapter()
        await direct()
    for index in range(runs):
        pair = [(adapter, adapter_times), (direct, direct_times)]
        if index % 2:
            pair.reverse()
        for call, times in pair:
            started = time.perf_counter()
            await call()
            times.append(time.perf_counter() - started)
    return statistics.median(adapter_times), statistics.median(direct_times)


async def _measure(name: str, session: SandboxSession, runs: int, read_runs: int) -> list[Row]:
    inner: Any = session._inner
    runtime = inner.runtime
    root = session.state.manifest.root
    true = SkillExecutionRequest(command="true", working_directory=root)
    files = await runtime.get_file_system()
    await session.write(Path("blob.bin"), io.BytesIO(os.urandom(MIB)))
    blob = f"{root}/blob.bin"

    async def adapter_exec() -> None:
        result = await session.exec("true")
        assert result.exit_code == 0

    async def inner_exec() -> None:
        result = await inner.exec("true")
        assert result.exit_code == 0

    async def direct_exec() -> None:
        result = await runtime.execute(true)
        assert result.exit_code == 0

    async def adapter_read() -> None:
        stream = await session.read(Path("blob.bin"))
        try:
            assert len(stream.read()) == MIB
        finally:
            stream.close()

    async def inner_read() -> None:
        stream = await inner.read(Path("blob.bin"))
        try:
            assert len(stream.read()) == MIB
        finally:
            stream.close()

    async def direct_read() -> None:
        assert len(await files.read_bytes(blob, max_bytes=2 * MIB)) == MIB

    rows: list[Row] = []
    for label, adapter, direct, count in (
        ("exec('true')      via SandboxSession", adapter_exec, direct_exec, runs),
        ("exec('true')      adapter session   ", inner_exec, direct_exec, runs),
        ("1 MiB read        via SandboxSession", adapter_read, direct_read, read_runs),
        ("1 MiB read        adapter session   ", inner_read, direct_read, read_runs),
    ):
        through, plain = await _interleaved(count, adapter, direct)
        rows.append(
            Row(
                f"{name}: {' '.join(label.split())}",
                through,
                plain,
                target=1.1,
                note="the same call on the runtime",
            )
        )
    return rows


async def _bench(
    client: SkillRuntimeSandboxClient, name: str, runs: int, read_runs: int
) -> list[Row]:
    options = SkillRuntimeSandboxClientOptions(conversation_id=f"bench-{name}")
    session = await client.create(options=options)
    async with session:
        rows = await _measure(name, session, runs, read_runs)
    await client.delete(session)
    return rows


def measure(runs: int, read_runs: int) -> list[Row]:
    """Every row, on local, the OpenSandbox double and the AIO double."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as scratch:
        local = SkillRuntimeSandboxClient.for_runtime("local", conversations_root=scratch)
        rows += asyncio.run(_bench(local, "local", runs, read_runs))

    with OpenSandboxDouble() as double:
        options = {"domain": double.domain, "api_key": double.api_key}
        client = SkillRuntimeSandboxClient.for_runtime("opensandbox", **options)
        rows += asyncio.run(_bench(client, "opensandbox", runs, read_runs))
        with OpenSandboxSkillRuntime(conversation_id="bench-opensandbox", **options) as runtime:
            runtime.destroy_conversation_sandbox()

    with AioDouble() as aio:
        client = SkillRuntimeSandboxClient.for_runtime("aio", base_url=aio.url, token=aio.token)
        rows += asyncio.run(_bench(client, "aio", runs, read_runs))
    return rows


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``)."""
    return measure(5, 3) if quick else measure(200, 50)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--read-runs", type=int, default=50)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    for row in measure(args.runs, args.read_runs):
        print(
            f"{row.name}: {row.value * 1e3:.2f} ms, runtime {row.baseline * 1e3:.2f} ms, "
            f"ratio {row.ratio:.3f} (target <= 1.1)"
        )


if __name__ == "__main__":
    main()
