"""Ending a sandbox right after a command is quiet: nothing logged above DEBUG, nothing on stderr.

A command's result comes back at its report while its stream is still read to its end (execd
keeps it open about a second after the final event). Killing the sandbox in that second cuts the
connection (execd dies with the sandbox; the double does the same), and the SDK logs every
failed ``commands.run`` at ERROR with the httpx traceback. So a private runtime's ``close()``
and ``destroy_conversation_sandbox()`` end the streams still being drained before the kill.

Every record at WARNING or above is captured, whatever its logger (the SDK's ``opensandbox.*``
ones included, whatever level someone gave them), and so is the process's stderr; a script run
as a user would run it (no logging configured: Python prints WARNING and above to stderr) must
print nothing either.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from doubles.opensandbox import OpenSandboxDouble
from doubles.opensandbox.fixtures import opensandbox_double_fixture
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime

opensandbox_double = opensandbox_double_fixture(scope="module")
"""A double of this module's own, with execd's 1 s linger (the suite's is scaled down)."""

ECHO = SkillExecutionRequest(command="echo hi")
SETTLE_SECONDS = 5.0
"""How long a test waits, after the close, for the command threads to end (a cut stream is
logged by its reading thread, possibly after ``close()`` returned)."""


class _Everything(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def every_warning() -> Iterator[list[logging.LogRecord]]:
    """Every record at WARNING or above of any logger while the block runs: a logger whose level
    was raised (the suite may quiet the SDK's) is lowered to WARNING, a disabled one enabled, and
    a logger that does not propagate gets the handler too."""
    handler = _Everything()
    manager = logging.root.manager
    loggers = [logging.getLogger()] + [
        logger for logger in list(manager.loggerDict.values()) if isinstance(logger, logging.Logger)
    ]
    saved = [(logger, logger.level, logger.disabled) for logger in loggers]
    disabled = manager.disable
    logging.disable(logging.NOTSET)
    hooked = [logging.getLogger()] + [logger for logger in loggers[1:] if not logger.propagate]
    for logger in loggers:
        if logger.level > logging.WARNING:
            logger.setLevel(logging.WARNING)
        logger.disabled = False
    for logger in hooked:
        logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        for logger in hooked:
            logger.removeHandler(handler)
        for logger, level, was_disabled in saved:
            logger.setLevel(level)
            logger.disabled = was_disabled
        logging.disable(disabled)


def _settle() -> None:
    """Wait (bounded) for the runtimes' command threads to end."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        if not [t for t in threading.enumerate() if t.name.startswith("opensandbox-command")]:
            return
        time.sleep(0.02)


def _described(records: list[logging.LogRecord]) -> list[str]:
    return [f"{r.name} {r.levelname} {r.getMessage()} {r.exc_info!r}" for r in records]


def _options(double: OpenSandboxDouble, how: str) -> dict[str, object]:
    options: dict[str, object] = {"domain": double.domain, "api_key": double.api_key}
    if how == "destroy":
        options["conversation_id"] = f"quiet-{uuid.uuid4().hex[:8]}"
        options["conversation_store"] = InMemoryConversationStore()
    return options


@pytest.mark.slow
def test_the_suite_sees_what_a_cut_stream_logs(
    opensandbox_double: OpenSandboxDouble, capfd: pytest.CaptureFixture[str]
) -> None:
    """The capture is not blind: a sandbox killed behind the runtime's back while its last
    stream lingers (the double cuts it, as a dying execd does) is logged by the SDK."""
    runtime = OpenSandboxSkillRuntime(**_options(opensandbox_double, "close"))  # type: ignore[arg-type]
    try:
        assert runtime.execute(ECHO).stdout == "hi\n"
        sandbox_id = runtime.sandbox_id
        assert sandbox_id is not None
        with every_warning() as records:
            assert opensandbox_double.kill_behind_back(sandbox_id)
            _settle()
    finally:
        runtime.close()
    assert any(r.name.startswith("opensandbox") for r in records), _described(records)
    assert any("RemoteProtocolError" in repr(r.exc_info) for r in records), _described(records)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["close", "destroy"])
def test_sync_ending_the_sandbox_right_after_a_command_is_quiet(
    how: str, opensandbox_double: OpenSandboxDouble, capfd: pytest.CaptureFixture[str]
) -> None:
    runtime = OpenSandboxSkillRuntime(**_options(opensandbox_double, how))  # type: ignore[arg-type]
    deletes = opensandbox_double.stats()["deletes"]
    try:
        assert runtime.execute(ECHO).stdout == "hi\n"
        capfd.readouterr()
        with every_warning() as records:
            if how == "destroy":
                runtime.destroy_conversation_sandbox()
            runtime.close()
            _settle()
    finally:
        runtime.close()
    assert _described(records) == []
    assert capfd.readouterr().err == ""
    assert opensandbox_double.stats()["deletes"] == deletes + 1


@pytest.mark.slow
@pytest.mark.parametrize("how", ["close", "destroy"])
def test_async_ending_the_sandbox_right_after_a_command_is_quiet(
    how: str, opensandbox_double: OpenSandboxDouble, capfd: pytest.CaptureFixture[str]
) -> None:
    runtime = AsyncOpenSandboxSkillRuntime(**_options(opensandbox_double, how))  # type: ignore[arg-type]
    deletes = opensandbox_double.stats()["deletes"]

    async def command() -> str:
        return (await runtime.execute(ECHO)).stdout

    async def end() -> None:
        if how == "destroy":
            await runtime.destroy_conversation_sandbox()
        await runtime.close()

    try:
        assert asyncio.run(command()) == "hi\n"
        capfd.readouterr()
        with every_warning() as records:
            asyncio.run(end())
            _settle()
    finally:
        asyncio.run(runtime.close())
    assert _described(records) == []
    assert capfd.readouterr().err == ""
    assert opensandbox_double.stats()["deletes"] == deletes + 1


_SCRIPT = """
import asyncio, sys
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime

options = {"domain": sys.argv[1], "api_key": sys.argv[2]}
runtime = OpenSandboxSkillRuntime(**options)
assert runtime.execute(SkillExecutionRequest(command="echo hi")).stdout == "hi\\n"
runtime.close()

async def main():
    async with AsyncOpenSandboxSkillRuntime(**options) as runtime:
        assert (await runtime.execute(SkillExecutionRequest(command="echo hi"))).ok

asyncio.run(main())
print("done")
"""


@pytest.mark.slow
def test_a_script_closing_right_after_a_command_prints_nothing_on_stderr(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    """As a user runs it: no logging configured, so Python's last-resort handler would print
    any record at WARNING or above (with its traceback) to stderr."""
    script = tmp_path / "close_after_command.py"
    script.write_text(_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(script), opensandbox_double.domain, opensandbox_double.api_key],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "done\n", "")
