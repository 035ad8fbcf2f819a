"""A concurrent swapper cannot carry the local file API out of a conversation workspace.

A separate process exchanges ``<workspace>/d`` (a real directory) with a symbolic link to a
directory outside, atomically (``renameat2(RENAME_EXCHANGE)``), as fast as it can, while this
process reads, writes, deletes, lists and downloads below ``d``. Every operation either works on
the directory inside or is refused; nothing outside is ever read, written, deleted or left behind.

``SKILLRUNTIME_RACE_ATTEMPTS`` sets the attempts per operation (default 10 000);
``SKILLRUNTIME_RACE_COMMAND_ATTEMPTS`` those of the working-directory race (default 500, each
attempt starts a shell).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import io
import logging
import multiprocessing
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from skillruntime.core.errors import SkillRuntimeError
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.local import LocalSkillRuntime

logger = logging.getLogger(__name__)

ATTEMPTS = int(os.environ.get("SKILLRUNTIME_RACE_ATTEMPTS", "10000"))
COMMAND_ATTEMPTS = int(os.environ.get("SKILLRUNTIME_RACE_COMMAND_ATTEMPTS", "500"))

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
INSIDE = b"inside content"
OUTSIDE = b"OUTSIDE SECRET"


def _swap_forever(directory: str, stop: Event, ready: Event) -> None:
    """Exchange ``directory/d`` and ``directory/d-swap`` atomically until ``stop`` is set."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    first = os.path.join(directory, "d").encode()
    second = os.path.join(directory, "d-swap").encode()
    ready.set()
    while not stop.is_set():
        for _ in range(64):
            if libc.renameat2(_AT_FDCWD, first, _AT_FDCWD, second, _RENAME_EXCHANGE) != 0:
                raise OSError(ctypes.get_errno(), "renameat2 failed")


@dataclass
class Arena:
    runtime: LocalSkillRuntime
    workspace: Path
    outside: Path
    inside_fd: int  # the real directory, wherever the swapper has put it

    def outside_state(self) -> dict[str, bytes]:
        return {path.name: path.read_bytes() for path in sorted(self.outside.iterdir())}


@pytest.fixture
def arena(tmp_path: Path) -> Iterator[Arena]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_bytes(OUTSIDE)
    (outside / "victim").write_bytes(OUTSIDE)
    (outside / "outside-only.txt").write_bytes(OUTSIDE)
    with LocalSkillRuntime(conversation_id="race", conversations_root=tmp_path / "c") as runtime:
        fs = runtime.get_file_system()
        fs.write_bytes("d/f", INSIDE)
        fs.write_bytes("d/victim", INSIDE)
        workspace = Path(runtime.default_working_directory)
        (workspace / "d-swap").symlink_to(outside)
        inside_fd = os.open(workspace / "d", os.O_RDONLY | os.O_DIRECTORY)
        context = multiprocessing.get_context("fork")
        stop, ready = context.Event(), context.Event()
        swapper = context.Process(target=_swap_forever, args=(str(workspace), stop, ready))
        swapper.start()
        try:
            assert ready.wait(10)
            yield Arena(runtime, workspace, outside, inside_fd)
        finally:
            stop.set()
            swapper.join(10)
            os.close(inside_fd)
        assert swapper.exitcode == 0, "the swapper stopped early"


def _race(attempts: int, operation: Callable[[int], bool]) -> Counter[str]:
    """Run ``operation`` ``attempts`` times; it returns whether the attempt escaped."""
    outcomes: Counter[str] = Counter()
    for attempt in range(attempts):
        try:
            outcomes["escaped" if operation(attempt) else "inside"] += 1
        except SkillRuntimeError as exc:
            outcomes[type(exc).__name__] += 1
    return outcomes


def _assert_raced(outcomes: Counter[str], attempts: int, arena: Arena) -> None:
    logger.info("race outcomes over %d attempts: %s", attempts, dict(outcomes))
    assert outcomes["escaped"] == 0, outcomes
    assert sum(outcomes.values()) == attempts
    assert outcomes["inside"] > 0, f"no attempt reached the directory inside: {outcomes}"
    assert outcomes["WorkspaceEscapeError"] > 0, f"the swap was never observed: {outcomes}"
    assert arena.outside_state() == {
        "f": OUTSIDE,
        "outside-only.txt": OUTSIDE,
        "victim": OUTSIDE,
    }
    leftovers = [p for p in arena.workspace.rglob("*") if p.name.endswith((".tmp", ".part"))]
    assert leftovers == []


def test_reads_never_return_outside_content(arena: Arena) -> None:
    fs = arena.runtime.get_file_system()
    outcomes = _race(ATTEMPTS, lambda _: fs.read_bytes("d/f") != INSIDE)
    _assert_raced(outcomes, ATTEMPTS, arena)


def test_writes_never_land_outside(arena: Arena) -> None:
    fs = arena.runtime.get_file_system()
    outcomes = _race(ATTEMPTS, lambda i: fs.write_bytes(f"d/new-{i % 50}", b"x") != 1)
    _assert_raced(outcomes, ATTEMPTS, arena)
    assert {name for name in os.listdir(arena.inside_fd) if name.startswith("new-")}


def test_deletes_never_remove_outside_files(arena: Arena) -> None:
    fs = arena.runtime.get_file_system()

    def delete(_: int) -> bool:
        os.close(os.open("victim", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=arena.inside_fd))
        fs.delete("d/victim")
        return False

    outcomes = _race(ATTEMPTS, delete)
    _assert_raced(outcomes, ATTEMPTS, arena)


def test_listings_never_show_outside_entries(arena: Arena) -> None:
    fs = arena.runtime.get_file_system()
    outcomes = _race(
        ATTEMPTS,
        lambda _: any(info.name == "outside-only.txt" for info in fs.list_directory("d")),
    )
    _assert_raced(outcomes, ATTEMPTS, arena)


def test_downloads_never_copy_outside_content(arena: Arena, tmp_path: Path) -> None:
    fs = arena.runtime.get_file_system()
    destination = tmp_path / "downloaded"

    def download(attempt: int) -> bool:
        if attempt % 100:  # mostly into a stream: creating host files dominates otherwise
            buffer = io.BytesIO()
            fs.download("d/f", buffer)
            return buffer.getvalue() != INSIDE
        destination.unlink(missing_ok=True)
        fs.download("d/f", destination)
        return destination.read_bytes() != INSIDE

    outcomes = _race(ATTEMPTS, download)
    _assert_raced(outcomes, ATTEMPTS, arena)


def test_commands_never_start_outside(arena: Arena) -> None:
    def run(_: int) -> bool:
        result = arena.runtime.execute(
            SkillExecutionRequest(command="cat f", working_directory="d")
        )
        return result.stdout.encode() != INSIDE

    outcomes = _race(COMMAND_ATTEMPTS, run)
    logger.info("race outcomes over %d attempts: %s", COMMAND_ATTEMPTS, dict(outcomes))
    assert outcomes["escaped"] == 0, outcomes
    assert outcomes["inside"] > 0, outcomes
    assert arena.outside_state()["f"] == OUTSIDE


def test_greps_below_a_swapped_directory_never_read_outside(arena: Arena) -> None:
    from skillruntime.core.files.search import GrepQuery

    fs = arena.runtime.get_file_system()
    queries = (GrepQuery("SECRET|inside", output_mode="content"), GrepQuery("SECRET"))

    def grep(attempt: int) -> bool:
        root = fs.stat("d")
        if root is None:
            raise AssertionError("d vanished")
        entries = fs.grep(root, queries[attempt % 2]).entries
        return any("SECRET" in entry or "outside-only" in entry for entry in entries)

    outcomes = _race(ATTEMPTS, grep)
    _assert_raced(outcomes, ATTEMPTS, arena)


def test_greps_of_the_workspace_never_follow_the_swapped_link_out(arena: Arena) -> None:
    from skillruntime.core.files.search import GrepQuery

    fs = arena.runtime.get_file_system()
    root = fs.stat(".")
    assert root is not None
    seen: Counter[str] = Counter()
    for attempt in range(ATTEMPTS):
        query = GrepQuery("SECRET|inside" if attempt % 2 else "SECRET", output_mode="content")
        entries = fs.grep(root, query).entries
        assert not any("SECRET" in entry or "outside-only" in entry for entry in entries)
        seen["found" if entries else "none"] += 1
    logger.info("workspace greps over %d attempts: %s", ATTEMPTS, dict(seen))
    assert seen["found"] > 0, seen
    assert arena.outside_state() == {
        "f": OUTSIDE,
        "outside-only.txt": OUTSIDE,
        "victim": OUTSIDE,
    }
