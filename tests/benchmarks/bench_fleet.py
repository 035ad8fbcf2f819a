"""A fleet on one node: many open conversations in one process, and one MCP server with many
sessions.

Run from the repository root::

    .venv/bin/python tests/benchmarks/bench_fleet.py [--quick] [--only local,docker,mcp]
        [--local N] [--docker N] [--sessions N] [--calls N]

1. **Many conversations** (``local``: 1 000; ``docker``: 200 on the Docker Engine of
   ``bench_docker``). Conversations are opened in steps (1, 100, then all), each one a runtime
   object with :class:`SkillTools` on the example skill ``text-stats``: the skill is loaded (so
   prepared, its bootstrap run), a small file written and ``execute("true")`` run. At each step a
   pool of workers (threads for the sync face, tasks for the async face) uses the open
   conversations round-robin: p50 and p99 of ``execute("true")`` and of a ``read`` tool call,
   given as ratios against the same figures with one conversation open. The idle cost of an open
   conversation is the growth of the process's RSS, of the memory ``tracemalloc`` traces during
   the opening, of its file descriptors (``/proc/self/fd``) and of its threads, divided by the
   conversations opened. The async face opens new runtime objects on the same conversations
   (a resume: the skill is found prepared). After ``close()`` of every runtime the threads and
   descriptors must be back to what they were before the first opening; Docker conversations are
   then destroyed and no container or volume of the run may be left.
2. **One MCP server, many sessions** (``mcp``): ``skillruntime mcp serve`` on the local runtime
   over streamable HTTP, N concurrent client sessions of the SDK (default 200), each running a
   turn of ``--calls`` tool calls (default 20: the skill, its script, write, read, edit, glob,
   grep, then reads and commands). Errors (target 0), p50/p99 per call against one session alone,
   and the server's RSS at the peak and 8 s after every session ended (the server releases free
   memory 6 s after its last session ended, once its connections closed) against its RSS after
   one warm-up session (target: within 10 %).

Rows are ratios against a baseline of the same run, never a wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import os
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import Row

from skillruntime.core.models import SkillExecutionRequest

SKILLS = Path(__file__).resolve().parents[2] / "examples" / "skills"
TRUE = SkillExecutionRequest(command="true")
NOTE = "one line\n" * 20
READ = {"file_path": "notes.txt"}
WORKERS = 4
KIB = 1024

# ------------------------------------------------------------------ process figures


@dataclass(frozen=True)
class Usage:
    """What this process holds at one moment."""

    rss_kib: float
    fds: int
    threads: int
    pool_threads: int  # process-wide pools (spawn, bridge) and the loop's default executor

    @classmethod
    def now(cls) -> Usage:
        gc.collect()
        with open("/proc/self/statm") as statm:
            rss_pages = int(statm.read().split()[1])
        fds = len(os.listdir("/proc/self/fd")) - 1  # the listing's own descriptor
        pools = sum(thread.name.startswith(POOLS) for thread in threading.enumerate())
        return cls(rss_pages * os.sysconf("SC_PAGE_SIZE") / KIB, fds, _os_threads(), pools)

    @property
    def own_threads(self) -> int:
        """Threads outside the process-wide pools."""
        return self.threads - self.pool_threads


POOLS = ("skillruntime-spawn", "skillruntime-bridge", "asyncio_")


def _os_threads(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise RuntimeError("no Threads line")


def _rss_kib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return float(line.split()[1])
    raise RuntimeError("no VmRSS line")


def quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Level:
    """Figures with ``open`` conversations open."""

    open: int
    usage: Usage
    traced_per_conversation: float  # bytes traced per conversation opened in this step
    latency: dict[str, tuple[float, float]] = field(default_factory=dict)  # op -> (p50, p99)


@dataclass
class FleetResult:
    """One face (sync or async) of one runtime."""

    label: str
    before: Usage
    levels: list[Level]
    after_close: Usage
    left: dict[str, int] = field(default_factory=dict)  # containers/volumes left after destroy
    rss_bound: int = 0  # KiB an idle open conversation may add (0: RSS_BOUND_KIB)

    def __post_init__(self) -> None:
        if not self.rss_bound:
            self.rss_bound = (
                DOCKER_RSS_BOUND_KIB if self.label.startswith("docker") else RSS_BOUND_KIB
            )

    def rows(self) -> list[Row]:
        first, last = self.levels[0], self.levels[-1]
        rows: list[Row] = []
        for op in ("execute", "read"):
            for level in self.levels[1:]:
                rows.append(
                    Row(
                        f"{self.label}: {op} p99, {level.open} open",
                        level.latency[op][1],
                        first.latency[op][1],
                        target=2.0 if level is last else None,
                        note=f"p99 with 1 open (p50 {level.latency[op][0] * 1e3:.2f} ms vs "
                        f"{first.latency[op][0] * 1e3:.2f} ms)",
                    )
                )
        grown = last.open - first.open
        rss = max(0.0, last.usage.rss_kib - first.usage.rss_kib) / grown
        traced = statistics.mean(level.traced_per_conversation for level in self.levels[1:])
        rows += [
            Row(
                f"{self.label}: RSS per idle conversation ({last.open} open)",
                rss,
                self.rss_bound,
                unit="KiB",
                target=1.0,
                note=f"bound {self.rss_bound} KiB a conversation",
            ),
            Row(
                f"{self.label}: traced memory per conversation",
                traced / KIB,
                self.rss_bound,
                unit="KiB",
                note=f"tracemalloc while opening; bound {self.rss_bound} KiB",
            ),
            Row(
                f"{self.label}: fds with {last.open} open",
                last.usage.fds,
                first.usage.fds + 2 * WORKERS + FD_BOUND * grown,
                unit="fd",
                target=1.0,
                note=f"fds with 1 open + 2 a worker (a shared client's pool) + {FD_BOUND} a "
                "conversation "
                f"({(last.usage.fds - first.usage.fds) / grown:.3f} measured)",
            ),
            Row(
                f"{self.label}: threads with {last.open} open",
                last.usage.own_threads,
                first.usage.own_threads + THREAD_BOUND * grown,
                unit="thr",
                target=1.0,
                note=f"threads with 1 open + {THREAD_BOUND} a conversation "
                f"({(last.usage.own_threads - first.usage.own_threads) / grown:.3f} measured; "
                f"process-wide pools {first.usage.pool_threads} -> {last.usage.pool_threads})",
            ),
            Row(
                f"{self.label}: fds after close()",
                self.after_close.fds,
                self.before.fds,
                unit="fd",
                target=1.0,
                note="fds before the first opening",
            ),
            Row(
                f"{self.label}: threads after close()",
                self.after_close.own_threads,
                self.before.own_threads,
                unit="thr",
                target=1.0,
                note="threads before the first opening; process-wide pools left out "
                f"({self.after_close.pool_threads} threads after, {self.before.pool_threads} "
                "before)",
            ),
        ]
        for kind, count in self.left.items():
            rows.append(
                Row(
                    f"{self.label}: {kind} left after destroy",
                    count,
                    last.open,
                    unit=kind,
                    target=0.0,
                    note="conversations opened",
                )
            )
        return rows


RSS_BOUND_KIB = 64
"""Idle client memory allowed an open local conversation (KiB; measured 25-51)."""
DOCKER_RSS_BOUND_KIB = 512
"""Idle client memory allowed an open Docker conversation (KiB; measured 100-280: a runtime
object holds its own engine client and container state)."""
FD_BOUND = 0.05
"""File descriptors allowed an open conversation (a shared pool grows by steps)."""
THREAD_BOUND = 0.05
"""Threads allowed an open conversation (none: a shared pool grows by steps)."""

# ------------------------------------------------------------------ sync and async faces


@dataclass
class Conversation:
    runtime: Any
    tools: Any


def _open_sync(make: Callable[[int], Any], index: int) -> Conversation:
    from skillruntime.core.tools import SkillTools

    runtime = make(index)
    tools = SkillTools(runtime, [SKILLS])
    tools.dispatch("skill", {"command": "text-stats"})
    tools.dispatch("write", {"file_path": "notes.txt", "content": NOTE})
    if runtime.execute(TRUE).exit_code != 0:
        raise RuntimeError("execute failed")
    return Conversation(runtime, tools)


async def _open_async(make: Callable[[int], Any], index: int) -> Conversation:
    from skillruntime.core.tools import AsyncSkillTools

    runtime = make(index)
    tools = AsyncSkillTools(runtime, [SKILLS])
    await tools.adispatch("skill", {"command": "text-stats"})
    await tools.adispatch("write", {"file_path": "notes.txt", "content": NOTE})
    if (await runtime.execute(TRUE)).exit_code != 0:
        raise RuntimeError("execute failed")
    return Conversation(runtime, tools)


def _checked_read(answer: str) -> None:
    if "one line" not in answer:
        raise RuntimeError(f"read failed: {answer[:200]}")


def _sync_latency(conversations: list[Conversation], calls: int) -> dict[str, tuple[float, float]]:
    def execute(item: Conversation) -> None:
        if item.runtime.execute(TRUE).exit_code != 0:
            raise RuntimeError("execute failed")

    def read(item: Conversation) -> None:
        _checked_read(item.tools.dispatch("read", READ))

    result: dict[str, tuple[float, float]] = {}
    for name, action in (("execute", execute), ("read", read)):
        counter = itertools.count()
        lock = threading.Lock()
        samples: list[float] = []

        def worker(
            action: Callable[[Conversation], None] = action,
            counter: Iterator[int] = counter,
            lock: threading.Lock = lock,
        ) -> list[float]:
            mine: list[float] = []
            while True:
                with lock:
                    k = next(counter)
                if k >= calls:
                    return mine
                item = conversations[k % len(conversations)]
                start = time.perf_counter()
                action(item)
                mine.append(time.perf_counter() - start)

        with ThreadPoolExecutor(WORKERS) as pool:
            for part in [pool.submit(worker) for _ in range(WORKERS)]:
                samples += part.result()
        result[name] = (quantile(samples, 0.5), quantile(samples, 0.99))
    return result


async def _async_latency(
    conversations: list[Conversation], calls: int
) -> dict[str, tuple[float, float]]:
    async def execute(item: Conversation) -> None:
        if (await item.runtime.execute(TRUE)).exit_code != 0:
            raise RuntimeError("execute failed")

    async def read(item: Conversation) -> None:
        _checked_read(await item.tools.adispatch("read", READ))

    result: dict[str, tuple[float, float]] = {}
    for name, action in (("execute", execute), ("read", read)):
        counter = itertools.count()
        samples: list[float] = []

        async def worker(
            action: Callable[[Conversation], Awaitable[None]] = action,
            counter: Iterator[int] = counter,
            samples: list[float] = samples,
        ) -> None:
            while (k := next(counter)) < calls:
                item = conversations[k % len(conversations)]
                start = time.perf_counter()
                await action(item)
                samples.append(time.perf_counter() - start)

        await asyncio.gather(*(worker() for _ in range(WORKERS)))
        result[name] = (quantile(samples, 0.5), quantile(samples, 0.99))
    return result


def _traced(open_step: Callable[[], None]) -> float:
    """Bytes ``tracemalloc`` still traces after ``open_step`` (tracing only around it)."""
    gc.collect()
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    open_step()
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    return float(grown)


def sync_fleet(
    label: str,
    make: Callable[[int], Any],
    levels: list[int],
    calls: int,
    finish: Callable[[list[Conversation]], None],
) -> FleetResult:
    """Open up to each level, measure, then ``finish`` (close and perhaps destroy) them all.
    ``before`` is taken after one conversation was opened and finished (so process-wide pools,
    which do not grow with the conversations, exist already)."""
    finish([_open_sync(make, 0)])
    before = Usage.now()
    conversations: list[Conversation] = []
    measured: list[Level] = []
    try:
        for level in levels:
            count = level - len(conversations)

            def open_step(count: int = count) -> None:
                for _ in range(count):
                    conversations.append(_open_sync(make, len(conversations)))

            traced = _traced(open_step) / count
            latency = _sync_latency(conversations, calls)
            measured.append(Level(level, Usage.now(), traced, latency))
            print(f"  {label} {level:5} open: {measured[-1]}", file=sys.stderr)
    finally:
        finish(conversations)
        conversations.clear()
    return FleetResult(label, before, measured, _settled(before))


def async_fleet(
    label: str,
    make: Callable[[int], Any],
    levels: list[int],
    calls: int,
    finish: Callable[[list[Conversation]], Awaitable[None]],
) -> FleetResult:
    async def scenario() -> FleetResult:
        await finish([await _open_async(make, 0)])
        before = Usage.now()
        conversations: list[Conversation] = []
        measured: list[Level] = []
        try:
            for level in levels:
                count = level - len(conversations)
                gc.collect()
                tracemalloc.start()
                start = tracemalloc.get_traced_memory()[0]
                for _ in range(count):
                    conversations.append(await _open_async(make, len(conversations)))
                gc.collect()
                traced = (tracemalloc.get_traced_memory()[0] - start) / count
                tracemalloc.stop()
                latency = await _async_latency(conversations, calls)
                measured.append(Level(level, Usage.now(), traced, latency))
                print(f"  {label} {level:5} open: {measured[-1]}", file=sys.stderr)
        finally:
            await finish(conversations)
            conversations.clear()
        return FleetResult(label, before, measured, Usage.now())

    result = asyncio.run(scenario())
    result.after_close = _settled(result.before)
    return result


def _settled(before: Usage, seconds: float = 5.0) -> Usage:
    """Usage once threads and descriptors are back to ``before``, or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        usage = Usage.now()
        if usage.own_threads <= before.own_threads and usage.fds <= before.fds:
            return usage
        if time.monotonic() > deadline:
            return usage
        time.sleep(0.05)


# ------------------------------------------------------------------ local


def bench_local(levels: list[int], calls: int, scratch: str | None) -> list[FleetResult]:
    from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime

    results = []
    with tempfile.TemporaryDirectory(prefix="bench-fleet-", dir=scratch) as root:

        def make_sync(index: int) -> Any:
            return LocalSkillRuntime(conversation_id=f"c{index}", conversations_root=root)

        def make_async(index: int) -> Any:
            return AsyncLocalSkillRuntime(conversation_id=f"c{index}", conversations_root=root)

        def finish_sync(conversations: list[Conversation]) -> None:
            for item in conversations:
                item.tools.close()
                item.runtime.close()

        async def finish_async(conversations: list[Conversation]) -> None:
            for item in conversations:
                item.tools.close()
                await item.runtime.close()

        results.append(sync_fleet("local sync", make_sync, levels, calls, finish_sync))
        results.append(async_fleet("local async", make_async, levels, calls, finish_async))
    return results


# ------------------------------------------------------------------ docker


def bench_docker(levels: list[int], calls: int, *, shared: bool = False) -> list[FleetResult]:
    """The sync face, then the async face resuming the same conversations and destroying them.
    ``shared``: only the sync face, every runtime on one :class:`DockerEngine` (``engine=``)."""
    import docker

    from docker_engine import TEST_LABEL, ensure_engine
    from skillruntime.docker import AsyncDockerSkillRuntime, DockerSkillRuntime
    from skillruntime.docker.engine import DockerEngine

    engine = ensure_engine()
    run_id = f"fleet-{uuid.uuid4().hex[:8]}"
    labels = {TEST_LABEL: run_id}
    selector = {"label": f"{TEST_LABEL}={run_id}"}
    client = engine.client(timeout=300)
    options = {"docker_host": engine.host, "image": engine.image, "labels": labels}

    one_engine = DockerEngine(engine.host) if shared else None

    def make_sync(index: int) -> Any:
        return DockerSkillRuntime(conversation_id=f"{run_id}-{index}", engine=one_engine, **options)

    def make_async(index: int) -> Any:
        return AsyncDockerSkillRuntime(conversation_id=f"{run_id}-{index}", **options)

    def finish_sync(conversations: list[Conversation]) -> None:
        for item in conversations:
            item.tools.close()
            if shared:
                item.runtime.destroy_conversation()
            item.runtime.close()
        if one_engine is not None:
            one_engine.close()  # its owner closes it once every runtime on it is closed

    async def finish_async(conversations: list[Conversation]) -> None:
        for item in conversations:
            item.tools.close()
            await asyncio.to_thread(item.runtime.docker_runtime.destroy_conversation)
            await item.runtime.close()

    def left() -> dict[str, int]:
        return {
            "containers": len(client.containers.list(all=True, filters=selector)),
            "volumes": len(client.volumes.list(filters=selector)),
        }

    try:
        if shared:
            results = [sync_fleet("docker sync, one engine", make_sync, levels, calls, finish_sync)]
        else:
            results = [sync_fleet("docker sync", make_sync, levels, calls, finish_sync)]
            # the async face resumes the same conversations, then destroys them
            results.append(async_fleet("docker async", make_async, levels, calls, finish_async))
        results[-1].left = left()
        return results
    finally:
        if one_engine is not None:
            one_engine.close()
        for container in client.containers.list(all=True, filters=selector):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
        for volume in client.volumes.list(filters=selector):
            with contextlib.suppress(docker.errors.NotFound):
                volume.remove(force=True)
        client.close()


# ------------------------------------------------------------------ MCP


def _turn(calls: int) -> list[tuple[str, dict[str, Any]]]:
    """``calls`` tool calls of a skill turn (``base`` replaced by the skill's directory)."""
    head: list[tuple[str, dict[str, Any]]] = [
        ("skill", {"command": "text-stats"}),
        ("bash", {"command": "sh {base}/scripts/run.sh {base}/assets/sample.txt 3"}),
        ("write", {"file_path": "notes/report.txt", "content": "alpha\nbeta\n"}),
        ("read", {"file_path": "notes/report.txt"}),
        ("edit", {"file_path": "notes/report.txt", "old_string": "beta", "new_string": "gamma"}),
        ("glob", {"pattern": "*.txt", "path": "notes"}),
        ("grep", {"pattern": "gam+a", "path": "notes"}),
    ]
    tail: list[tuple[str, dict[str, Any]]] = [
        ("read", {"file_path": "notes/report.txt"}),
        ("bash", {"command": "wc -l notes/report.txt"}),
        ("write", {"file_path": "notes/more.txt", "content": "delta\n"}),
    ]
    return (head + list(itertools.islice(itertools.cycle(tail), max(0, calls - len(head)))))[:calls]


@dataclass
class McpResult:
    sessions: int
    calls: int
    errors: int
    single: tuple[float, float]
    many: tuple[float, float]
    rss_start: float
    rss_peak: float
    rss_after: float
    threads_after: int
    threads_start: int

    def rows(self) -> list[Row]:
        label = f"MCP {self.sessions} sessions"
        return [
            Row(
                f"{label}: errors",
                self.errors,
                self.sessions * self.calls,
                unit="call",
                target=0.0,
                note="tool calls made",
            ),
            Row(
                f"{label}: p50 per call",
                self.many[0],
                self.single[0],
                note="p50 with one session",
            ),
            Row(
                f"{label}: p99 per call",
                self.many[1],
                self.single[1],
                note="p99 with one session",
            ),
            Row(
                f"{label}: server RSS at the peak",
                self.rss_peak / KIB,
                self.rss_start / KIB,
                unit="MiB",
                note="server RSS after one warm-up session",
            ),
            Row(
                f"{label}: server RSS after the sessions",
                self.rss_after / KIB,
                self.rss_start / KIB,
                unit="MiB",
                target=1.1,
                note="server RSS after one warm-up session",
            ),
            Row(
                f"{label}: server threads after the sessions",
                self.threads_after,
                self.threads_start,
                unit="thr",
                note="server threads after one warm-up session (anyio's idle workers "
                "end after 10 s)",
            ),
        ]


async def _mcp_session(url: str, calls: int, samples: list[float]) -> int:
    """One session running the turn; the number of failed calls."""
    from mcp_http import http_session

    turn = _turn(calls)
    errors = 0
    try:
        async with http_session(url) as (session, _):
            base = ""
            for name, template in turn:
                arguments = {
                    key: value.replace("{base}", base) if isinstance(value, str) else value
                    for key, value in template.items()
                }
                start = time.perf_counter()
                try:
                    result = await session.call_tool(name, arguments)
                except Exception as exc:  # counted, the turn goes on
                    print(f"  MCP call {name} raised {exc!r}", file=sys.stderr)
                    errors += 1
                    continue
                samples.append(time.perf_counter() - start)
                text = "".join(getattr(block, "text", "") for block in result.content)
                if result.is_error:
                    print(f"  MCP call {name} failed: {text[:200]}", file=sys.stderr)
                    errors += 1
                elif name == "skill":
                    for line in text.splitlines():
                        if line.startswith("Base directory for this skill: "):
                            base = line.split(": ", 1)[1]
    except Exception as exc:
        print(f"  MCP session failed: {exc!r}", file=sys.stderr)
        return calls - len(samples) if errors == 0 else errors
    return errors


def bench_mcp(sessions: int, calls: int, scratch: str | None) -> McpResult:
    from mcp_clients import serve_args
    from mcp_http import http_server

    with tempfile.TemporaryDirectory(prefix="bench-fleet-mcp-", dir=scratch) as root:
        # the server's session cap (default 100) must hold every concurrent session: at the cap
        # the least recently used idle session is ended, between two calls of its turn
        args = serve_args(SKILLS, options=[f"conversations_root={root}"])
        args += ["--max-sessions", str(max(sessions, 100))]
        with http_server(args) as server:
            pid = server.process.pid

            def settle() -> None:
                deadline = time.monotonic() + 60
                while any(Path(root).iterdir()) and time.monotonic() < deadline:
                    time.sleep(0.05)
                # the server hands free memory back 6 s after its last session ended
                time.sleep(8.0)

            async def scenario() -> McpResult:
                # one warm-up session (imports, first skill load), then one session alone
                await _mcp_session(server.url, calls, [])
                single: list[float] = []
                for _ in range(3 if sessions > 10 else 1):
                    await _mcp_session(server.url, calls, single)
                await asyncio.to_thread(settle)
                rss_start, threads_start = _rss_kib(pid), _os_threads(pid)
                peak = rss_start
                done = asyncio.Event()

                async def sample() -> None:
                    nonlocal peak
                    while not done.is_set():
                        peak = max(peak, _rss_kib(pid))
                        await asyncio.sleep(0.1)

                sampler = asyncio.create_task(sample())
                many: list[float] = []
                errors = sum(
                    await asyncio.gather(
                        *(_mcp_session(server.url, calls, many) for _ in range(sessions))
                    )
                )
                done.set()
                await sampler
                await asyncio.to_thread(settle)
                rss_after = _rss_kib(pid)
                return McpResult(
                    sessions,
                    calls,
                    errors,
                    (quantile(single, 0.5), quantile(single, 0.99)),
                    (quantile(many, 0.5), quantile(many, 0.99)) if many else (0.0, 0.0),
                    rss_start,
                    max(peak, rss_after),
                    rss_after,
                    _os_threads(pid),
                    threads_start,
                )

            return asyncio.run(scenario())


# ------------------------------------------------------------------ harness


@dataclass
class Sizes:
    local: list[int]
    docker: list[int]
    calls: int
    docker_calls: int
    sessions: int
    turn: int

    @classmethod
    def of(cls, quick: bool) -> Sizes:
        if quick:
            return cls([1, 5, 20], [1, 3], 20, 6, 10, 5)
        return cls([1, 100, 1000], [1, 100, 200], 1000, 400, 200, 20)


@contextlib.contextmanager
def _scratch() -> Iterator[str | None]:
    from bench_common import default_scratch

    yield default_scratch()


def measure(sizes: Sizes, only: set[str]) -> list[Row]:
    rows: list[Row] = []
    with _scratch() as scratch:
        if "local" in only:
            for result in bench_local(sizes.local, sizes.calls, scratch):
                rows += result.rows()
        if "docker" in only:
            for result in bench_docker(sizes.docker, sizes.docker_calls):
                rows += result.rows()
        if "docker-shared" in only:
            for result in bench_docker(sizes.docker, sizes.docker_calls, shared=True):
                rows += result.rows()
        if "mcp" in only:
            rows += bench_mcp(sizes.sessions, sizes.turn, scratch).rows()
    return rows


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``)."""
    parts = {"local", "docker", "mcp"} if quick else {"local", "docker", "docker-shared", "mcp"}
    return measure(Sizes.of(quick), parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="local,docker,docker-shared,mcp")
    parser.add_argument("--local", type=int, help="conversations at the last local step")
    parser.add_argument("--docker", type=int, help="conversations at the last Docker step")
    parser.add_argument("--sessions", type=int)
    parser.add_argument("--calls", type=int, help="tool calls a session")
    options = parser.parse_args()
    sizes = Sizes.of(options.quick)
    if options.local:
        sizes.local = [n for n in sizes.local if n < options.local] + [options.local]
    if options.docker:
        sizes.docker = [n for n in sizes.docker if n < options.docker] + [options.docker]
    if options.sessions:
        sizes.sessions = options.sessions
    if options.calls:
        sizes.turn = options.calls
    started = time.perf_counter()
    for row in measure(sizes, set(options.only.split(","))):
        print(
            f"{row.name:60} {row.value:12.6g} {row.unit:5} vs {row.baseline:12.6g} "
            f"ratio {row.ratio:7.3f} target {row.target} met {row.met}  ({row.note})"
        )
    print(f"{time.perf_counter() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
