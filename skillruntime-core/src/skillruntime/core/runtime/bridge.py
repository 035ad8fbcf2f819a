"""Bridges between the sync and the async SPI: :func:`to_async` and :func:`to_sync`.

:func:`to_async` serves a sync :class:`~skillruntime.core.runtime.spi.SkillRuntime` to asyncio code
by running each call in a worker thread of a process-wide pool (at most ``max_workers`` calls of
one bridged runtime run at once; the others wait without a thread and without blocking the event
loop; an idle open runtime holds no thread). The sync runtime's own
overrides (one-archive uploads, native searches) are kept: every file-system operation is one
call of the wrapped file system.

**Cancellation through the thread bridge.** A thread cannot be interrupted, so the bridge kills
a cancelled command through the runtime itself. Every bridged command carries a unique
:data:`CANCEL_MARKER_VARIABLE` in its environment (inherited by every process it starts); when the
awaiting task is cancelled, the bridge runs one more command in the same runtime that sends
``SIGKILL`` to every process whose ``/proc/<pid>/environ`` holds that token, waits for it, and
then lets :class:`asyncio.CancelledError` propagate. The worker running the killed command is
freed when the runtime reports its end; its result is dropped. This needs a Linux ``/proc`` and a
POSIX shell inside the runtime (true of the local host, AIO and OpenSandbox sandboxes); a process
that clears its environment escapes it. Elsewhere, or with ``kill_on_cancel=False``, the command
runs to its end or until its own ``timeout_seconds`` kills its tree. Other calls are not
interrupted: a cancelled ``prepare`` runs on in its worker (bootstrap included) and is cached when
it succeeds. A runtime with a native async class does better;
``skillruntime.core.plugins.registry.create_async_runtime`` prefers it.

:func:`to_sync` is the reverse: a sync runtime over an async one, running the async runtime on a
private event loop in one daemon thread. Calls from several threads are served concurrently by
that loop. It must not be called from the bridge's own loop, and the async runtime must not be
used on another loop at the same time.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import secrets
import threading
import uuid
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Iterable,
    Mapping,
)
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..files.async_spi import AsyncChunks, AsyncSkillRuntimeFileSystem, aiter_chunks
from ..files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT, DEFAULT_READ_LIMIT, SkillRuntimeFileSystem
from ..models import (
    FileInfo,
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from .async_spi import AsyncSkillRuntime
from .loop_local import LoopLocal
from .rules import closed_error
from .scoped import ScopedFileSystem
from .spi import SkillRuntime

if TYPE_CHECKING:
    from ..files.search import GlobQuery, GrepQuery, GrepResult, SearchResult

__all__ = [
    "CANCEL_MARKER_VARIABLE",
    "DEFAULT_BRIDGE_WORKERS",
    "LoopThreadRuntime",
    "ThreadedAsyncFileSystem",
    "ThreadedAsyncRuntime",
    "kill_marked_command",
    "marked_environment",
    "marker_token",
    "to_async",
    "to_sync",
]

logger = logging.getLogger(__name__)

DEFAULT_BRIDGE_WORKERS = 64
"""Default bound of :func:`to_async`: calls of one bridged runtime running at once."""

BRIDGE_THREADS = 1024
"""Threads of the process-wide pool every bridged runtime runs its calls in. A worker is started
only when no idle one is free, so the threads follow the calls running at once in the process,
not the bridged runtimes open (each one bounded by its ``max_workers``)."""
KILL_THREADS = 16
"""Threads of the process-wide pool of the cancel kills (kills never queue behind commands)."""

_shared_pools: dict[str, ThreadPoolExecutor] = {}
_shared_pools_lock = threading.Lock()


def _shared_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The process-wide pool ``name`` (made on first use)."""
    with _shared_pools_lock:
        pool = _shared_pools.get(name)
        if pool is None:
            pool = _shared_pools[name] = ThreadPoolExecutor(workers, thread_name_prefix=name)
        return pool


# A forked child has none of the parent's worker threads: it makes pools of its own.
os.register_at_fork(after_in_child=_shared_pools.clear)

CANCEL_MARKER_VARIABLE = "SKILLRUNTIME_CANCEL_MARK"
"""Environment variable that marks the processes of one bridged command (see the module docs)."""

T = TypeVar("T")


def marker_token(environment: Mapping[str, str]) -> str:
    """The token of a command's marker (:data:`CANCEL_MARKER_VARIABLE`): the caller's when it is
    ASCII letters and digits (this bridge marks every command it runs and sweeps for its own
    token on cancel), else a fresh one (the token is put into shell scripts)."""
    token = environment.get(CANCEL_MARKER_VARIABLE, "")
    return token if token.isascii() and token.isalnum() else secrets.token_hex(16)


def marked_environment(environment: Mapping[str, str]) -> tuple[dict[str, str], str]:
    """``environment`` with the command's marker (:func:`marker_token`), and the token: the
    runtimes that stop a timed-out command's tree by its marker (AIO, Docker, OpenSandbox)
    mark every command with it."""
    token = marker_token(environment)
    return {**environment, CANCEL_MARKER_VARIABLE: token}, token


def kill_marked_command(token: str) -> str:
    """A POSIX sh command sending ``SIGKILL`` to every process whose environment holds
    ``CANCEL_MARKER_VARIABLE=token`` (three sweeps, so children forked meanwhile are caught).

    It reads every ``/proc/<pid>/environ`` with one ``grep -z`` where grep has it, and with one
    ``tr | grep`` per process otherwise.
    """
    marker = f"{CANCEL_MARKER_VARIABLE}={token}"
    return (
        f"m='{marker}'; "
        "if printf 'a\\000' | grep -qz a 2>/dev/null; then "
        'find_marked() { grep -lzxF "$m" /proc/[0-9]*/environ 2>/dev/null '
        "| sed 's#^/proc/\\([0-9]*\\)/environ$#\\1#'; }; "
        "else "
        "find_marked() { for d in /proc/[0-9]*; do "
        "{ tr '\\000' '\\n' < \"$d/environ\"; } 2>/dev/null | grep -qxF \"$m\" "
        '&& echo "${d#/proc/}"; done; }; '
        "fi; "
        "for sweep in 1 2 3; do for p in $(find_marked); do "
        '[ "$p" = "$$" ] || kill -KILL "$p" 2>/dev/null; done; done; true'
    )


class _ThreadPool:
    """Awaits calls made in worker threads of ``executor`` (``None``: the loop's default), at
    most ``limit`` at once on each event loop when given (the others wait without a thread)."""

    def __init__(self, executor: Executor | None, limit: int | None = None) -> None:
        self.executor = executor
        # One semaphore per event loop: a semaphore binds to the loop of its first waiter, and
        # a bridged runtime serves one loop after another (asyncio.run per call).
        self._limits: LoopLocal[asyncio.Semaphore] | None = (
            LoopLocal(functools.partial(asyncio.Semaphore, limit)) if limit is not None else None
        )

    async def run(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        call = functools.partial(function, *args, **kwargs)
        if self._limits is None:
            return await loop.run_in_executor(self.executor, call)
        async with self._limits.get():
            return await loop.run_in_executor(self.executor, call)


class ThreadedAsyncFileSystem(AsyncSkillRuntimeFileSystem):
    """An async file system over a sync one; every operation is one call in a worker thread of
    ``executor`` (``None``: the event loop's default executor).

    Streams move one chunk per worker call, so memory stays bounded in both directions.
    """

    def __init__(
        self, inner: SkillRuntimeFileSystem, executor: Executor | _ThreadPool | None = None
    ) -> None:
        self._inner = inner
        # a bridged runtime passes its own bounded pool: its file operations share its bound
        self._pool = executor if isinstance(executor, _ThreadPool) else _ThreadPool(executor)

    @property
    def inner(self) -> SkillRuntimeFileSystem:
        """The wrapped sync file system."""
        return self._inner

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> AsyncGenerator[bytes, None]:
        if isinstance(self._inner, ScopedFileSystem):
            self._inner.scoped_path(path)  # a refused path fails at the call, as in sync code
        return self._stream(path, chunk_size)

    async def _stream(self, path: str, chunk_size: int) -> AsyncGenerator[bytes, None]:
        stream = await self._pool.run(self._inner.read_stream, path, chunk_size)
        try:
            while True:
                chunk = await self._pool.run(next, stream, None)
                if chunk is None:
                    return
                yield chunk
        finally:
            await self._pool.run(stream.close)

    async def write_stream(
        self, path: str, chunks: AsyncChunks, *, executable: bool = False
    ) -> int:
        if isinstance(chunks, Iterable):
            return await self._pool.run(
                self._inner.write_stream, path, chunks, executable=executable
            )
        return await self._pool.run(
            self._inner.write_stream, path, _pull(chunks), executable=executable
        )

    async def stat(self, path: str) -> FileInfo | None:
        return await self._pool.run(self._inner.stat, path)

    async def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        return await self._pool.run(self._inner.list_directory, path, depth, limit)

    async def delete(self, path: str) -> None:
        await self._pool.run(self._inner.delete, path)

    async def make_directory(self, path: str) -> None:
        await self._pool.run(self._inner.make_directory, path)

    async def exists(self, path: str) -> bool:
        return await self._pool.run(self._inner.exists, path)

    async def read_bytes(self, path: str, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes:
        return await self._pool.run(self._inner.read_bytes, path, max_bytes)

    async def read_text(
        self,
        path: str,
        max_bytes: int = DEFAULT_READ_LIMIT,
        *,
        encoding: str = "utf-8",
        errors: str = "strict",
    ) -> str:
        return await self._pool.run(
            self._inner.read_text, path, max_bytes, encoding=encoding, errors=errors
        )

    async def write_bytes(self, path: str, data: bytes, *, executable: bool = False) -> int:
        return await self._pool.run(self._inner.write_bytes, path, data, executable=executable)

    async def upload_files(self, files: Iterable[tuple[Path, str, bool]]) -> int:
        return await self._pool.run(self._inner.upload_files, list(files))

    async def list_files(
        self, path: str, depth: int = 1_000_000, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        return await self._pool.run(self._inner.list_files, path, depth, limit)

    async def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        """The wrapped file system's ``glob`` (its one-command override, if any), in a worker."""
        return await self._pool.run(self._inner.glob, root, query)

    async def grep(
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: Callable[[str, int], Awaitable[str]] | None = None,
    ) -> GrepResult:
        """The wrapped file system's ``grep`` in a worker; an async ``read_text`` is awaited on
        this loop for each file the search reads on the client."""
        if read_text is None:
            return await self._pool.run(self._inner.grep, root, query)
        loop = asyncio.get_running_loop()
        reader = read_text

        def read_on_loop(path: str, max_bytes: int) -> str:
            async def read() -> str:
                return await reader(path, max_bytes)

            return asyncio.run_coroutine_threadsafe(read(), loop).result()

        return await self._pool.run(self._inner.grep, root, query, read_text=read_on_loop)


def _pull(chunks: AsyncChunks) -> Generator[bytes, None, None]:
    """A sync iterator over async chunks, for a write running in a worker thread.

    Each chunk is fetched on the event loop that owns ``chunks``.
    """
    loop = asyncio.get_running_loop()
    iterator = aiter_chunks(chunks)

    def generate() -> Generator[bytes, None, None]:
        try:
            while True:
                future = asyncio.run_coroutine_threadsafe(_next_or_none(iterator), loop)
                chunk = future.result()
                if chunk is None:
                    return
                yield chunk
        finally:
            asyncio.run_coroutine_threadsafe(iterator.aclose(), loop).result()

    return generate()


async def _next_or_none(iterator: AsyncGenerator[bytes, None]) -> bytes | None:
    try:
        return await iterator.__anext__()
    except StopAsyncIteration:
        return None


class ThreadedAsyncRuntime(AsyncSkillRuntime):
    """An async runtime over a sync one (see :func:`to_async` and the module's cancellation
    rules). Closing it closes the wrapped runtime; the worker threads are the process's, shared
    by every bridged runtime (:data:`BRIDGE_THREADS`)."""

    def __init__(
        self,
        runtime: SkillRuntime,
        *,
        max_workers: int = DEFAULT_BRIDGE_WORKERS,
        kill_on_cancel: bool = True,
    ) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._runtime = runtime
        # Process-wide pools: an idle open runtime holds no thread of its own.
        self._executor = _shared_pool("skillruntime-bridge", BRIDGE_THREADS)
        self._pool = _ThreadPool(self._executor, max_workers)
        # Kills never queue behind the commands they stop.
        self._killer: ThreadPoolExecutor | None = (
            _shared_pool("skillruntime-bridge-kill", KILL_THREADS) if kill_on_cancel else None
        )
        self._closed = False
        self._file_systems: dict[int, ThreadedAsyncFileSystem] = {}

    @property
    def sync_runtime(self) -> SkillRuntime:
        """The wrapped sync runtime."""
        return self._runtime

    @property
    def name(self) -> str:
        return self._runtime.name

    @property
    def default_working_directory(self) -> str:
        return self._runtime.default_working_directory

    def _ensure_open(self) -> None:
        if self._closed:
            raise closed_error(self.name)

    async def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        self._ensure_open()
        return await self._pool.run(self._runtime.prepare, request)

    async def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        self._ensure_open()
        if self._killer is None:
            return await self._pool.run(self._runtime.execute, request)
        token = uuid.uuid4().hex
        marked = request.model_copy(
            update={"environment": {**request.environment, CANCEL_MARKER_VARIABLE: token}}
        )
        try:
            return await self._pool.run(self._runtime.execute, marked)
        except asyncio.CancelledError:
            await asyncio.shield(self._kill(token))
            raise

    async def _kill(self, token: str) -> None:
        """Stop the processes of the command marked ``token`` (failures are logged only)."""
        assert self._killer is not None
        kill = SkillExecutionRequest(command=kill_marked_command(token), timeout_seconds=30)
        try:
            await _ThreadPool(self._killer).run(self._runtime.execute, kill)
        except Exception as exc:  # the cancellation itself must still propagate
            logger.warning("stopping a cancelled %s command failed: %s", self.name, exc)

    async def get_file_system(self) -> AsyncSkillRuntimeFileSystem:
        self._ensure_open()
        inner = await self._pool.run(self._runtime.get_file_system)
        wrapper = self._file_systems.get(id(inner))
        if wrapper is None or wrapper.inner is not inner:
            wrapper = ThreadedAsyncFileSystem(inner, self._pool)
            self._file_systems[id(inner)] = wrapper
        return wrapper

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._pool.run(self._runtime.close)


def to_async(
    runtime: SkillRuntime,
    *,
    max_workers: int = DEFAULT_BRIDGE_WORKERS,
    kill_on_cancel: bool = True,
) -> AsyncSkillRuntime:
    """Serve the sync ``runtime`` to asyncio code through a pool of ``max_workers`` threads.

    ``kill_on_cancel`` marks each command so that a cancelled one is killed through the runtime
    (see the module docs). The bridge owns ``runtime``: closing the bridge closes it.
    """
    return ThreadedAsyncRuntime(runtime, max_workers=max_workers, kill_on_cancel=kill_on_cancel)


class _LoopThread:
    """A private event loop running in one daemon thread; once stopped, calls raise
    ``RuntimeClosedError`` (the runtime it serves is closed)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._stopped = False
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name=f"skillruntime-loop-{name}", daemon=True
        )
        self._thread.start()

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._stopped:
            coroutine.close()
            raise closed_error(self._name)
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a to_sync runtime cannot be called from its own event loop")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def stop(self) -> None:
        """Cancel the tasks still on the loop, then stop and close it."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("a to_sync runtime cannot be closed from its own event loop")
        self._stopped = True
        asyncio.run_coroutine_threadsafe(_cancel_other_tasks(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


async def _cancel_other_tasks() -> None:
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class _LoopFileSystem(SkillRuntimeFileSystem):
    """A sync file system over an async one, served by a :class:`_LoopThread`."""

    def __init__(self, inner: AsyncSkillRuntimeFileSystem, loop: _LoopThread) -> None:
        self._inner = inner
        self._loop = loop

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None, None]:
        # Made here, not in the generator, so a refused path fails at the call.
        return self._pull(self._inner.read_stream(path, chunk_size))

    def _pull(self, stream: AsyncGenerator[bytes, None]) -> Generator[bytes, None, None]:
        try:
            while True:
                chunk = self._loop.call(_next_or_none(stream))
                if chunk is None:
                    return
                yield chunk
        finally:
            self._loop.call(stream.aclose())

    def write_stream(self, path: str, chunks: Iterable[bytes], *, executable: bool = False) -> int:
        return self._loop.call(self._inner.write_stream(path, chunks, executable=executable))

    def stat(self, path: str) -> FileInfo | None:
        return self._loop.call(self._inner.stat(path))

    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        return self._loop.call(self._inner.list_directory(path, depth, limit))

    def delete(self, path: str) -> None:
        self._loop.call(self._inner.delete(path))

    def make_directory(self, path: str) -> None:
        self._loop.call(self._inner.make_directory(path))

    def read_bytes(self, path: str, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes:
        return self._loop.call(self._inner.read_bytes(path, max_bytes))

    def upload_files(self, files: Iterable[tuple[Path, str, bool]]) -> int:
        return self._loop.call(self._inner.upload_files(list(files)))

    def list_files(
        self, path: str, depth: int = 1_000_000, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        return self._loop.call(self._inner.list_files(path, depth, limit))

    def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        """The wrapped file system's ``glob`` (its one-command override, if any)."""
        return self._loop.call(self._inner.glob(root, query))

    def grep(
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: Callable[[str, int], str] | None = None,
    ) -> GrepResult:
        """The wrapped file system's ``grep``; a sync ``read_text`` runs in a worker thread
        for each file the search reads on the client."""
        if read_text is None:
            return self._loop.call(self._inner.grep(root, query))
        reader = read_text

        async def read_in_thread(path: str, max_bytes: int) -> str:
            return await asyncio.to_thread(reader, path, max_bytes)

        return self._loop.call(self._inner.grep(root, query, read_text=read_in_thread))


class LoopThreadRuntime(SkillRuntime):
    """A sync runtime over an async one, run on a private loop thread (see :func:`to_sync`)."""

    def __init__(self, runtime: AsyncSkillRuntime) -> None:
        self._runtime = runtime
        self._loop = _LoopThread(runtime.name)
        self._lock = threading.Lock()
        self._closed = False
        self._file_system: tuple[AsyncSkillRuntimeFileSystem, _LoopFileSystem] | None = None

    @property
    def async_runtime(self) -> AsyncSkillRuntime:
        """The wrapped async runtime."""
        return self._runtime

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop that serves the async runtime; its result.

        For code that drives the async runtime directly next to the sync view (the conformance
        kit's cancellation contracts do).
        """
        return self._loop.call(coroutine)

    @property
    def name(self) -> str:
        return self._runtime.name

    @property
    def default_working_directory(self) -> str:
        return self._runtime.default_working_directory

    def _ensure_open(self) -> None:
        if self._closed:
            raise closed_error(self.name)

    def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        self._ensure_open()
        return self._loop.call(self._runtime.prepare(request))

    def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        self._ensure_open()
        return self._loop.call(self._runtime.execute(request))

    def get_file_system(self) -> SkillRuntimeFileSystem:
        self._ensure_open()
        inner = self._loop.call(self._runtime.get_file_system())
        with self._lock:
            if self._file_system is None or self._file_system[0] is not inner:
                self._file_system = (inner, _LoopFileSystem(inner, self._loop))
            return self._file_system[1]

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._loop.call(self._runtime.close())
        finally:
            self._loop.stop()


def to_sync(runtime: AsyncSkillRuntime) -> SkillRuntime:
    """Serve the async ``runtime`` to sync code (tools, CLI, threads) on a private loop thread.

    The bridge owns ``runtime``: closing the bridge closes it and stops the loop thread.
    """
    return LoopThreadRuntime(runtime)
