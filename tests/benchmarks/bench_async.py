"""Async runtimes against their baselines, as ratios measured in one run.

    .venv/bin/python tests/benchmarks/bench_async.py [--concurrency 500] [--runs 300]

1. ``--concurrency`` concurrent ``execute("sleep 1")`` on the native async local runtime against
   one ``execute("sleep 1")`` (target ≤ 1.5×), with the peak thread count; the same load through
   the thread bridge (``to_async(LocalSkillRuntime())``, its default pool) beside it.
2. ``execute("true")`` on the async local runtime against the sync one, interleaved, medians
   (target ≤ 1.2×).
3. ``--remote`` concurrent ``execute("sleep 1")`` on the AIO and OpenSandbox doubles, each with
   one connection pool: the sync runtime driven by as many threads (the baseline), the sync
   runtime behind the thread bridge driven by asyncio tasks, and the native async runtime
   (AIO: httpx; OpenSandbox: the SDK's async API) driven by asyncio tasks; wall time, ratio to
   the baseline and peak threads. ``--only-remote`` skips parts 1 and 2, ``--backends`` picks
   the doubles of part 3.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import Row

from doubles.aio import AioDouble
from doubles.opensandbox import OpenSandboxDouble
from skillruntime.aio import AioSandboxSkillRuntime, AsyncAioSkillRuntime
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.bridge import to_async
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime

logger = logging.getLogger("bench_async")

SLEEP = SkillExecutionRequest(command="sleep 1")
TRUE = SkillExecutionRequest(command="true")


def _raise_file_limit() -> None:
    """Three descriptors per running command: lift the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def _peak_threads(work: Callable[[], Awaitable[object]]) -> tuple[float, int]:
    """Wall time of ``work()`` and the highest thread count seen while it ran."""
    peak = threading.active_count()
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, threading.active_count())
            await asyncio.sleep(0.01)

    sampler = asyncio.create_task(sample())
    started = time.perf_counter()
    await work()
    elapsed = time.perf_counter() - started
    done.set()
    await sampler
    return elapsed, peak


async def _concurrent(runtime: AsyncSkillRuntime, count: int) -> tuple[float, int]:
    async def work() -> None:
        results = await asyncio.gather(*(runtime.execute(SLEEP) for _ in range(count)))
        failed = [result for result in results if not result.ok]
        if failed:
            raise RuntimeError(f"{len(failed)} of {count} commands failed")

    return await _peak_threads(work)


async def bench_concurrency(root: Path, count: int) -> tuple[float, float, int, float, int]:
    """Seconds of one ``sleep 1``, of ``count`` concurrent ones on the native runtime (with
    its peak threads) and through the thread bridge (with its peak threads)."""
    async with AsyncLocalSkillRuntime(work_root=root / "native") as native:
        one, _ = await _peak_threads(lambda: native.execute(SLEEP))
        many, native_threads = await _concurrent(native, count)
    async with to_async(LocalSkillRuntime(work_root=root / "bridge")) as bridged:
        bridged_many, bridge_threads = await _concurrent(bridged, count)
    return one, many, native_threads, bridged_many, bridge_threads


def _print_concurrency(
    count: int,
    one: float,
    many: float,
    native_threads: int,
    bridged_many: float,
    bridge_threads: int,
) -> None:
    print(f"[1] one execute('sleep 1')                  {one:7.3f} s")
    print(
        f"[1] {count} concurrent, native async local    {many:7.3f} s  ratio {many / one:5.2f}  "
        f"(target <= 1.5)  peak threads {native_threads}"
    )
    print(
        f"[1] {count} concurrent, to_async(local) bridge {bridged_many:7.3f} s  ratio "
        f"{bridged_many / one:5.2f}  peak threads {bridge_threads}"
    )


async def bench_overhead(root: Path, runs: int) -> tuple[float, float]:
    """Median seconds of ``execute("true")`` on the sync and on the async local runtime."""
    sync_runtime = LocalSkillRuntime(work_root=root / "sync")
    async with AsyncLocalSkillRuntime(work_root=root / "async") as native:
        sync_times: list[float] = []
        async_times: list[float] = []
        for _ in range(20):  # warm up both
            sync_runtime.execute(TRUE)
            await native.execute(TRUE)
        for _ in range(runs):
            started = time.perf_counter()
            sync_runtime.execute(TRUE)
            sync_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            await native.execute(TRUE)
            async_times.append(time.perf_counter() - started)
    sync_runtime.close()
    sync_median = statistics.median(sync_times)
    async_median = statistics.median(async_times)
    return sync_median, async_median


def _print_overhead(sync_median: float, async_median: float) -> None:
    print(f"[2] sync  execute('true') median            {sync_median * 1000:7.3f} ms")
    print(
        f"[2] async execute('true') median            {async_median * 1000:7.3f} ms  ratio "
        f"{async_median / sync_median:5.2f}  (target <= 1.2)"
    )


def _threaded(runtime: SkillRuntime, count: int) -> tuple[float, int]:
    """Wall time and peak threads of ``count`` threads each running one ``sleep 1``."""
    peak = threading.active_count()
    with ThreadPoolExecutor(count) as pool:
        started = time.perf_counter()
        futures = [pool.submit(runtime.execute, SLEEP) for _ in range(count)]
        peak = max(peak, threading.active_count())
        results = [future.result() for future in futures]
        elapsed = time.perf_counter() - started
    if not all(result.ok for result in results):
        raise RuntimeError("a command failed")
    return elapsed, peak


async def _bridged(runtime: SkillRuntime, count: int) -> tuple[float, int]:
    async with to_async(runtime, max_workers=count) as bridged:
        await bridged.execute(TRUE)
        return await _concurrent(bridged, count)


async def _native(make: Callable[[], AsyncSkillRuntime], count: int) -> tuple[float, int]:
    async with make() as native:
        await native.execute(TRUE)
        return await _concurrent(native, count)


def _row(name: str, count: int, label: str, seconds: float, threads: int, base: float) -> None:
    print(
        f"[3] {name:11s} {count} concurrent, {label:24s} {seconds:6.3f} s  "
        f"ratio {seconds / base:5.2f}  peak threads {threads}"
    )


def bench_remote(
    count: int, backends: tuple[str, ...] = ("aio", "opensandbox")
) -> list[tuple[str, str, float, int, float]]:
    """(runtime, driver, seconds, peak threads, baseline seconds) of ``count`` concurrent
    ``sleep 1`` on the remote doubles; the baseline is the sync runtime driven by threads."""
    figures: list[tuple[str, str, float, int, float]] = []
    with AioDouble() as aio, OpenSandboxDouble() as opensandbox:
        makers: dict[str, Callable[[], SkillRuntime]] = {
            "aio": lambda: AioSandboxSkillRuntime(base_url=aio.url, token=aio.token),
            "opensandbox": lambda: OpenSandboxSkillRuntime(
                domain=opensandbox.domain, api_key=opensandbox.api_key
            ),
        }
        natives: dict[str, Callable[[], AsyncSkillRuntime]] = {
            "aio": lambda: AsyncAioSkillRuntime(base_url=aio.url, token=aio.token),
            "opensandbox": lambda: AsyncOpenSandboxSkillRuntime(
                domain=opensandbox.domain, api_key=opensandbox.api_key
            ),
        }
        for name, make in makers.items():
            if name not in backends:
                continue
            with make() as sync_runtime:
                sync_runtime.execute(TRUE)
                sync_s, sync_threads = _threaded(sync_runtime, count)
            figures.append((name, f"sync, {count} threads", sync_s, sync_threads, sync_s))
            bridge_s, bridge_threads = asyncio.run(_bridged(make(), count))
            figures.append((name, "async, thread bridge", bridge_s, bridge_threads, sync_s))
            native = natives.get(name)
            if native is not None:
                native_s, native_threads = asyncio.run(_native(native, count))
                figures.append((name, "async, native", native_s, native_threads, sync_s))
    return figures


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``)."""
    concurrency, runs, remote = (10, 10, 5) if quick else (500, 300, 200)
    _raise_file_limit()
    with tempfile.TemporaryDirectory(prefix="bench-async-") as scratch:
        root = Path(scratch)
        one, many, _threads, bridged_many, _bridge_threads = asyncio.run(
            bench_concurrency(root, concurrency)
        )
        sync_median, async_median = asyncio.run(bench_overhead(root, runs))
    rows = [
        Row(
            f"{concurrency} concurrent sleep 1, async local",
            many,
            one,
            target=1.5,
            note="one sleep 1",
        ),
        Row(
            f"{concurrency} concurrent sleep 1, to_async(local)",
            bridged_many,
            one,
            note="one sleep 1",
        ),
        Row(
            "async local execute('true')",
            async_median,
            sync_median,
            target=1.2,
            note="sync local execute('true')",
        ),
    ]
    for name, driver, seconds, _peak, base in bench_remote(remote):
        if not driver.startswith("sync"):
            rows.append(
                Row(
                    f"{name} {remote} concurrent sleep 1, {driver}",
                    seconds,
                    base,
                    note="sync runtime, one thread each",
                )
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=500)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--remote", type=int, default=200)
    parser.add_argument("--only-remote", action="store_true")
    parser.add_argument("--backends", nargs="+", default=["aio", "opensandbox"])
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    _raise_file_limit()
    if not args.only_remote:
        with tempfile.TemporaryDirectory(prefix="bench-async-") as scratch:
            root = Path(scratch)
            _print_concurrency(
                args.concurrency, *asyncio.run(bench_concurrency(root, args.concurrency))
            )
            _print_overhead(*asyncio.run(bench_overhead(root, args.runs)))
    if args.remote > 0:
        for name, driver, seconds, threads, base in bench_remote(args.remote, tuple(args.backends)):
            _row(name, args.remote, driver, seconds, threads, base)


if __name__ == "__main__":
    main()
