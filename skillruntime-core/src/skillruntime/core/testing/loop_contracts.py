"""Contracts of event-loop independence: one async runtime object serves any event loop.

Users call :func:`asyncio.run` once per request (a CLI, a web handler, a test with a fresh loop
per test): each call runs on a new event loop and closes it afterwards. An async runtime object
therefore must not keep loop-bound state (a connection pool, a lock with waiters, a future)
from one loop to the next: every operation works from whichever loop awaits it. These contracts
drive the async runtime itself (not the kit's sync view), each step in its own
``asyncio.run``, and run concurrent calls in each loop so that locks get contended there.
"""

from __future__ import annotations

import asyncio
import functools
import posixpath
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from ..models import SkillExecutionRequest, SkillPreparationRequest
from ..runtime.async_spi import AsyncSkillRuntime
from .base import ConformanceBase
from .context import ConformanceContext

__all__ = ["EventLoopContracts"]

T = TypeVar("T")

_ROUNDS = 3
"""Consecutive event loops each contract uses."""


def _in_new_loop(step: Callable[[], Awaitable[T]]) -> T:
    """Run ``step()`` on a new event loop (closed afterwards), as :func:`asyncio.run` does."""

    async def main() -> T:
        return await step()

    return asyncio.run(main())


class EventLoopContracts(ConformanceBase):
    """One async runtime object serves consecutive :func:`asyncio.run` calls: ``execute``, file
    operations and ``prepare`` (concurrent calls within each loop included) and ``close``."""

    def make_async_runtime(
        self,
        *,
        conversation_id: str,
        conversations_root: str,
        base_environment: Mapping[str, str],
    ) -> AsyncSkillRuntime:
        raise NotImplementedError(f"{type(self).__name__} must implement make_async_runtime()")

    def make_async_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> AsyncSkillRuntime:
        raise NotImplementedError(
            f"{type(self).__name__} must implement make_async_runtime_without_conversation()"
        )

    def _loose_runtime(self, conformance: ConformanceContext, label: str) -> AsyncSkillRuntime:
        """A new async runtime on ``label``, used directly (no sync view); closed with the
        context on a loop of its own if the contract did not close it."""
        if self.conversation_mode:
            runtime = self.make_async_runtime(
                conversation_id=conformance.conversation_id(label),
                conversations_root=conformance.conversations_root,
                base_environment={},
            )
        else:
            runtime = self.make_async_runtime_without_conversation(
                working_directory=conformance.workspace(label), base_environment={}
            )
        conformance.track_label(label)
        conformance.add_cleanup(lambda: _in_new_loop(runtime.close))
        return runtime

    def test_execute_works_from_consecutive_event_loops(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = self._loose_runtime(conformance, "loops-exec")

        def request(text: str) -> SkillExecutionRequest:
            return SkillExecutionRequest(command=f"echo {text}", timeout_seconds=60)

        for round_ in range(_ROUNDS):
            single = _in_new_loop(functools.partial(runtime.execute, request(f"one-{round_}")))
            assert (single.exit_code, single.stdout) == (0, f"one-{round_}\n")

            async def concurrent(n: int = round_) -> list[str]:
                results = await asyncio.gather(
                    *(runtime.execute(request(f"many-{n}-{k}")) for k in range(3))
                )
                return [result.stdout for result in results]

            assert _in_new_loop(concurrent) == [f"many-{round_}-{k}\n" for k in range(3)]
        _in_new_loop(runtime.close)

    def test_file_operations_work_from_consecutive_event_loops(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = self._loose_runtime(conformance, "loops-files")
        directory = posixpath.join(conformance.workspace("loops-files"), "kit-loops")
        for round_ in range(_ROUNDS):
            path = posixpath.join(directory, f"f{round_}.txt")

            async def write_concurrently(n: int = round_, target: str = path) -> list[int]:
                fs, same = await asyncio.gather(
                    runtime.get_file_system(), runtime.get_file_system()
                )
                assert same is fs
                await fs.make_directory(directory)
                written = await asyncio.gather(
                    fs.write_bytes(target, f"round {n}\n".encode()),
                    fs.write_bytes(target + ".copy", b"copy\n"),
                )
                return list(written)

            assert _in_new_loop(write_concurrently) == [len(f"round {round_}\n"), 5]

            async def read_back(target: str = path) -> bytes:
                fs = await runtime.get_file_system()
                chunks = [chunk async for chunk in fs.read_stream(target)]
                return b"".join(chunks)

            assert _in_new_loop(read_back) == f"round {round_}\n".encode()

            async def stat_and_delete(n: int = round_, target: str = path) -> bool:
                fs = await runtime.get_file_system()
                info, listed = await asyncio.gather(fs.stat(target), fs.list_directory(directory))
                assert info is not None
                assert info.size == len(f"round {n}\n")
                assert target in {entry.path for entry in listed}
                await fs.delete(target + ".copy")
                return await fs.exists(target + ".copy")

            assert _in_new_loop(stat_and_delete) is False
        _in_new_loop(runtime.close)

    def test_prepare_works_from_consecutive_event_loops(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = self._loose_runtime(conformance, "loops-prepare")
        skills = [conformance.skills.create(f"loop-skill-{n}") for n in range(_ROUNDS)]
        paths: dict[str, str] = {}
        for round_, skill in enumerate(skills):
            request = SkillPreparationRequest(skills=(skill,))

            async def prepare_concurrently(
                prepare: SkillPreparationRequest = request,
            ) -> list[str]:
                # Two concurrent prepares of one skill: one flight, the other waits for it.
                results = await asyncio.gather(runtime.prepare(prepare), runtime.prepare(prepare))
                return [prepared.base_path for result in results for prepared in result]

            first, second = _in_new_loop(prepare_concurrently)
            assert first == second
            paths[skill.name] = first
            # Skills of earlier loops are still prepared (served from what the runtime knows).
            every = SkillPreparationRequest(skills=tuple(skills[: round_ + 1]))
            again = _in_new_loop(functools.partial(runtime.prepare, every))
            assert {s.name: s.base_path for s in again} == paths

            async def read_skill_md(base: str = first) -> str:
                fs = await runtime.get_file_system()
                return await fs.read_text(posixpath.join(base, "SKILL.md"))

            assert _in_new_loop(read_skill_md).startswith("---")
        _in_new_loop(runtime.close)
