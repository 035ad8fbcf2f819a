"""Process helpers shared by the bash and shell services of the AIO double."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

HOME = "/home/gem"

#: Each captured stream (bash stdout/stderr, shell transcript) keeps at most this many bytes;
#: output beyond it is read and dropped so that a chatty command cannot exhaust memory.
MAX_CAPTURE_BYTES = 32 * 1024 * 1024


def command_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every sandbox command starts with (nothing from the server's own env)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": HOME,
        "USER": "gem",
        "LOGNAME": "gem",
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "TERM": "xterm",
        "WORKSPACE": HOME,
    }
    if extra:
        env.update(extra)
    return env


def descendants(pid: int) -> list[int]:
    """All descendant pids of ``pid`` (children first-level first), read from ``/proc``."""
    found: list[int] = []
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            tasks = list(Path(f"/proc/{current}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in children:
                child_pid = int(child)
                found.append(child_pid)
                stack.append(child_pid)
    return found


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to a process group, ignoring a group that is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_pids(pids: list[int], sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to each pid, ignoring pids that are already gone."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def middle_truncate(text: str, limit: int) -> str:
    """Keep the head and tail of ``text`` within ``limit`` characters (0 disables)."""
    if limit <= 0 or len(text) <= limit:
        return text
    half = limit // 2
    dropped = len(text) - 2 * half
    return f"{text[:half]}\n... [{dropped} characters truncated] ...\n{text[len(text) - half :]}"
