"""The installed `skillruntime` console script, run as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "skillruntime"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLRUNTIME_")}
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
        env=env,
    )


def test_help_runs_as_a_console_script() -> None:
    result = run("--help")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: skillruntime [OPTIONS] COMMAND [ARGS]...")
    assert "exec" in result.stdout


def test_exec_against_the_local_runtime(tmp_path: Path) -> None:
    result = run(
        "exec", "-o", f"work_root={tmp_path}", "--", "sh", "-c", "pwd; echo err >&2; exit 4"
    )

    assert result.returncode == 4
    assert result.stdout == f"{tmp_path}\n"
    assert result.stderr == "err\n"


def test_exec_timeout_exits_124(tmp_path: Path) -> None:
    result = run(
        "exec",
        "-o",
        f"work_root={tmp_path}",
        "-o",
        "kill_grace_seconds=0.2",
        "--timeout",
        "0.3",
        "echo started; sleep 30",
    )

    assert result.returncode == 124
    assert result.stdout == "started\n"
    assert "timed out" in result.stderr


def test_usage_error_exits_2_without_traceback() -> None:
    result = run("exec", "--option", "no-equals-sign", "true")

    assert result.returncode == 2
    assert "Error:" in result.stderr
    assert "Traceback" not in result.stderr
