"""Contracts 3 and 4 (``docs/architecture.md``): environment precedence and command execution."""

from __future__ import annotations

import contextlib
import logging
import posixpath
import re
import tracemalloc
from collections.abc import Callable, Iterator

import pytest

from ..errors import SkillPrepareError
from ..models import BootstrapCommand, SkillExecutionRequest, SkillRuntimeConfig
from ..runtime.spi import SkillRuntime
from .base import ConformanceBase
from .context import ConformanceContext

__all__ = ["ExecuteContracts", "process_is_dead_command"]

UNICODE_TEXT = "héllo wörld — 日本語 ✓ 🎉"


def process_is_dead_command(pid_file: str, settle_seconds: float = 5.0) -> str:
    """A POSIX sh command printing ``dead`` once the process in ``pid_file`` is gone or a zombie.

    It polls for up to ``settle_seconds`` (a kill may land a moment after the result), reading
    ``/proc/<pid>/stat`` so that an unreaped zombie counts as dead; else it prints ``alive``.
    """
    attempts = max(1, int(settle_seconds * 10))
    return (
        f"p=$(cat '{pid_file}') || exit 3; i=0; "
        f'while [ "$i" -lt {attempts} ]; do '
        'if ! kill -0 "$p" 2>/dev/null; then echo dead; exit 0; fi; '
        "s=$(sed -n 's/^.*) \\(.\\).*$/\\1/p' \"/proc/$p/stat\" 2>/dev/null); "
        'if [ "$s" = Z ] || [ "$s" = X ]; then echo dead; exit 0; fi; '
        "sleep 0.1; i=$((i+1)); done; echo alive"
    )


def _kill_quietly(conformance: ConformanceContext, runtime: SkillRuntime, pid_file: str) -> None:
    with contextlib.suppress(Exception):
        conformance.run(runtime, f"kill -9 $(cat '{pid_file}') 2>/dev/null; true", timeout=10)


class _Collector(logging.Handler):
    """Collects every formatted log record (tracebacks included)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record))


@contextlib.contextmanager
def _all_logs() -> Iterator[_Collector]:
    root = logging.getLogger()
    collector = _Collector()
    level = root.level
    root.addHandler(collector)
    root.setLevel(logging.DEBUG)
    try:
        yield collector
    finally:
        root.removeHandler(collector)
        root.setLevel(level)


@contextlib.contextmanager
def _traced_peak() -> Iterator[Callable[[], int]]:
    """Measure the peak of Python allocations in this process while the block runs."""
    already = tracemalloc.is_tracing()
    if already:
        tracemalloc.reset_peak()
    else:
        tracemalloc.start()
    start, _ = tracemalloc.get_traced_memory()
    peak = 0
    try:
        yield lambda: peak
    finally:
        peak = tracemalloc.get_traced_memory()[1] - start
        if not already:
            tracemalloc.stop()


class ExecuteContracts(ConformanceBase):
    """execute: cwd, env precedence, exit codes, streams, stdin, timeouts, output bounds."""

    def test_default_working_directory_is_the_conversation_workspace(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        assert runtime.default_working_directory == conformance.workspace()
        assert conformance.check_output(runtime, "pwd").strip() == conformance.workspace()

    def test_explicit_working_directory_relative_and_absolute(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        runtime.get_file_system().make_directory("sub/dir")
        expected = posixpath.join(conformance.workspace(), "sub/dir")
        assert conformance.check_output(runtime, "pwd", cwd="sub/dir").strip() == expected
        assert conformance.check_output(runtime, "pwd", cwd=expected).strip() == expected

    def test_non_zero_exit_is_a_result_not_an_exception(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        result = conformance.run(runtime, "printf 'out'; exit 42")
        assert result.exit_code == 42
        assert not result.timed_out
        assert not result.ok
        assert result.stdout == "out"

    def test_stdout_and_stderr_are_separate(self, conformance: ConformanceContext) -> None:
        result = conformance.run(
            conformance.runtime(), "printf 'to-out\\n'; printf 'to-err\\n' >&2; printf 'more\\n'"
        )
        assert result.ok
        assert result.stdout == "to-out\nmore\n"
        assert result.stderr == "to-err\n"

    def test_stdin_is_empty(self, conformance: ConformanceContext) -> None:
        result = conformance.run(
            conformance.runtime(),
            'n=$(cat | wc -c); echo "stdin=$n"',
            timeout=max(5 * self.timeout_seconds, 1.0),
        )
        assert not result.timed_out, "stdin must be empty and closed, not left open"
        assert result.stdout.replace(" ", "") == "stdin=0\n"

    def test_a_failing_command_is_run_once(self, conformance: ConformanceContext) -> None:
        runtime = conformance.runtime()
        result = conformance.run(runtime, "printf 'x\\n' >> attempts.txt; exit 1")
        assert result.exit_code == 1
        assert runtime.get_file_system().read_text("attempts.txt") == "x\n"

    def test_environment_precedence_base_then_skill_then_request(
        self, conformance: ConformanceContext
    ) -> None:
        base = {"KIT_A": "base", "KIT_B": "base", "KIT_C": "base"}
        runtime = conformance.runtime(base_environment=base)
        config = SkillRuntimeConfig(environment={"KIT_B": "skill", "KIT_C": "skill"})
        conformance.prepare(runtime, conformance.skills.create("env"), configs={"env": config})
        out = conformance.check_output(
            runtime, 'printf \'%s %s %s\' "$KIT_A" "$KIT_B" "$KIT_C"', env={"KIT_C": "request"}
        )
        if self.supports_base_environment:
            assert out == "base skill request"
        else:
            assert out.split(" ")[1:] == ["skill", "request"]

    def test_request_environment_applies_to_one_command_only(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        once = conformance.check_output(runtime, "printf '%s' \"$KIT_ONCE\"", env={"KIT_ONCE": "1"})
        assert once == "1"
        assert conformance.check_output(runtime, "printf '%s' \"${KIT_ONCE-unset}\"") == "unset"

    def test_invalid_environment_names_are_rejected(self, conformance: ConformanceContext) -> None:
        sentinel = "kit-sentinel-value-0042"
        for bad in ("1ABC", "A-B", "A B", "", "A=B"):
            with pytest.raises(ValueError, match="name") as caught:
                SkillExecutionRequest(command="true", environment={bad: sentinel})
            assert sentinel not in str(caught.value)
            with pytest.raises(ValueError, match="name"):
                SkillRuntimeConfig(environment={bad: sentinel})
        if self.supports_base_environment:
            with pytest.raises(ValueError, match=r"(?i)name") as caught:
                conformance.runtime("bad-env", base_environment={"BAD-NAME": sentinel})
            assert sentinel not in str(caught.value)

    def test_environment_values_do_not_appear_in_results(
        self, conformance: ConformanceContext
    ) -> None:
        sentinel = "kit-sentinel-value-0043"
        result = conformance.run(conformance.runtime(), "exit 5", env={"KIT_SECRET": sentinel})
        assert result.exit_code == 5
        assert sentinel not in result.model_dump_json()
        assert sentinel not in repr(SkillExecutionRequest(command="x", environment={"K": sentinel}))

    def test_environment_values_never_appear_in_logs_or_errors(
        self, conformance: ConformanceContext
    ) -> None:
        base = "kit-sentinel-base-0044"
        skill_value = "kit-sentinel-skill-0045"
        request_value = "kit-sentinel-request-0046"
        with _all_logs() as logs:
            runtime = conformance.runtime(base_environment={"KIT_S1": base})
            config = SkillRuntimeConfig(
                environment={"KIT_S2": skill_value},
                bootstrap=(BootstrapCommand(command="echo bootstrapping; exit 4"),),
            )
            with pytest.raises(SkillPrepareError) as caught:
                conformance.prepare(
                    runtime, conformance.skills.create("quiet"), configs={"quiet": config}
                )
            conformance.prepare(
                runtime,
                conformance.skills.create("quiet-ok"),
                configs={"quiet-ok": SkillRuntimeConfig(environment={"KIT_S2": skill_value})},
            )
            result = conformance.run(runtime, "exit 3", env={"KIT_S3": request_value})
        texts = [*logs.texts, str(caught.value), caught.value.output_tail, result.model_dump_json()]
        for value in (base, skill_value, request_value):
            leaked = [text for text in texts if value in text]
            assert not leaked, f"an environment value appeared in: {leaked[0][:200]!r}"

    def test_timeout_kills_the_whole_process_tree(self, conformance: ConformanceContext) -> None:
        runtime = conformance.runtime()
        pid_file = posixpath.join(conformance.workspace(), "kit-grandchild.pid")
        conformance.add_cleanup(lambda: _kill_quietly(conformance, runtime, pid_file))
        result = conformance.run(
            runtime,
            f"sh -c 'sleep 30 & echo $! > \"{pid_file}\"; wait' & sleep 30",
            timeout=self.timeout_seconds,
        )
        assert result.timed_out
        assert result.exit_code == -1
        state = conformance.check_output(
            runtime, process_is_dead_command(pid_file, self.kill_settle_seconds), timeout=60
        )
        assert state.strip() == "dead", "a grandchild survived the timeout"

    def test_timeout_keeps_partial_output(self, conformance: ConformanceContext) -> None:
        result = conformance.run(
            conformance.runtime(),
            "printf 'kit-before-timeout\\n'; printf 'kit-err-before\\n' >&2; sleep 30",
            timeout=self.timeout_seconds,
        )
        assert result.timed_out
        assert result.exit_code == -1
        assert not result.ok
        assert "kit-before-timeout" in result.stdout
        assert "kit-err-before" in result.stderr

    def test_stdout_beyond_the_cap_keeps_head_and_tail(
        self, conformance: ConformanceContext
    ) -> None:
        cap = 4096
        middle = 3_000_000
        result = conformance.run(
            conformance.runtime(),
            f"printf 'KIT-HEAD'; head -c {middle} /dev/zero | tr '\\0' x; printf 'KIT-TAIL'",
            max_output_bytes=cap,
        )
        assert result.ok
        self._assert_bounded(result.stdout, cap, middle + 16)
        assert result.stdout_truncated
        assert not result.stderr_truncated
        assert result.stderr == ""

    def test_stderr_is_bounded_separately(self, conformance: ConformanceContext) -> None:
        cap = 2048
        middle = 1_500_000
        result = conformance.run(
            conformance.runtime(),
            f"printf 'ok'; (printf 'KIT-HEAD'; head -c {middle} /dev/zero | tr '\\0' x; "
            "printf 'KIT-TAIL') >&2",
            max_output_bytes=cap,
        )
        assert result.stdout == "ok"
        assert not result.stdout_truncated
        assert result.stderr_truncated
        self._assert_bounded(result.stderr, cap, middle + 16)

    @staticmethod
    def _assert_bounded(text: str, cap: int, total: int) -> None:
        assert text.startswith("KIT-HEADx"), text[:80]
        assert text.endswith("xKIT-TAIL"), text[-80:]
        assert len(text.encode("utf-8")) <= cap + 512, f"{len(text)} chars kept for cap {cap}"
        marker = text[len("KIT-HEAD") : -len("KIT-TAIL")].strip("x")
        assert marker, "no truncation marker between head and tail"
        numbers = [int(n) for n in re.findall(r"\d+", marker)]
        assert any(total - cap <= n <= total for n in numbers), (
            f"marker {marker!r} does not say how many bytes were dropped"
        )

    def test_memory_stays_bounded_whatever_the_command_prints(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        conformance.check_output(runtime, "true")
        printed = 48 * 1024 * 1024
        with _traced_peak() as peak:
            result = conformance.run(
                runtime,
                f"head -c {printed} /dev/zero | tr '\\0' x",
                max_output_bytes=64 * 1024,
            )
        assert result.ok
        assert result.stdout_truncated
        assert peak() < 16 * 1024 * 1024, f"{peak()} bytes held for a 64 KiB cap"

    def test_large_output_under_the_cap_is_intact(self, conformance: ConformanceContext) -> None:
        result = conformance.run(conformance.runtime(), "seq 1 100000")
        expected = "".join(f"{n}\n" for n in range(1, 100001))
        assert result.ok
        assert not result.stdout_truncated
        assert result.stdout == expected

    def test_unicode_round_trips_through_command_env_and_output(
        self, conformance: ConformanceContext
    ) -> None:
        result = conformance.run(
            conformance.runtime(),
            f"printf '%s\\n' '{UNICODE_TEXT}'; printf '%s' \"$KIT_UNI\" >&2",
            env={"KIT_UNI": UNICODE_TEXT},
        )
        assert result.ok
        assert result.stdout == UNICODE_TEXT + "\n"
        assert result.stderr == UNICODE_TEXT

    def test_commands_and_file_system_share_one_boundary(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        fs = runtime.get_file_system()
        fs.write_text("from-fs.txt", "written by fs\n")
        assert conformance.check_output(runtime, "cat from-fs.txt") == "written by fs\n"
        conformance.check_output(runtime, "printf 'written by shell' > from-shell.txt")
        assert fs.read_text("from-shell.txt") == "written by shell"
