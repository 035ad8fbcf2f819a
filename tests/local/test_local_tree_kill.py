"""The local runtime stops a command's whole tree, on both faces: processes that left the group
(``setsid``, double forks) are found by the command's mark, those that also cleared their
environment by their parents; a timeout returns at its deadline (issue 45, item 10).

Survivors are looked for in ``/proc`` by command line *and* working directory (each test's own
work root): other tests, and the Docker tests' containers, run ``sleep`` too on this host."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from skillruntime.core.errors import RuntimeClosedError
from skillruntime.core.models import SkillExecutionRequest, SkillExecutionResult
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime
from skillruntime.local import tree as tree_module
from skillruntime.local.process import ABANDONED
from skillruntime.local.tree import (
    MARK_PREFIX,
    CommandTree,
    marked_environment,
    signal_trees,
    submit_signal,
)

REPRO = "setsid sleep 3341 & sleep 3342"
"""The issue's command: the shell's child leaves the session, the shell waits on another sleep."""

MARGIN = 2.5
"""Seconds a timed-out call may take beyond its deadline on a loaded 2-core machine: a /proc
pass, a few milliseconds on a quiet one, took half a second under a full parallel run. Before
the fix it took the kill grace (:data:`GRACE`) and one second more."""

GRACE = 5.0
"""The runtimes' kill grace: long, so that a call waiting for it stands out from the margin."""


def _request(command: str, timeout: float) -> SkillExecutionRequest:
    return SkillExecutionRequest(command=command, timeout_seconds=timeout)


def _running(argv: list[str], cwd: Path) -> list[int]:
    """Pids of live processes with exactly this command line and working directory."""
    wanted = b"\0".join(arg.encode() for arg in argv) + b"\0"
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            where = os.readlink(f"/proc/{name}/cwd")
        except OSError:  # gone, or a zombie (empty command line, no working directory)
            continue
        if cmdline == wanted and where == str(cwd):
            found.append(int(name))
    return found


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _wait_running(argv: list[str], cwd: Path) -> list[int]:
    end = time.monotonic() + 10
    while not (pids := _running(argv, cwd)):
        assert time.monotonic() < end, f"{argv} never started"
        time.sleep(0.02)
    return pids


Timed = tuple[SkillExecutionResult, float]


def _sync(work: Path, command: str, timeout: float, grace: float = GRACE) -> Timed:
    """The result of ``command`` on a new sync runtime, and how long its ``execute`` took."""
    with LocalSkillRuntime(work_root=work, kill_grace_seconds=grace, drain_seconds=0.2) as rt:
        started = time.monotonic()
        result = rt.execute(_request(command, timeout))
        return result, time.monotonic() - started


def _async(work: Path, command: str, timeout: float, grace: float = GRACE) -> Timed:
    """:func:`_sync` on the async runtime."""

    async def scenario() -> Timed:
        async with AsyncLocalSkillRuntime(
            work_root=work, kill_grace_seconds=grace, drain_seconds=0.2
        ) as rt:
            started = time.monotonic()
            result = await rt.execute(_request(command, timeout))
            return result, time.monotonic() - started

    return asyncio.run(scenario())


FACES = pytest.mark.parametrize("run", [_sync, _async], ids=["sync", "async"])
Runner = Callable[..., Timed]


def _timed(run: Runner, work: Path, command: str, timeout: float) -> SkillExecutionResult:
    """The result of a command that must time out, returned at its deadline."""
    result, elapsed = run(work, command, timeout)
    assert (result.timed_out, result.exit_code) == (True, -1)
    assert elapsed <= timeout + MARGIN, f"the call returned {elapsed:.2f} s after it started"
    return result


@pytest.mark.slow
@FACES
def test_a_timeout_kills_the_setsid_child_and_returns_at_its_deadline(
    run: Runner, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    work = tmp_path / "work"
    try:
        _timed(run, work, REPRO, 2.0)
        assert _running(["sleep", "3341"], work) == []
        assert _running(["sleep", "3342"], work) == []
        assert ABANDONED not in caplog.text
    finally:
        _kill_all(_running(["sleep", "3341"], work))


WAIT_STARTED = "until [ -e started ]; do sleep 0.01; done; sleep 3342"
"""The foreground part: wait until the escapee announced itself, then sleep into the deadline."""


@FACES
def test_a_child_that_left_the_group_and_cleared_its_environment_is_found_by_its_parent(
    run: Runner, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    escapee = "setsid sh -c 'touch started; exec env -i sleep 3343' &"
    try:
        _timed(run, work, f"{escapee} {WAIT_STARTED}", 0.3)
        assert (work / "started").exists()
        assert _running(["sleep", "3343"], work) == []
    finally:
        _kill_all(_running(["sleep", "3343"], work))


@FACES
def test_an_orphan_in_another_session_is_found_by_its_mark(run: Runner, tmp_path: Path) -> None:
    # The subshell exits at once: the sleep is adopted by init, in a session of its own.
    work = tmp_path / "work"
    escapee = "(setsid sh -c 'touch started; exec sleep 3344' &);"
    try:
        _timed(run, work, f"{escapee} {WAIT_STARTED}", 0.3)
        assert (work / "started").exists()
        assert _running(["sleep", "3344"], work) == []
    finally:
        _kill_all(_running(["sleep", "3344"], work))


@FACES
def test_a_setsid_child_holding_the_pipes_after_the_shell_exits_is_stopped_after_the_drain(
    run: Runner, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    try:
        result, elapsed = run(work, "setsid sleep 3345 & echo done", 30)
        assert elapsed <= 0.2 + MARGIN
        assert (result.exit_code, result.timed_out, result.stdout) == (0, False, "done\n")
        assert _running(["sleep", "3345"], work) == []
    finally:
        _kill_all(_running(["sleep", "3345"], work))


def test_a_burst_of_async_timeouts_kills_every_tree_at_the_deadline(tmp_path: Path) -> None:
    # Their /proc passes run on the spawn pool, shared: the loop and the deadlines do not wait.
    work = tmp_path / "work"
    count = 20

    async def scenario() -> list[SkillExecutionResult]:
        async with AsyncLocalSkillRuntime(work_root=work, kill_grace_seconds=GRACE) as rt:
            request = _request("setsid sleep 3348 & sleep 3342", 0.3)
            return await asyncio.gather(*(rt.execute(request) for _ in range(count)))

    try:
        started = time.monotonic()
        results = asyncio.run(scenario())
        assert time.monotonic() - started <= 0.3 + MARGIN
        assert [result.timed_out for result in results] == [True] * count
        assert _running(["sleep", "3348"], work) == []
    finally:
        _kill_all(_running(["sleep", "3348"], work))


@pytest.mark.slow
@FACES
def test_a_setsid_child_that_ignores_term_and_holds_the_pipes_gets_kill_after_the_grace(
    run: Runner, tmp_path: Path
) -> None:
    # SIG_IGN is inherited through exec: the shell and its setsid child both ignore SIGTERM.
    work = tmp_path / "work"
    try:
        result, elapsed = run(work, "trap '' TERM; setsid sleep 3349 & sleep 3342", 0.3, 0.5)
        assert (result.timed_out, result.exit_code) == (True, -1)
        assert 0.3 + 0.5 * 0.9 <= elapsed <= 0.3 + 0.5 + MARGIN
        assert _running(["sleep", "3349"], work) == []
    finally:
        _kill_all(_running(["sleep", "3349"], work))


@FACES
def test_a_setsid_child_that_ignores_term_without_the_pipes_gets_kill_when_the_shell_ends(
    run: Runner, tmp_path: Path
) -> None:
    # Nothing holds the pipes once the shell ended on SIGTERM: no grace is waited, and the
    # child the first pass found outside the group gets SIGKILL before the call returns.
    work = tmp_path / "work"
    command = "setsid sh -c \"trap '' TERM; exec sleep 3350\" >/dev/null 2>&1 & sleep 3342"
    try:
        _timed(run, work, command, 0.3)
        end = time.monotonic() + 5  # SIGKILL sent; on a loaded machine the end may lag
        while _running(["sleep", "3350"], work) and time.monotonic() < end:
            time.sleep(0.02)
        assert _running(["sleep", "3350"], work) == []
    finally:
        _kill_all(_running(["sleep", "3350"], work))


def test_cancelling_an_async_execute_kills_the_setsid_child(tmp_path: Path) -> None:
    work = tmp_path / "work"

    async def scenario() -> None:
        async with AsyncLocalSkillRuntime(work_root=work, kill_grace_seconds=0.3) as rt:
            task = asyncio.create_task(rt.execute(_request("setsid sleep 3346 & sleep 3342", 60)))
            while not _running(["sleep", "3346"], work):
                await asyncio.sleep(0.02)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # SIGKILL was sent before the cancellation propagated; on a loaded machine the
            # process may take a moment to end (nothing here waits for its pipes to close).
            end = time.monotonic() + 5
            while _running(["sleep", "3346"], work) and time.monotonic() < end:
                await asyncio.sleep(0.02)
            assert _running(["sleep", "3346"], work) == []
            assert (await rt.execute(_request("echo after", 5))).stdout == "after\n"

    try:
        asyncio.run(scenario())
    finally:
        _kill_all(_running(["sleep", "3346"], work))


def test_closing_the_runtime_kills_the_setsid_child(tmp_path: Path) -> None:
    work = tmp_path / "work"
    rt = LocalSkillRuntime(work_root=work)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            rt.execute(_request("setsid sleep 3347 & sleep 3342", 60))
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        _wait_running(["sleep", "3347"], work)
        rt.close()
        worker.join(5)
        assert not worker.is_alive()
        assert [type(error) for error in errors] == [RuntimeClosedError]
        assert _running(["sleep", "3347"], work) == []
    finally:
        rt.close()
        _kill_all(_running(["sleep", "3347"], work))


def test_every_command_gets_a_mark_of_its_own_and_keeps_the_marks_it_inherited(
    tmp_path: Path,
) -> None:
    outer, token = marked_environment({"A": "1"})
    assert outer == {"A": "1", MARK_PREFIX + token: "1"}
    inner, inner_token = marked_environment(outer)
    assert inner_token != token
    assert inner == {**outer, MARK_PREFIX + inner_token: "1"}
    inherited, _ = marked_environment(None)
    assert inherited.items() >= os.environ.items()
    with LocalSkillRuntime(work_root=tmp_path) as rt:
        marks = [
            rt.execute(_request(f"env | grep -c '^{MARK_PREFIX}'", 5)).stdout.strip()
            for _ in range(2)
        ]
    marks_of_this_process = sum(name.startswith(MARK_PREFIX) for name in os.environ)
    assert marks == [str(marks_of_this_process + 1)] * 2


def test_passes_asked_for_together_are_combined(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first pass holds until every other request is queued (from threads and through an
    # executor): they are all served by one more pass, not one each.
    passes: list[int] = []
    original = tree_module._signal_found
    others = 16

    def counting(requests: list[tuple[CommandTree, signal.Signals]]) -> None:
        if not passes:
            end = time.monotonic() + 10
            while len(tree_module._SWEEPS._queued) < others and time.monotonic() < end:
                time.sleep(0.005)
        passes.append(len(requests))
        original(requests)

    monkeypatch.setattr(tree_module, "_signal_found", counting)
    # Trees of pids that cannot exist: nothing is signalled (pid_max is at most 2**22).
    trees = [CommandTree(2**22 + 1 + index, f"{index:016x}") for index in range(others + 1)]
    first = threading.Thread(target=signal_trees, args=([trees[0]], signal.SIGTERM))
    first.start()
    while not tree_module._SWEEPS._running:
        time.sleep(0.001)
    threads = [
        threading.Thread(target=signal_trees, args=([tree], signal.SIGTERM))
        for tree in trees[1 : others // 2 + 1]
    ]
    for thread in threads:
        thread.start()
    with ThreadPoolExecutor(2) as executor:
        queued = [
            submit_signal([tree], signal.SIGKILL, executor) for tree in trees[others // 2 + 1 :]
        ]
        for thread in [first, *threads]:
            thread.join(10)
        for future in queued:
            future.result(10)
    assert passes == [1, others]


def test_a_waiting_caller_never_waits_for_a_pass_still_queued_on_an_executor() -> None:
    # The runtime's close() holds its registry while it signals; the spawn pool's threads may be
    # waiting for that registry, with a pass queued behind them: close must not wait for it.
    class Stalled(Executor):
        def __init__(self) -> None:
            self.jobs: list[Callable[[], object]] = []

        def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
            self.jobs.append(lambda: fn(*args, **kwargs))
            return Future()

    stalled = Stalled()
    trees = [CommandTree(2**22 + 1 + index, f"{index:016x}") for index in range(2)]
    queued = submit_signal([trees[0]], signal.SIGTERM, stalled)
    assert len(stalled.jobs) == 1
    assert not queued.done()
    signal_trees([trees[1]], signal.SIGTERM)  # runs the pass itself, for both
    assert queued.done()
    stalled.jobs[0]()  # the late job finds nothing left to do
    assert not tree_module._SWEEPS._running


def test_commands_that_end_by_themselves_make_no_proc_pass(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A /proc pass costs milliseconds per hundred processes: it belongs to a stop (timeout,
    # drain, cancellation, close), never to a command that ends on its own, with output or
    # without, whatever its exit code, even hundreds at once (issue 48, item 4).
    passes: list[int] = []
    original = tree_module._processes

    def counting() -> Any:
        passes.append(1)
        return original()

    monkeypatch.setattr(tree_module, "_processes", counting)
    commands = [f"echo {index}; echo err >&2; exit {index % 3}" for index in range(60)]

    async def scenario() -> list[SkillExecutionResult]:
        async with AsyncLocalSkillRuntime(work_root=tmp_path / "async") as runtime:
            return await asyncio.gather(*(runtime.execute(_request(c, 30)) for c in commands))

    results = asyncio.run(scenario())
    assert [(r.stdout, r.exit_code) for r in results] == [
        (f"{index}\n", index % 3) for index in range(60)
    ]
    with LocalSkillRuntime(work_root=tmp_path / "sync") as rt:
        assert [rt.execute(_request(c, 30)).exit_code for c in commands[:5]] == [0, 1, 2, 0, 1]
    assert passes == []
