"""The suite's preloaded interpreter (``tests/preloaded_python.py``) behaves as ``python SCRIPT``.

Each case runs the same probe script both ways, through :mod:`subprocess` and through
:class:`preloaded_python.Popen`, and compares what the script saw and did.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import preloaded_python
from slow_tests import SLOW_MODULES
from viking_real.openviking_harness import SERVER_TEST_MARKS, TEST_DIRS, selects_server_tests

TESTS = Path(__file__).resolve().parents[1]

PROBE = """\
import atexit, json, os, sys
atexit.register(lambda: print("atexit", flush=True))
line = sys.stdin.readline() if sys.argv[1] == "read" else ""
print(json.dumps({
    "argv": sys.argv,
    "path": sys.path,
    "cwd": os.getcwd(),
    "marker": os.environ.get("PROBE_MARKER"),
    "line": line,
    "main": __name__,
    "file": __file__,
}))
code = sys.argv[2]
if code == "raise":
    raise ValueError("probe failed")
sys.exit(int(code))
"""


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    script = tmp_path / "scripts" / "probe.py"
    script.parent.mkdir()
    script.write_text(PROBE)
    return script


def _both(
    probe: Path, arguments: list[str], cwd: Path, input: str = ""
) -> list[subprocess.CompletedProcess[str]]:
    env = {
        **os.environ,
        "PROBE_MARKER": "m-1",
        "PYTHONPATH": os.pathsep.join([str(TESTS), "", "relative", str(TESTS)]),
    }
    command = [sys.executable, str(probe), *arguments]
    real = subprocess.run(
        command,
        input=input,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )
    preloaded = preloaded_python.run(
        command, input=input, capture_output=True, text=True, env=env, cwd=cwd, timeout=60
    )
    return [real, preloaded]


def _seen(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return dict(json.loads(done.stdout.splitlines()[0]))


@pytest.mark.parametrize("code", ["0", "3"])
def test_the_script_sees_what_a_fresh_interpreter_gives_it(
    probe: Path, tmp_path: Path, code: str
) -> None:
    real, preloaded = _both(probe, ["read", code, "an argument"], tmp_path, input="hello\n")
    assert preloaded.returncode == real.returncode == int(code)
    assert _seen(preloaded) == _seen(real)
    assert _seen(real)["line"] == "hello\n"
    assert preloaded.stdout.splitlines()[1:] == real.stdout.splitlines()[1:] == ["atexit"]


def test_an_uncaught_exception_exits_1_with_its_traceback(probe: Path, tmp_path: Path) -> None:
    real, preloaded = _both(probe, ["no", "raise"], tmp_path)
    assert preloaded.returncode == real.returncode == 1
    for done in (real, preloaded):
        assert "ValueError: probe failed" in done.stderr
        assert "Traceback (most recent call last)" in done.stderr


def test_the_heavy_modules_are_already_imported(tmp_path: Path) -> None:
    script = tmp_path / "modules.py"
    script.write_text("import sys\nprint('sqlalchemy' in sys.modules)\n")
    done = preloaded_python.run([sys.executable, str(script)], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "True\n")


def test_pipes_talk_both_ways_and_a_timeout_can_be_waited_out(tmp_path: Path) -> None:
    script = tmp_path / "echo.py"
    script.write_text(
        "import sys\nprint('ready', flush=True)\nline = sys.stdin.readline()\n"
        "print(line.strip().upper(), flush=True)\nsys.stdin.readline()\n"
    )
    process = preloaded_python.Popen(
        [sys.executable, str(script)],
        stdin=preloaded_python.PIPE,
        stdout=preloaded_python.PIPE,
        stderr=preloaded_python.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdin is not None
    assert process.stdout.readline() == "ready\n"
    process.stdin.write("go\n")
    process.stdin.flush()
    assert process.stdout.readline() == "GO\n"
    assert process.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=0.2)
    out, err = process.communicate(timeout=30)  # closes stdin: the last readline ends
    assert (process.returncode, out, err) == (0, "", "")


def test_a_killed_script_reports_the_signal(tmp_path: Path) -> None:
    script = tmp_path / "sleep.py"
    script.write_text("import time\nprint('up', flush=True)\ntime.sleep(60)\n")
    process = preloaded_python.Popen(
        [sys.executable, str(script)], stdout=preloaded_python.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "up\n"
    with pytest.raises(subprocess.TimeoutExpired):
        process.communicate(timeout=0.2)
    process.kill()
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL


def test_only_scripts_are_run(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="SCRIPT"):
        preloaded_python.Popen([sys.executable, "-c", "pass"])


def test_every_module_of_the_real_openviking_server_is_in_a_prestarted_folder() -> None:
    users = {
        path.relative_to(TESTS).parts[0]
        for path in TESTS.rglob("test_*.py")
        if "openviking_server" in path.read_text(encoding="utf-8")
        or (
            path.parent.joinpath("conftest.py").is_file()
            and "openviking_server"
            in path.parent.joinpath("conftest.py").read_text(encoding="utf-8")
        )
    }
    users.discard("core")  # this module names the fixture
    assert users <= set(TEST_DIRS)


def test_every_module_of_the_real_openviking_server_has_the_marks_the_prestart_assumes() -> None:
    users = {
        path.relative_to(TESTS).as_posix()
        for path in TESTS.rglob("test_*.py")
        if path.relative_to(TESTS).parts[0] in TEST_DIRS
        and any(
            name in path.read_text(encoding="utf-8")
            for name in ("openviking_server", "shared_server", "openviking_harness")
        )
    }
    assert len(users) >= 4, users
    assert users <= SLOW_MODULES  # each is marked slow when collected
    assert SERVER_TEST_MARKS.issubset({"slow"})


@pytest.mark.parametrize(
    ("expression", "selects"),
    [
        ("not serial", True),
        ("slow", True),
        ("not serial and (slow or docker)", True),
        ("not slow", False),
        ("not serial and (not slow)", False),
        ("docker", False),
        ("slow and", False),
    ],
)
def test_the_prestart_follows_the_mark_expression(expression: str, selects: bool) -> None:
    assert selects_server_tests(expression) is selects
