"""The OpenSandbox runtime against execd's stream habits, as the double reproduces them.

execd keeps a command stream open after its final event (1 s by default), never splits a line
(one event per line whatever its length, which the SDK buffers whole) and ends a line at a bare
``\\r``. The runtime must not wait for the stream's end, must keep client memory bounded while a
command prints one enormous line, and must return the output byte for byte.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from doubles.opensandbox import OpenSandboxDouble
from doubles.opensandbox.fixtures import opensandbox_double_fixture
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.runtime.output import truncation_marker
from skillruntime.opensandbox import OpenSandboxSkillRuntime

opensandbox_double = opensandbox_double_fixture(scope="module")
"""A double of this module's own, with execd's 1 s linger (the suite's is scaled down)."""

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def runtime(opensandbox_double: OpenSandboxDouble) -> Iterator[OpenSandboxSkillRuntime]:
    runtime = OpenSandboxSkillRuntime(
        domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
    )
    yield runtime
    runtime.close()


def test_a_command_returns_without_waiting_for_the_end_of_the_stream(
    runtime: OpenSandboxSkillRuntime, opensandbox_double: OpenSandboxDouble
) -> None:
    """With execd lingering ten minutes after each final event, commands still return (a
    runtime that read the stream to its end would hang here until the test timeout)."""
    assert runtime.execute(SkillExecutionRequest(command="true")).ok
    opensandbox_double.set_tail_delay(600.0)
    try:
        for code in (0, 3):
            result = runtime.execute(SkillExecutionRequest(command=f"echo hi; exit {code}"))
            assert result.exit_code == code
            assert result.stdout == "hi\n"
        timed = runtime.execute(
            SkillExecutionRequest(command="echo before; sleep 60", timeout_seconds=1.0)
        )
        assert timed.timed_out
        assert timed.stdout == "before\n"
    finally:
        opensandbox_double.set_tail_delay(1.0)


@pytest.mark.parametrize(
    ("command", "stdout"),
    [
        ("printf 'a\\rb\\n'", "a\rb\n"),
        ("printf 'x\\r\\ny\\r\\r\\n'", "x\r\ny\r\r\n"),
        ("printf '50%%\\r100%%\\r'", "50%\r100%\r"),
        ("printf 'no newline'", "no newline"),
        ("printf '\\n\\n'", "\n\n"),
    ],
)
def test_carriage_returns_and_final_newlines_are_exact(
    runtime: OpenSandboxSkillRuntime, command: str, stdout: str
) -> None:
    result = runtime.execute(SkillExecutionRequest(command=f"{command}; {command} >&2"))
    assert result.stdout == stdout
    assert result.stderr == stdout


_MEMORY_CHILD = textwrap.dedent(
    """
    import json, resource, sys
    sys.path.insert(0, sys.argv[3])
    from skillruntime.core.models import SkillExecutionRequest
    from skillruntime.opensandbox import OpenSandboxSkillRuntime

    runtime = OpenSandboxSkillRuntime(domain=sys.argv[1], api_key=sys.argv[2])
    assert runtime.execute(SkillExecutionRequest(command="true")).ok
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    size = int(sys.argv[4])
    result = runtime.execute(
        SkillExecutionRequest(
            command=f"head -c {size} /dev/zero | tr '\\\\0' x", timeout_seconds=300
        )
    )
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    runtime.close()
    print(json.dumps({
        "growth_kib": after - before,
        "exit_code": result.exit_code,
        "truncated": result.stdout_truncated,
        "stdout": result.stdout,
    }))
    """
)


def test_a_256_mib_single_line_keeps_client_memory_under_64_mib(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    size = 256 * 1024 * 1024
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            _MEMORY_CHILD,
            opensandbox_double.domain,
            opensandbox_double.api_key,
            str(TESTS),
            str(size),
        ],
        capture_output=True,
        check=False,
        timeout=280,
    )
    assert child.returncode == 0, child.stderr.decode()[-2000:]
    report = json.loads(child.stdout)
    assert report["exit_code"] == 0
    assert report["truncated"]
    cap = 1024 * 1024
    half = cap // 2
    assert report["stdout"] == "x" * half + truncation_marker(size - cap) + "x" * (cap - half)
    assert report["growth_kib"] < 64 * 1024, f"peak RSS grew {report['growth_kib']} KiB"
