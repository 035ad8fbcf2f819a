"""The real ``openviking`` server's own virtual environment, built once per machine.

OpenViking is AGPL-3.0, so nothing of the project imports it: the server is installed into a
virtual environment of its own and the real-server tests talk to it over HTTP. Building it takes
about 1.1 GB and minutes (2 on a 2-core machine with pip's download cache warm, about 11 with every
download fresh), so it is done by the setup step (``make test`` runs
``scripts/setup.sh`` with ``SETUP_OPENVIKING=1``, which runs this file), announced with its
progress, size and time, and never from inside a test: a test that finds it missing fails with the
command to run.

Run as a script: ``python tests/viking_real/openviking_env.py`` builds it if missing (one line per
package pip collects) and prints one line with where it is, its size and how long it took.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from filelock import FileLock

__all__ = [
    "OPENVIKING_VERSION",
    "VENV_ENV_VAR",
    "OpenVikingEnvironmentMissingError",
    "build_openviking_venv",
    "default_venv_dir",
    "require_openviking_venv",
]

OPENVIKING_VERSION = "0.5.2"
"""The exact ``openviking`` release the tests run against (PyPI)."""

VENV_ENV_VAR = "SKILLRUNTIME_OPENVIKING_VENV"
"""Overrides where the server's virtual environment lives."""

BUILD_COMMAND = "make setup SETUP_OPENVIKING=1  (or: python tests/viking_real/openviking_env.py)"

_MARKER = ".skillruntime-complete"
_INSTALL_TIMEOUT = 1800.0


class OpenVikingEnvironmentMissingError(RuntimeError):
    """The server's environment has not been built on this machine."""


def default_venv_dir() -> Path:
    """``$SKILLRUNTIME_OPENVIKING_VENV`` or ``~/.cache/skillruntime/openviking-<version>-venv``."""
    configured = os.environ.get(VENV_ENV_VAR)
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "skillruntime" / f"openviking-{OPENVIKING_VERSION}-venv"


def _complete(venv: Path) -> bool:
    marker = venv / _MARKER
    return marker.is_file() and marker.read_text().strip() == OPENVIKING_VERSION


def require_openviking_venv(venv: Path | None = None) -> Path:
    """The built environment; raises :class:`OpenVikingEnvironmentMissingError` (naming the command
    that builds it) when it is missing or incomplete. Never installs anything."""
    venv = venv or default_venv_dir()
    if not _complete(venv):
        raise OpenVikingEnvironmentMissingError(
            f"the real OpenViking server's environment ({venv}) is not built on this machine;"
            f" build it once with: {BUILD_COMMAND}"
        )
    return venv


def _size_mb(path: Path) -> float:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total / 1e6


def build_openviking_venv(venv: Path | None = None, *, out: TextIO | None = None) -> Path:
    """Build the environment if it is missing (idempotent; a file lock serializes builders).

    A marker written after a successful install makes later calls instant; an interrupted
    install leaves no marker and is redone from scratch. Progress goes to ``out`` (a text stream).
    """
    stream = out or sys.stdout
    venv = venv or default_venv_dir()
    venv.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with FileLock(str(venv) + ".lock", timeout=_INSTALL_TIMEOUT):
        if _complete(venv):
            stream.write(
                f"    openviking {OPENVIKING_VERSION}: ready at {venv}"
                f" ({_size_mb(venv):.0f} MB, built before)\n"
            )
            return venv
        stream.write(
            f"    openviking {OPENVIKING_VERSION}: building {venv}"
            " (once per machine; about 1.1 GB, 2 to 11 minutes)\n"
        )
        stream.flush()
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "venv", str(venv)], check=True, timeout=_INSTALL_TIMEOUT
        )
        _pip_install(venv, stream)
        (venv / _MARKER).write_text(OPENVIKING_VERSION + "\n")
        stream.write(
            f"    openviking {OPENVIKING_VERSION}: built {venv}"
            f" ({_size_mb(venv):.0f} MB in {time.monotonic() - started:.0f} s)\n"
        )
        return venv


def _pip_install(venv: Path, stream: TextIO) -> None:
    """``pip install openviking==VERSION``, one numbered line per package it collects."""
    write = stream.write
    process = subprocess.Popen(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
            f"openviking=={OPENVIKING_VERSION}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    tail: list[str] = []
    collected = 0
    deadline = time.monotonic() + _INSTALL_TIMEOUT
    for line in process.stdout:
        tail = [*tail[-29:], line]
        if line.startswith("Collecting "):
            collected += 1
            name = line.removeprefix("Collecting ").split(" (from", 1)[0].strip()
            write(f"    [{collected}] {name}\n")
        if time.monotonic() > deadline:
            process.kill()
            break
    code = process.wait(timeout=60)
    if code != 0:
        write("".join(tail))
        raise RuntimeError(f"pip install openviking=={OPENVIKING_VERSION} failed (exit {code})")


if __name__ == "__main__":
    build_openviking_venv()
