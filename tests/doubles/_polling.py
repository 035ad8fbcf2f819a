"""Bounded polling on a condition (instead of sleeping a guessed duration), and the
"process has ended" condition the double suites poll for."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


def wait_until(
    predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.02
) -> bool:
    """Call ``predicate`` every ``interval`` seconds until it is truthy or ``timeout`` passes.

    Returns whether it became truthy; the predicate is evaluated once more at the deadline,
    so a condition met during the last pause is not missed.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def proc_state(pid: int) -> str:
    """The one-letter ``/proc/<pid>/stat`` state of a process (``"Z"`` for a zombie), or
    ``"gone"`` when the process no longer exists."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return stat.rsplit(")", 1)[1].split()[0]


def process_gone(pid: int) -> bool:
    """Whether the process has ended: it no longer exists, is a zombie awaiting its reaper, or is
    being torn down (``X``)."""
    return proc_state(pid) in ("gone", "Z", "X")
