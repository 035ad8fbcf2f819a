"""Contracts 6 and 9 (``docs/architecture.md``): close, and concurrent use from several threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pytest

from ..errors import RuntimeClosedError
from ..models import (
    BootstrapCommand,
    SkillExecutionRequest,
    SkillPreparationRequest,
    SkillRuntimeConfig,
)
from .base import ConformanceBase
from .context import ConformanceContext
from .skills import append_line_command

__all__ = ["LifecycleContracts"]

T = TypeVar("T")


def _together(count: int, work: Callable[[int], T]) -> list[T]:
    """Run ``work(0..count-1)`` on ``count`` threads released at the same moment."""
    barrier = threading.Barrier(count)

    def start(index: int) -> T:
        barrier.wait(timeout=30)
        return work(index)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(start, range(count)))


class LifecycleContracts(ConformanceBase):
    """close is idempotent and final; a runtime is safe to share between threads."""

    def test_close_is_idempotent(self, conformance: ConformanceContext) -> None:
        runtime = conformance.runtime()
        runtime.close()
        runtime.close()
        with conformance.runtime("ctx") as managed:
            conformance.check_output(managed, "true")
        managed.close()

    def test_every_operation_after_close_raises_runtime_closed(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        fs = runtime.get_file_system()
        fs.write_text("before-close.txt", "x")
        skill = conformance.skills.create("after-close")
        runtime.close()
        attempts: list[Callable[[], object]] = [
            lambda: runtime.execute(SkillExecutionRequest(command="true")),
            lambda: runtime.prepare(SkillPreparationRequest(skills=(skill,))),
            runtime.get_file_system,
            lambda: fs.read_text("before-close.txt"),
            lambda: fs.read_bytes("before-close.txt"),
            lambda: fs.write_text("after-close.txt", "x"),
            lambda: fs.stat("before-close.txt"),
            lambda: fs.list_directory("."),
            lambda: fs.list_files("."),
            lambda: fs.delete("before-close.txt"),
            lambda: fs.make_directory("after-close-dir"),
            lambda: b"".join(fs.read_stream("before-close.txt")),
            lambda: fs.download("before-close.txt", conformance.tmp_path / "after-close.txt"),
        ]
        for attempt in attempts:
            with pytest.raises(RuntimeClosedError):
                attempt()
        assert not (conformance.tmp_path / "after-close.txt").exists()

    def test_close_keeps_the_conversation_workspace(self, conformance: ConformanceContext) -> None:
        first = conformance.runtime()
        first.get_file_system().write_text("survives-close.txt", "still here")
        first.close()
        assert conformance.runtime().get_file_system().read_text("survives-close.txt") == (
            "still here"
        )

    def test_concurrent_commands_on_one_runtime(self, conformance: ConformanceContext) -> None:
        runtime = conformance.runtime()

        def work(index: int) -> tuple[int, str]:
            result = conformance.run(
                runtime,
                'printf \'%s\' "$KIT_INDEX" > "out-$KIT_INDEX.txt"; printf \'%s\' "$KIT_INDEX"',
                env={"KIT_INDEX": str(index)},
            )
            return result.exit_code, result.stdout

        results = _together(self.concurrency, work)
        assert results == [(0, str(index)) for index in range(self.concurrency)]
        fs = runtime.get_file_system()
        for index in range(self.concurrency):
            assert fs.read_text(f"out-{index}.txt") == str(index)

    def test_concurrent_file_writes_on_one_runtime(self, conformance: ConformanceContext) -> None:
        fs = conformance.runtime().get_file_system()

        def work(index: int) -> bytes:
            payload = bytes([index]) * (100_000 + index)
            fs.write_bytes(f"parallel/{index}.bin", payload)
            return fs.read_bytes(f"parallel/{index}.bin")

        results = _together(self.concurrency, work)
        for index, data in enumerate(results):
            assert data == bytes([index]) * (100_000 + index)

    def test_concurrent_prepare_of_one_skill_bootstraps_once(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        skill = conformance.skills.create("contended")
        log = conformance.log_path("contended")
        config = SkillRuntimeConfig(
            bootstrap=(BootstrapCommand(command=f"{append_line_command(log)}; sleep 0.3"),)
        )

        def work(_: int) -> str:
            (prepared,) = conformance.prepare(runtime, skill, configs={"contended": config})
            return prepared.base_path

        paths = _together(self.concurrency, work)
        assert len(set(paths)) == 1
        assert conformance.count_lines(runtime, log) == 1
