"""The ``bash`` tool: result format, exit and timeout lines, truncation, timeouts, cwd."""

from __future__ import annotations

from typing import Any

from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.tools import SkillTools


def test_stdout_is_returned_and_empty_success_is_empty(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    assert tools.dispatch("bash", {"command": "printf 'a\\nb\\n'"}) == "a\nb"
    assert tools.dispatch("bash", {"command": "true"}) == ""


def test_stderr_and_exit_code_lines(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    result = tools.dispatch("bash", {"command": "echo out; echo err >&2; exit 4"})
    assert result == "out\nSTDERR:\nerr\nExit code: 4"
    assert tools.dispatch("bash", {"command": "echo err >&2"}) == "STDERR:\nerr"


def test_timeout_line_keeps_output_so_far(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    result = tools.dispatch("bash", {"command": "echo started; sleep 30", "timeout_seconds": 0.5})
    assert result == "started\nCommand timed out"


def test_output_is_cut_at_30000_characters_with_a_marker(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    result = tools.dispatch("bash", {"command": "head -c 40000 /dev/zero | tr '\\0' x"})
    assert result == "x" * 30_000 + "\n... (output truncated: 10000 more characters)"


def test_timeout_defaults_and_is_clamped(runtime: SkillRuntime, counting: Any) -> None:
    wrapped = counting(runtime)
    tools = SkillTools(wrapped)
    tools.dispatch("bash", {"command": "true"})
    tools.dispatch("bash", {"command": "true", "timeout_seconds": 5000})
    tools.dispatch("bash", {"command": "true", "timeout": 7})
    assert [r.timeout_seconds for r in wrapped.executed] == [120.0, 600.0, 7.0]
    assert tools.dispatch("bash", {"command": "true", "timeout_seconds": 0}).startswith(
        "Error: invalid arguments for tool 'bash': timeout_seconds"
    )


def test_working_directory_relative_to_the_default(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    base = runtime.default_working_directory
    runtime.get_file_system().make_directory(base + "/sub")
    assert tools.dispatch("bash", {"command": "pwd -P"}).endswith(base.rsplit("/", 1)[-1])
    result = tools.dispatch("bash", {"command": "pwd", "working_directory": "sub"})
    assert result == base + "/sub"


def test_bad_working_directory_is_an_error_string(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    result = tools.dispatch("bash", {"command": "pwd", "working_directory": "/no/such/dir/x"})
    assert result.startswith(f"Error: running the command in the {runtime.name} runtime failed: ")
