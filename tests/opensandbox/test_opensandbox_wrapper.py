"""The OpenSandbox command wrapper, run with the host's bash and split the way execd splits.

Every case compares what the wrapper reports (through :class:`WrapperOutput`) with the same
command run directly and cut by :class:`~skillruntime.core.runtime.output.HeadTailBuffer`, the
buffer of the local runtime: the bytes, the truncation marker and the flags must be identical.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doubles._polling import process_gone, wait_until
from skillruntime.core.runtime.output import HeadTailBuffer
from skillruntime.opensandbox.wrapper import (
    FLAG_TIMED_OUT,
    KILL_GRACE_SECONDS,
    WrapperOutput,
    build_wrapper,
)


def execd_lines(data: bytes) -> Iterator[str]:
    """execd's line events: ``\\n`` and a bare ``\\r`` end a line, ``\\r\\n`` is one break, an
    empty line is ``"\\n"``, a final unterminated line is sent, nothing is split."""
    pending = bytearray()
    last_was_cr = False
    for byte in data:
        if byte in (0x0A, 0x0D):
            if pending:
                yield pending.decode("utf-8", "replace")
                pending.clear()
            elif not (byte == 0x0A and last_was_cr):
                yield "\n"
            last_was_cr = byte == 0x0D
            continue
        last_was_cr = False
        pending.append(byte)
    if pending:
        yield pending.decode("utf-8", "replace")


def run_wrapped(
    command: str,
    tmp_path: Path,
    *,
    cap: int = 1 << 20,
    timeout: float = 30.0,
    kill_grace: float = KILL_GRACE_SECONDS,
) -> tuple[WrapperOutput, list[str], subprocess.CompletedProcess[bytes]]:
    nonce = secrets.token_hex(8)
    script = build_wrapper(
        command=command,
        run_dir=str(tmp_path / "runs"),
        run_id=secrets.token_hex(4),
        nonce=nonce,
        cap=cap,
        timeout=timeout,
        kill_grace=kill_grace,
    )
    done = subprocess.run(
        ["bash", "-c", script],
        input=b"must not be read",
        capture_output=True,
        check=False,
        timeout=timeout + 30,
    )
    output = WrapperOutput(nonce, cap)
    events = list(execd_lines(done.stdout))
    for event in events:
        if output.add_line(event):
            break
    return output, events, done


def direct(command: str, cap: int) -> tuple[tuple[str, bool], tuple[str, bool], int]:
    done = subprocess.run(
        ["bash", "-c", command], stdin=subprocess.DEVNULL, capture_output=True, check=False
    )
    out, err = HeadTailBuffer(cap), HeadTailBuffer(cap)
    out.feed(done.stdout)
    err.feed(done.stderr)
    code = done.returncode
    return out.text(), err.text(), 128 - code if code < 0 else code  # as the local runtime


EXACT = [
    "printf 'a\\rb\\n'",
    "printf 'progress 10%%\\rprogress 100%%\\r\\n'",
    "printf 'no newline at end'",
    "printf '\\n\\n\\r\\r\\n'",
    "printf 'a\\n'; printf 'e\\r' >&2; exit 3",
    "printf '\\377\\376 bad utf-8 \\303'",
    "printf 'é ✓\\n\\n🎉'",
    "true",
    "n=$(cat | wc -c); echo $n",
    "echo hi # a comment",
    "kill -9 $$",
]


@pytest.mark.parametrize("command", EXACT)
def test_output_and_exit_code_are_exactly_the_command_s(command: str, tmp_path: Path) -> None:
    output, _, _ = run_wrapped(command, tmp_path)
    expected_out, expected_err, code = direct(command, 1 << 20)
    assert output.trailer is not None
    assert output.trailer.exit_code == code
    assert output.trailer.flag == 0
    assert output.stdout() == expected_out
    assert output.stderr() == expected_err
    assert not output.malformed
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.binary(max_size=3000).map(lambda b: re.sub(rb"[^\n\r\x80-\xff]", b"x", b) + b)
    | st.lists(st.sampled_from([b"\r", b"\n", b"\r\n", b"ab", b"\xc3\xa9", b"\xff"])).map(b"".join),
    cap=st.integers(min_value=2, max_value=2500),
)
def test_any_bytes_and_any_cap_come_back_as_head_tail_buffer_renders_them(
    data: bytes, cap: int, tmp_path: Path
) -> None:
    sample = tmp_path / "sample.bin"
    sample.write_bytes(data)
    command = f"cat {sample}; cat {sample} >&2"
    output, _, _ = run_wrapped(command, tmp_path, cap=cap)
    expected_out, expected_err, _ = direct(command, cap)
    assert output.stdout() == expected_out
    assert output.stderr() == expected_err
    assert output.trailer is not None
    assert output.trailer.stdout_size == len(data)


def test_a_huge_single_line_crosses_as_the_caps_in_small_events(tmp_path: Path) -> None:
    size = 64 * 1024 * 1024
    cap = 1 << 20
    command = f"head -c {size} /dev/zero | tr '\\0' x"
    output, events, _ = run_wrapped(command, tmp_path, cap=cap)
    text, truncated = output.stdout()
    assert truncated
    assert text == "x" * (cap // 2) + f"\n... [{size - cap} bytes truncated] ...\n" + "x" * (
        cap - cap // 2
    )
    assert max(len(e) for e in events) <= 65536
    assert sum(len(e) for e in events) < cap * 4 // 3 + 4096  # base64 of the caps, no more


def test_the_watchdog_kills_the_process_tree_and_the_output_so_far_is_kept(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "child.pid"
    command = f"echo started; printf partial >&2; sleep 300 & echo $! > {pid_file}; wait"
    started = time.monotonic()
    output, _, done = run_wrapped(command, tmp_path, timeout=0.5)
    assert time.monotonic() - started < 60  # the command would sleep 300 s
    assert output.trailer is not None
    assert output.trailer.flag == FLAG_TIMED_OUT
    assert output.stdout() == ("started\n", False)
    assert output.stderr() == ("partial", False)
    assert done.returncode == 0
    assert wait_until(lambda: process_gone(int(pid_file.read_text())))


@pytest.mark.slow
def test_the_watchdog_sends_term_first_and_a_command_that_ends_on_it_reports(
    tmp_path: Path,
) -> None:
    """As the local runtime: at the deadline the group gets ``TERM``, so a command can say
    goodbye; it ended on it, so nothing waits for the grace."""
    command = "trap 'echo got TERM; exit 3' TERM; echo started; sleep 300 & wait"
    started = time.monotonic()
    output, _, _ = run_wrapped(command, tmp_path, timeout=0.5, kill_grace=30.0)
    assert time.monotonic() - started < 15  # not the grace
    assert output.trailer is not None
    assert output.trailer.flag == FLAG_TIMED_OUT
    assert output.stdout() == ("started\ngot TERM\n", False)


@pytest.mark.slow
def test_a_command_ignoring_term_is_killed_after_the_grace(tmp_path: Path) -> None:
    pid_file = tmp_path / "cmd.pid"
    command = f"trap '' TERM; echo $$ > {pid_file}; sleep 300; echo survived"
    started = time.monotonic()
    output, _, _ = run_wrapped(command, tmp_path, timeout=0.5, kill_grace=1.0)
    assert time.monotonic() - started >= 1.5  # the deadline, then the grace
    assert output.trailer is not None
    assert output.trailer.flag == FLAG_TIMED_OUT
    assert output.stdout() == ("", False)
    assert wait_until(lambda: process_gone(int(pid_file.read_text())))


@pytest.mark.slow
def test_what_outlives_the_term_dies_as_soon_as_the_command_s_shell_ended(
    tmp_path: Path,
) -> None:
    """A child ignoring ``TERM`` is killed with the rest of the group once the command's shell
    ended on it, not after the grace."""
    pid_file = tmp_path / "child.pid"
    command = f"(trap '' TERM; exec sleep 300) & echo $! > {pid_file}; sleep 300"
    started = time.monotonic()
    output, _, _ = run_wrapped(command, tmp_path, timeout=0.5, kill_grace=60.0)
    assert time.monotonic() - started < 30  # not the grace
    assert output.trailer is not None
    assert output.trailer.flag == FLAG_TIMED_OUT
    assert wait_until(lambda: process_gone(int(pid_file.read_text())))


def test_the_watchdog_kills_the_command_even_when_the_wrapper_is_killed(
    tmp_path: Path,
) -> None:
    """execd kills the wrapper's process group (client gone, its own timeout): the command,
    in a session of its own, still dies at the deadline."""
    pid_file = tmp_path / "cmd.pid"
    nonce = secrets.token_hex(8)
    script = build_wrapper(
        command=f"echo $$ > {pid_file}; exec sleep 300",
        run_dir=str(tmp_path / "runs"),
        run_id="r1",
        nonce=nonce,
        cap=1024,
        timeout=1.0,
    )
    wrapper = subprocess.Popen(["bash", "-c", script], start_new_session=True)
    assert wait_until(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    os.killpg(wrapper.pid, 9)
    wrapper.wait()
    command_pid = int(pid_file.read_text())
    assert wait_until(lambda: process_gone(command_pid), timeout=30)


def test_records_a_command_writes_cannot_point_the_timeout_kill_elsewhere(
    tmp_path: Path,
) -> None:
    """The watchdog kills the group the wrapper got from ``$!``, not one read from a file: a
    command overwriting every file of its run directory with ids (``01`` is read as ``-1`` by
    ``kill -KILL -01``) leaves a neighbour process alone, and still dies at the deadline."""
    neighbour = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        runs = tmp_path / "runs"
        forged = " ".join(["01", "-1", "1", str(neighbour.pid), f"-{neighbour.pid}"])
        command = (
            f"for f in {runs}/*; do echo '{forged}' > \"$f\"; done; "
            f'for n in 01 -1 1 {neighbour.pid}; do echo "$n" > {runs}/"$n"; done; '
            "exec sleep 300"
        )
        started = time.monotonic()
        output, _, _ = run_wrapped(command, tmp_path, timeout=0.5)
        assert time.monotonic() - started < 60  # the command would sleep 300 s
        assert output.trailer is not None
        assert output.trailer.flag == FLAG_TIMED_OUT
        assert neighbour.poll() is None
    finally:
        neighbour.kill()
        neighbour.wait()


def test_an_interrupt_kills_the_command_and_reports_what_it_printed(tmp_path: Path) -> None:
    nonce = secrets.token_hex(8)
    script = build_wrapper(
        command="echo up; exec sleep 300",
        run_dir=str(tmp_path / "runs"),
        run_id="r2",
        nonce=nonce,
        cap=1024,
        timeout=300,
    )
    wrapper = subprocess.Popen(
        ["bash", "-c", script], start_new_session=True, stdout=subprocess.PIPE
    )
    assert wait_until(lambda: list((tmp_path / "runs").glob("r2.o")) != [])
    assert wait_until(lambda: (tmp_path / "runs" / "r2.o").read_bytes() == b"up\n")
    os.killpg(wrapper.pid, 15)  # execd's interrupt starts with SIGTERM to the group
    stdout, _ = wrapper.communicate(timeout=30)
    output = WrapperOutput(nonce, 1024)
    for event in execd_lines(stdout):
        output.add_line(event)
    assert output.trailer is not None
    assert output.trailer.flag == 2
    assert output.stdout() == ("up\n", False)


def test_a_run_directory_that_cannot_be_created_is_reported(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    nonce = secrets.token_hex(8)
    script = build_wrapper(
        command="echo never",
        run_dir=str(blocker / "runs"),
        run_id="r3",
        nonce=nonce,
        cap=1024,
        timeout=10,
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, check=False)
    output = WrapperOutput(nonce, 1024)
    assert any(output.add_line(line) for line in execd_lines(done.stdout))
    assert output.setup_failed
    assert output.trailer is None


def test_a_forged_or_foreign_marker_is_data_not_a_report(tmp_path: Path) -> None:
    output, _, _ = run_wrapped("echo 'SROS0000000000000000 S 0 0 0 0'; exit 4", tmp_path)
    assert output.trailer is not None
    assert output.trailer.exit_code == 4
    assert output.stdout() == ("SROS0000000000000000 S 0 0 0 0\n", False)


def test_section_memory_is_bounded_by_the_cap_whatever_arrives() -> None:
    output = WrapperOutput("abc", 100)
    output.add_line("SROSabc O")
    for _ in range(1000):
        output.add_line("eHh4eHh4eHh4eHh4")
    text, _ = output.stdout()
    assert len(text.encode()) <= 100
