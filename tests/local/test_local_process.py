"""Command execution on the host: exit codes, streams, timeouts, process-tree kill, bounds."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from skillruntime.core.errors import ExecutionTransportError, RuntimeClosedError
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.local import LocalSkillRuntime
from skillruntime.local.process import run_command


def _request(command: str, **kwargs: Any) -> SkillExecutionRequest:
    return SkillExecutionRequest(command=command, **kwargs)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); treat it as gone when its state says so.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _wait_gone(pid: int, seconds: float = 3.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return not _alive(pid)


def test_stdout_and_stderr_are_separate_and_exit_code_is_kept(
    runtime: LocalSkillRuntime,
) -> None:
    result = runtime.execute(_request("echo out; echo err >&2; exit 7"))
    assert result.exit_code == 7
    assert result.stdout == "out\n"
    assert result.stderr == "err\n"
    assert not result.timed_out
    assert not result.ok


def test_successful_command_is_ok(runtime: LocalSkillRuntime) -> None:
    result = runtime.execute(_request("printf 'a\\nb'"))
    assert result.ok
    assert result.stdout == "a\nb"
    assert result.duration_seconds > 0


def test_stdin_is_empty(runtime: LocalSkillRuntime) -> None:
    result = runtime.execute(_request("cat; echo end"))
    assert result.stdout == "end\n"


def test_shell_killed_by_signal_reports_128_plus_signal(runtime: LocalSkillRuntime) -> None:
    result = runtime.execute(_request("kill -TERM $$"))
    assert result.exit_code == 128 + signal.SIGTERM
    assert not result.timed_out


def test_timeout_kills_process_tree_and_keeps_partial_output(
    runtime: LocalSkillRuntime, tmp_path: Path
) -> None:
    pid_file = tmp_path / "grandchild.pid"
    command = f"sleep 30 & echo $! > {pid_file}; echo started; echo warn >&2; sleep 30"
    result = runtime.execute(_request(command, timeout_seconds=0.5))
    assert result.timed_out
    assert result.exit_code == -1
    assert result.stdout == "started\n"
    assert result.stderr == "warn\n"
    grandchild = int(pid_file.read_text())
    assert _wait_gone(grandchild), "background grandchild survived the timeout"


def test_timeout_escalates_to_sigkill_when_term_is_ignored(
    runtime: LocalSkillRuntime, tmp_path: Path
) -> None:
    pid_file = tmp_path / "stubborn.pid"
    command = (
        f"(trap '' TERM; echo $BASHPID > {pid_file}; while :; do sleep 0.05; done) & "
        "trap '' TERM; sleep 30"
    )
    result = runtime.execute(_request(command, timeout_seconds=0.5))
    assert result.timed_out
    stubborn = int(pid_file.read_text())
    assert _wait_gone(stubborn)


def test_background_child_holding_pipes_is_stopped_after_shell_exits(
    runtime: LocalSkillRuntime, tmp_path: Path
) -> None:
    pid_file = tmp_path / "bg.pid"
    result = runtime.execute(
        _request(f"sleep 30 & echo $! > {pid_file}; echo done; exit 3", timeout_seconds=20)
    )
    assert result.exit_code == 3
    assert not result.timed_out
    assert result.stdout == "done\n"
    assert _wait_gone(int(pid_file.read_text()))


def test_detached_background_process_is_left_running(
    runtime: LocalSkillRuntime, tmp_path: Path
) -> None:
    pid_file = tmp_path / "daemon.pid"
    result = runtime.execute(
        _request(f"sleep 30 >/dev/null 2>&1 & echo $! > {pid_file}", timeout_seconds=20)
    )
    daemon = int(pid_file.read_text())
    try:
        assert result.ok
        assert _alive(daemon)
    finally:
        os.kill(daemon, signal.SIGKILL)


def test_output_beyond_bound_keeps_head_tail_and_marker(runtime: LocalSkillRuntime) -> None:
    # 200 000 numbered lines (~1.3 MB) on stdout, small stderr, 4 KiB bound.
    command = "seq 1 200000; echo tiny >&2"
    result = runtime.execute(_request(command, max_output_bytes=4096))
    assert result.stdout_truncated
    assert not result.stderr_truncated
    assert result.stderr == "tiny\n"
    assert result.stdout.startswith("1\n2\n3\n")
    assert result.stdout.endswith("199999\n200000\n")
    total = sum(len(f"{n}\n") for n in range(1, 200_001))
    assert f"\n... [{total - 4096} bytes truncated] ...\n" in result.stdout
    assert len(result.stdout.encode()) < 4096 + 100


def test_stderr_is_bounded_separately(runtime: LocalSkillRuntime) -> None:
    result = runtime.execute(
        _request("head -c 100000 /dev/zero | tr '\\0' e >&2; echo ok", max_output_bytes=2048)
    )
    assert result.stderr_truncated
    assert not result.stdout_truncated
    assert result.stdout == "ok\n"
    assert "[97952 bytes truncated]" in result.stderr


def test_environment_precedence_request_over_base_over_process(tmp_path: Path) -> None:
    os.environ["SKILLRUNTIME_TEST_INHERITED"] = "process"
    try:
        with LocalSkillRuntime(
            work_root=tmp_path, base_environment={"LAYER": "base", "ONLY_BASE": "b"}
        ) as rt:
            result = rt.execute(
                _request(
                    'echo "$LAYER $ONLY_BASE $SKILLRUNTIME_TEST_INHERITED"',
                    environment={"LAYER": "request"},
                )
            )
            assert result.stdout == "request b process\n"
    finally:
        del os.environ["SKILLRUNTIME_TEST_INHERITED"]


def test_environment_not_inherited_when_disabled(tmp_path: Path) -> None:
    os.environ["SKILLRUNTIME_TEST_INHERITED"] = "process"
    try:
        with LocalSkillRuntime(work_root=tmp_path, inherit_environment=False) as rt:
            result = rt.execute(
                _request('echo "[${SKILLRUNTIME_TEST_INHERITED:-}] $ONE"', environment={"ONE": "1"})
            )
            assert result.stdout == "[] 1\n"
    finally:
        del os.environ["SKILLRUNTIME_TEST_INHERITED"]


def test_working_directory_default_relative_and_missing(
    runtime: LocalSkillRuntime, tmp_path: Path
) -> None:
    (tmp_path / "work" / "sub").mkdir(parents=True)
    assert runtime.execute(_request("pwd")).stdout.strip() == str(tmp_path / "work")
    assert runtime.execute(_request("pwd", working_directory="sub")).stdout.strip() == str(
        tmp_path / "work" / "sub"
    )
    with pytest.raises(ExecutionTransportError, match="Working directory does not exist"):
        runtime.execute(_request("pwd", working_directory=str(tmp_path / "missing")))


def test_sh_fallback_runs_commands(tmp_path: Path) -> None:
    with LocalSkillRuntime(work_root=tmp_path, shell="/bin/sh") as rt:
        assert rt.shell == "/bin/sh"
        assert rt.execute(_request("echo $((1 + 2))")).stdout == "3\n"


def test_waiter_thread_path_matches_pidfd_path(tmp_path: Path) -> None:
    for use_pidfd in (True, False):
        result = run_command(
            ["/bin/sh", "-c", "echo x; exit 4"],
            cwd=str(tmp_path),
            env=None,
            timeout=5,
            max_output_bytes=1024,
            use_pidfd=use_pidfd,
        )
        assert (result.exit_code, result.stdout) == (4, "x\n")
        slow = run_command(
            ["/bin/sh", "-c", "echo y; sleep 30"],
            cwd=str(tmp_path),
            env=None,
            timeout=0.3,
            max_output_bytes=1024,
            kill_grace=0.2,
            use_pidfd=use_pidfd,
        )
        assert (slow.timed_out, slow.exit_code, slow.stdout) == (True, -1, "y\n")


def test_close_kills_running_commands(tmp_path: Path) -> None:
    rt = LocalSkillRuntime(work_root=tmp_path)
    pid_file = tmp_path / "running.pid"
    errors: list[BaseException] = []

    def run() -> None:
        try:
            rt.execute(_request(f"echo $$ > {pid_file}; sleep 30", timeout_seconds=60))
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    end = time.monotonic() + 5
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < end
        time.sleep(0.01)
    rt.close()
    worker.join(5)
    assert not worker.is_alive()
    assert len(errors) == 1
    assert isinstance(errors[0], RuntimeClosedError)
    assert _wait_gone(int(pid_file.read_text()))
    with pytest.raises(RuntimeClosedError):
        rt.execute(_request("true"))


def test_no_descriptor_or_thread_leaks(tmp_path: Path) -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    with LocalSkillRuntime(work_root=tmp_path, kill_grace_seconds=0.1) as rt:
        rt.execute(_request("true"))
        before_fds, before_threads = open_fds(), threading.active_count()
        for _ in range(10):
            rt.execute(_request("echo x; echo y >&2"))
        rt.execute(_request("sleep 5", timeout_seconds=0.2))
        for use_pidfd in (True, False):
            run_command(
                ["/bin/sh", "-c", "true"],
                cwd=str(tmp_path),
                env=None,
                timeout=5,
                max_output_bytes=1024,
                use_pidfd=use_pidfd,
            )
        # The fallback waiter thread ends just after writing its byte: wait for it, bounded.
        end = time.monotonic() + 5
        while threading.active_count() != before_threads and time.monotonic() < end:
            time.sleep(0.01)
        assert open_fds() == before_fds
        assert threading.active_count() == before_threads
