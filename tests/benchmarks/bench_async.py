"""Async runtimes against their baselines, as ratios measured in one run.

    .venv/bin/python tests/benchmarks/bench_async.py [--concurrency 300 500 1000] [--runs 300]

1. ``--concurrency`` concurrent ``execute("sleep 1")`` (300, 500 and 1 000 by default) on the
   native async local runtime against one warm ``execute("sleep 1")`` (the faster of two;
   target ≤ 1.5× at 300), with the peak thread count; beside each, the floor: as many
   ``<shell> -c -- 'sleep 1'`` started with plain ``subprocess.Popen`` from as many threads as
   the runtime's spawn pool and waited for on the loop, no runtime around them; and, at the
   first count, the same load through the thread bridge (``to_async(LocalSkillRuntime())``,
   its default pool).
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
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
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
from skillruntime.local.async_process import SPAWN_THREADS
from skillruntime.local.layout import default_shell
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


async def _floor(count: int) -> float:
    """Seconds of ``count`` concurrent ``<shell> -c -- 'sleep 1'`` with nothing of the runtime:
    ``subprocess.Popen`` (own session, both pipes) on a pool as large as the spawn pool, the exit
    waited for with a pidfd on the loop. What this machine allows at best."""
    loop = asyncio.get_running_loop()
    argv = [default_shell(), "-c", "--", "sleep 1"]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    async def one(pool: ThreadPoolExecutor) -> None:
        process = await loop.run_in_executor(pool, start)
        exited: asyncio.Future[None] = loop.create_future()
        pidfd = os.pidfd_open(process.pid)
        loop.add_reader(pidfd, exited.set_result, None)
        try:
            await exited
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
        process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"the floor's shell exited with {process.returncode}")

    with ThreadPoolExecutor(SPAWN_THREADS) as pool:
        started = time.perf_counter()
        await asyncio.gather(*(one(pool) for _ in range(count)))
        return time.perf_counter() - started


async def bench_concurrency(
    root: Path, counts: Sequence[int], *, bridge: bool = True
) -> tuple[float, list[tuple[int, float, int, float]], tuple[float, int] | None]:
    """Seconds of one warm ``sleep 1`` (the faster of two); for each of ``counts``: the count,
    seconds of as many concurrent ones on the native runtime, its peak threads, and the floor
    (:func:`_floor`); and, with ``bridge``, seconds and peak threads of the first count through
    the thread bridge."""
    figures: list[tuple[int, float, int, float]] = []
    async with AsyncLocalSkillRuntime(work_root=root / "native") as native:
        # The baseline is warm, the faster of two calls: the first call also creates the root
        # and the spawn pool (40-130 ms here), which made the ratio depend on the cold start.
        await native.execute(TRUE)
        one = min([(await _peak_threads(lambda: native.execute(SLEEP)))[0] for _ in range(2)])
        for count in counts:
            many, native_threads = await _concurrent(native, count)
            figures.append((count, many, native_threads, await _floor(count)))
    bridged: tuple[float, int] | None = None
    if bridge:
        async with to_async(LocalSkillRuntime(work_root=root / "bridge")) as runtime:
            bridged = await _concurrent(runtime, counts[0])
    return one, figures, bridged


def _print_concurrency(
    one: float,
    figures: list[tuple[int, float, int, float]],
    bridged: tuple[float, int] | None,
    bridge_count: int,
) -> None:
    print(f"[1] one warm execute('sleep 1')             {one:7.3f} s")
    for count, many, native_threads, floor in figures:
        print(
            f"[1] {count:5d} concurrent, native async local {many:7.3f} s  ratio "
            f"{many / one:5.2f}  peak threads {native_threads:3d}   floor (bare Popen) "
            f"{floor:7.3f} s  ratio {floor / one:5.2f}"
        )
    if bridged is not None:
        bridged_many, bridge_threads = bridged
        print(
            f"[1] {bridge_count:5d} concurrent, to_async(local) bridge {bridged_many:7.3f} s  "
            f"ratio {bridged_many / one:5.2f}  peak threads {bridge_threads}"
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
    counts, runs, remote = ((10,), 10, 5) if quick else ((300, 500, 1000), 300, 200)
    _raise_file_limit()
    with tempfile.TemporaryDirectory(prefix="bench-async-") as scratch:
        root = Path(scratch)
        one, figures, bridged = asyncio.run(bench_concurrency(root, counts))
        sync_median, async_median = asyncio.run(bench_overhead(root, runs))
    rows: list[Row] = []
    for count, many, _threads, floor in figures:
        rows.append(
            Row(
                f"{count} concurrent sleep 1, async local",
                many,
                one,
                target=1.5 if count <= 300 else None,
                note="one warm sleep 1",
            )
        )
        rows.append(
            Row(
                f"{count} concurrent sleep 1, floor (bare Popen)",
                floor,
                one,
                note="one warm sleep 1",
            )
        )
    if bridged is not None:
        rows.append(
            Row(
                f"{counts[0]} concurrent sleep 1, to_async(local)",
                bridged[0],
                one,
                note="one warm sleep 1",
            )
        )
    rows += [
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
    parser.add_argument("--concurrency", type=int, nargs="+", default=[300, 500, 1000])
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
            one, figures, bridged = asyncio.run(bench_concurrency(root, args.concurrency))
            _print_concurrency(one, figures, bridged, args.concurrency[0])
            _print_overhead(*asyncio.run(bench_overhead(root, args.runs)))
    if args.remote > 0:
        for name, driver, seconds, threads, base in bench_remote(args.remote, tuple(args.backends)):
            _row(name, args.remote, driver, seconds, threads, base)


if __name__ == "__main__":
    main()
