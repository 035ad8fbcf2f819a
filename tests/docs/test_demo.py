"""``make demo`` (examples/demo.py): the console shows what the skills produced, no audit trail.

The demo runs in a fresh interpreter, as ``make demo`` runs it, with the local runtime.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"


def _run_demo(
    root: Path, *args: str, audit_env: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SKILLRUNTIME_DEMO_AUDIT"}
    if audit_env is not None:
        env["SKILLRUNTIME_DEMO_AUDIT"] = audit_env
    return subprocess.run(
        [sys.executable, str(DEMO), "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )


@pytest.mark.slow
def test_the_demo_prints_the_results_and_keeps_the_audit_trail_out(tmp_path: Path) -> None:
    done = _run_demo(tmp_path / "conversations")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = done.stdout
    # the text-stats result itself, not only its exit status
    assert "$ text-stats: exit 0" in out
    assert "words: " in out
    assert "top words" in out
    workspace = tmp_path / "conversations" / "demo"
    for name in ("report.md", "report.html", "text-stats.txt"):
        assert f"{workspace}/report/{name}" in out
    assert f"Open {workspace}/report/report.html" in out


@pytest.mark.slow
@pytest.mark.parametrize(("args", "audit_env"), [(("--audit",), None), ((), "1")])
def test_the_audit_trail_is_shown_when_asked(
    tmp_path: Path, args: tuple[str, ...], audit_env: str | None
) -> None:
    done = _run_demo(tmp_path / "conversations", *args, audit_env=audit_env)
    assert done.returncode == 0, done.stderr
    audit = [line for line in done.stderr.splitlines() if "skillruntime.audit" in line]
    assert audit
    assert all('"kind":' in line for line in audit)
