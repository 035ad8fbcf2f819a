"""Subprocess plumbing shared by the harnesses that run a double as a server process.

A double started with ``python -m doubles.<name>.server`` needs the tests directory on its
``PYTHONPATH``, announces readiness with one line on stdout, and is stopped with SIGTERM
(then SIGKILL after a grace period). These helpers hold those three steps once.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]
"""The ``tests`` directory: the import root of ``doubles.*``."""


def double_env() -> dict[str, str]:
    """A copy of the current environment with :data:`TESTS_DIR` first on ``PYTHONPATH``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS_DIR), env.get("PYTHONPATH")]))
    return env


def read_ready_line(process: subprocess.Popen[bytes], timeout: float) -> bytes | None:
    """The first complete stdout line of ``process``, or None.

    None means the line did not arrive within ``timeout`` seconds or the process exited (or
    closed its stdout) first. Reads byte by byte so nothing past the line is consumed.
    """
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        ready, _, _ = select.select([process.stdout], [], [], min(remaining, 0.1))
        if not ready:
            if process.poll() is not None:
                return None
            continue
        byte = os.read(process.stdout.fileno(), 1)
        if not byte:
            return None
        line += byte
    return line


def stop_process(process: subprocess.Popen[bytes], grace: float) -> None:
    """Close the pipes of ``process`` and end it: SIGTERM, then SIGKILL after ``grace`` seconds.

    Closing stdin first lets a server that watches its stdin begin shutting down on its own.
    """
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=grace)
    if process.stdout is not None:
        process.stdout.close()
