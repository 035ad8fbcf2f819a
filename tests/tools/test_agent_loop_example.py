"""The scripted agent demo runs end to end against the local runtime."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_loop.py"


def test_agent_loop_example_runs_skill_bash_read_edit_publish(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLE), "--keep"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)},
    )
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    calls = re.findall(r"^>>> (\w+)\(", out, re.M)
    assert calls == ["skill", "bash", "read", "edit", "publish_file"]
    assert "tools offered: skill, bash, read, write, edit, ls, glob, grep, publish_file" in out
    assert "Runtime: local\nBase directory for this skill: " in out
    assert "/conversations/demo-conversation/skills/csv-report-" in out
    assert "out/report.md\nout/report.html" in out
    assert "     1\t# Report: sample.csv" in out
    assert "(1 occurrence replaced)" in out
    assert "File published successfully." in out
    assert "Error:" not in out
    url = re.search(r"^assistant: Your report is ready: (\S+)$", out, re.M)
    assert url is not None
    published = Path(unquote(urlparse(url.group(1)).path))
    assert published.is_relative_to(tmp_path)
    assert published.read_text(encoding="utf-8").startswith("# Sales sample: column profile\n")
