"""``AsyncCommandRunner``: the command flows of :mod:`.command_plans`, run with ``AsyncAioClient``.

``skillruntime.aio.async_commands`` is the source of both runners: ``skillruntime.aio.commands``
(``CommandRunner``, with the blocking :class:`~skillruntime.aio.client.AioClient`; safe to share
between threads) is generated from it by ``scripts/generate_sync.py``. The flows
(:class:`~skillruntime.aio.command_plans.CommandPlans`: both command APIs, the wrapper, the
session pools, the replace-once rule of terminated shell sessions) live once, free of I/O; a
runner only performs their steps with its client. The names of :mod:`.command_plans` are also
importable from here.

On the async face, when the awaiting task is cancelled, the cancellation is thrown into the flow,
which retires the session the command ran on (closing it on the service) before it propagates;
killing the command's processes is the runtime's part (:mod:`.async_runtime`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal, TypeVar

import httpx

from skillruntime.core.errors import ExecutionTransportError
from skillruntime.core.runtime.loop_local import LoopLocal

from .async_client import AsyncAioClient
from .command_plans import (
    TEMP_ROOT_PATTERN,
    Call,
    CommandMode,
    CommandPlans,
    CommandSpec,
    Fetch,
    Plan,
    Staging,
    Step,
    too_large_result,
)
from .errors import AioSandboxError
from .script import WrapperOutcome

__all__ = [
    "TEMP_ROOT_PATTERN",
    "AsyncCommandRunner",
    "Call",
    "CommandMode",
    "CommandPlans",
    "CommandSpec",
    "Fetch",
    "Plan",
    "Staging",
    "Step",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class AsyncCommandRunner(CommandPlans):
    """Runs wrapped commands through the service's bash or shell API with ``AsyncAioClient``
    (see :mod:`.command_plans`). The sync runner is safe to share between threads; the async one
    between the tasks of one event loop and between consecutive loops (its locks are per loop).
    """

    def __init__(
        self, client: AsyncAioClient, *, mode: CommandMode = "auto", temp_root: str = "/tmp"
    ) -> None:
        super().__init__(read_timeout=client.read_timeout, mode=mode, temp_root=temp_root)
        self._client = client
        if True:  # unasync: async
            self._mode_lock = LoopLocal(asyncio.Lock)
            self._staging_lock = LoopLocal(asyncio.Lock)
        else:  # unasync: sync
            import threading

            self._mode_lock = threading.Lock()
            self._staging_lock = threading.Lock()

    if True:  # unasync: async

        async def mode(self) -> Literal["bash", "shell"]:
            """The API in use, detected on first call in ``auto`` mode."""
            return await self._detect()

    else:  # unasync: sync

        @property
        def mode(self) -> Literal["bash", "shell"]:
            """The API in use, detected on first call in ``auto`` mode."""
            return self._detect()

    async def staging_path(self, suffix: str = "") -> str:
        """A fresh path on the service for a staged upload; ``temp_root`` exists once it returns
        (the service's file API does not create missing parents): one command creates it unless
        a command already ran."""
        if not self._staging_ready:
            if True:  # unasync: async  # noqa: SIM108
                lock = self._staging_lock.get()
            else:  # unasync: sync
                lock = self._staging_lock
            async with lock:
                if not self._staging_ready:
                    await self.run(self._staging_spec(), retry_safe=True)
        return self._new_staging_path(suffix)

    # --------------------------------------------------------------- running

    async def run(self, spec: CommandSpec, *, retry_safe: bool = False) -> WrapperOutcome:
        """Run ``spec`` and return what the wrapper reported.

        Raises :class:`ExecutionTransportError` when the result cannot be obtained. With
        ``retry_safe`` (read-only queries) transient failures are retried.
        """

        async def attempt() -> WrapperOutcome:  # on the async face a coroutine function
            return await self._run_once(spec)

        try:
            outcome = await self._client.retrying(attempt, idempotent=retry_safe)
        except AioSandboxError as exc:
            raise ExecutionTransportError(str(exc)) from exc
        self._staging_ready = True  # the wrapper created its run directory under temp_root
        return outcome

    async def _run_once(self, spec: CommandSpec) -> WrapperOutcome:
        return await self._drive(self._command_plan(await self._detect(), spec))

    async def _detect(self) -> Literal["bash", "shell"]:
        if self._mode is not None:
            return self._mode
        if True:  # unasync: async  # noqa: SIM108
            lock = self._mode_lock.get()
        else:  # unasync: sync
            lock = self._mode_lock
        async with lock:
            mode = self._mode
            if mode is None:
                mode = await self._drive(self._detect_plan())
                self._mode = mode
            return mode

    async def _drive(self, plan: Plan[T]) -> T:
        """Run ``plan`` to its end, performing each step; a failure of a step (on the async
        face also the task's cancellation) is thrown into the plan."""
        try:
            step = next(plan)
            while True:
                try:
                    answer = await self._perform(step)
                except BaseException as exc:
                    step = plan.throw(exc)
                else:
                    step = plan.send(answer)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def _perform(self, step: Step) -> Any:
        if isinstance(step, Call):
            return await self._client.call(
                step.method,
                step.endpoint,
                json=step.json,
                idempotent=step.idempotent,
                read_timeout=step.read_timeout,
            )
        if isinstance(step, Fetch):
            return await self._fetch(step)
        return await self.staging_path(step.suffix)

    async def _fetch(self, step: Fetch) -> bytes:
        response = await self._client.open_stream("/v1/file/download", params={"path": step.path})
        buffer = bytearray()
        try:
            async for chunk in response.aiter_bytes(64 * 1024):
                buffer.extend(chunk)
                if len(buffer) > step.limit:
                    raise too_large_result()
        except httpx.HTTPError as exc:
            raise ExecutionTransportError(
                f"Reading a command result from the AIO Sandbox failed: {type(exc).__name__}"
            ) from exc
        finally:
            await response.aclose()
        return bytes(buffer)

    # ----------------------------------------------------------------- close

    async def close(self) -> None:
        """Close the sessions this runner created (never the service's other sessions)."""
        if self._closed:
            return
        self._closed = True
        await self._drive(self._close_plan())
