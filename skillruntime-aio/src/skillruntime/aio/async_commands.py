"""``AsyncCommandRunner``: the command flows of :mod:`.commands`, performed on the event loop.

The flows (:class:`~skillruntime.aio.commands.CommandPlans`: both command APIs, the wrapper, the
session pools, the replace-once rule of terminated shell sessions) are the sync runner's own; this
runner performs their steps with :class:`~skillruntime.aio.async_client.AsyncAioClient`.

When the awaiting task is cancelled, the cancellation is thrown into the flow, which retires the
session the command ran on (closing it on the service) before it propagates; killing the
command's processes is the runtime's part (:mod:`.async_runtime`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal, TypeVar

import httpx

from skillruntime.core.errors import ExecutionTransportError
from skillruntime.core.runtime.async_spi import LoopLocal

from .async_client import AsyncAioClient
from .commands import (
    Call,
    CommandMode,
    CommandPlans,
    CommandSpec,
    Fetch,
    Plan,
    Step,
    too_large_result,
)
from .errors import AioSandboxError
from .script import WrapperOutcome

__all__ = ["AsyncCommandRunner"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class AsyncCommandRunner(CommandPlans):
    """Runs wrapped commands through the service's bash or shell API with the async client;
    safe to share between the tasks of one event loop and between consecutive loops (its locks
    are per loop)."""

    def __init__(
        self, client: AsyncAioClient, *, mode: CommandMode = "auto", temp_root: str = "/tmp"
    ) -> None:
        super().__init__(read_timeout=client.read_timeout, mode=mode, temp_root=temp_root)
        self._client = client
        self._mode_lock = LoopLocal(asyncio.Lock)
        self._staging_lock = LoopLocal(asyncio.Lock)

    async def mode(self) -> Literal["bash", "shell"]:
        """The API in use, detected on first call in ``auto`` mode."""
        return await self._detect()

    async def staging_path(self, suffix: str = "") -> str:
        """A fresh path on the service for a staged upload; ``temp_root`` exists once it
        returns."""
        if not self._staging_ready:
            async with self._staging_lock.get():
                if not self._staging_ready:
                    await self.run(self._staging_spec(), retry_safe=True)
        return self._new_staging_path(suffix)

    async def run(self, spec: CommandSpec, *, retry_safe: bool = False) -> WrapperOutcome:
        """Run ``spec`` and return what the wrapper reported (see ``CommandRunner.run``)."""

        async def attempt() -> WrapperOutcome:  # a coroutine function: tenacity awaits it
            return await self._run_once(spec)

        try:
            outcome = await self._client.retrying(attempt, idempotent=retry_safe)
        except AioSandboxError as exc:
            raise ExecutionTransportError(str(exc)) from exc
        self._staging_ready = True
        return outcome

    async def _run_once(self, spec: CommandSpec) -> WrapperOutcome:
        return await self._drive(self._command_plan(await self._detect(), spec))

    async def _detect(self) -> Literal["bash", "shell"]:
        if self._mode is not None:
            return self._mode
        async with self._mode_lock.get():
            mode = self._mode
            if mode is None:
                mode = await self._drive(self._detect_plan())
                self._mode = mode
            return mode

    async def _drive(self, plan: Plan[T]) -> T:
        """Run ``plan`` to its end, awaiting each step; a failure (or the task's cancellation)
        is thrown into the plan."""
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

    async def close(self) -> None:
        """Close the sessions this runner created (never the service's other sessions)."""
        if self._closed:
            return
        self._closed = True
        await self._drive(self._close_plan())
