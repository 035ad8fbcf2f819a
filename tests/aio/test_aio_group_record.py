"""A ``/v1/bash`` command past its deadline whose process-group record was tampered with: the
runtime kills the command's own processes and nothing else.

The wrapper records the command's process group in a file the command can overwrite; after the
deadline the report kills that group. A record of ``01`` once meant ``kill -KILL -1`` (every
process the user may signal), a record naming another process killed that process, and a
blanked record let the command's child outlive the timeout.

Every test here runs the hostile records in a PID namespace of their own — the AIO double's
(it runs in one, like the real image's container) or one made with ``unshare`` — so a wrong
kill can reach nothing of the machine running the tests.
"""

from __future__ import annotations

import shlex
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doubles._polling import wait_until
from doubles.aio import AioDouble
from doubles.aio.rawclient import RawClient
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.aio.script import build_report
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.runtime.bridge import CANCEL_MARKER_VARIABLE

ROOT = "/home/gem/workspace/conversations"
RUNS = "/tmp/.skillruntime-aio/runs"


@pytest.fixture(scope="module")
def double() -> Iterator[AioDouble]:
    """A double of its own: a wrong kill here must not disturb other suites' commands."""
    with AioDouble(bash_api=True) as aio:
        yield aio


def _victim(double: AioDouble) -> int:
    """A process of the sandbox that no command of the runtime started (its own session and
    group, as a service process or another tenant's job would be): its pid inside."""
    client = RawClient(double)
    try:
        data = client.ok(
            "/v1/bash/exec", {"command": "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!"}
        )
    finally:
        client.close()
    pid = int(data["stdout"])
    assert not double.process_gone(pid)
    return pid


def _rewrite_record(record: str) -> str:
    """Shell that overwrites the run's record (the one record holding a pid: the tests of this
    module run one command at a time) with ``record``."""
    return (
        f'for f in {RUNS}/*.p; do if grep -q "[0-9]" "$f"; then '
        f'printf "%s\\n" {shlex.quote(record)} > "$f"; fi; done'
    )


def _timed_out_tree(double: AioDouble, record: str) -> tuple[int, AioSandboxSkillRuntime]:
    """Run (timeout 2 s) a command that starts a child, rewrites its record to ``record`` and
    outlives its deadline; returns the child's pid inside the sandbox."""
    child = f"/tmp/child-{uuid.uuid4().hex[:8]}.pid"
    command = f"sleep 300 & echo $! > {child}; {_rewrite_record(record)}; echo rewritten; wait"
    rt = AioSandboxSkillRuntime(
        base_url=double.url,
        token=double.token,
        conversation_id=f"rec-{uuid.uuid4().hex[:8]}",
        conversations_root=ROOT,
    )
    result = rt.execute(SkillExecutionRequest(command=command, timeout_seconds=2))
    assert (result.timed_out, result.stdout) == (True, "rewritten\n")
    return int(double.host_path(child).read_text()), rt


@pytest.mark.parametrize("record", ["01", "0000000001", "1", "-1", "0"])
def test_a_record_that_reads_as_every_process_kills_only_the_command(
    double: AioDouble, record: str
) -> None:
    victim = _victim(double)
    child, rt = _timed_out_tree(double, record)
    with rt:
        assert wait_until(lambda: double.process_gone(child), timeout=10)
        assert not double.process_gone(victim), "a process outside the command was killed"
        assert rt.execute(SkillExecutionRequest(command="echo usable")).stdout == "usable\n"
    _kill(double, victim)


@pytest.mark.parametrize("form", ["{pid}", "0{pid}", " {pid}"])
def test_a_record_naming_another_process_leaves_it_alive(double: AioDouble, form: str) -> None:
    victim = _victim(double)
    child, rt = _timed_out_tree(double, form.format(pid=victim))
    with rt:
        assert wait_until(lambda: double.process_gone(child), timeout=10)
        assert not double.process_gone(victim), "the process the record named was killed"
    _kill(double, victim)


@pytest.mark.parametrize("record", ["", "999999", "x"])
def test_the_child_of_a_command_that_rewrote_its_record_still_dies(
    double: AioDouble, record: str
) -> None:
    child, rt = _timed_out_tree(double, record)
    with rt:
        assert wait_until(lambda: double.process_gone(child), timeout=10)


def _kill(double: AioDouble, pid: int) -> None:
    client = RawClient(double)
    try:
        client.ok("/v1/bash/exec", {"command": f"kill -9 {pid}"})
    finally:
        client.close()


# ------------------------------------------------------------ the report in a PID namespace

_MARKER = f"{CANCEL_MARKER_VARIABLE}={uuid.uuid4().hex}"  # unique: the host's /proc shows all
_SURVIVED = ["ours=143", "victim=138"]
"""The run's leader was stopped (the report's SIGTERM comes first), its fifo closed in time, the
process outside the run lived."""

# Runs as PID 1 of a new PID namespace: a process outside the run (``setsid``: its own group
# and session), the run's group leader (started with the run's marker, as the service starts
# the wrapper) with a child in its group, the record (placeholders replaced by their pids),
# then the report. Deaths are observed as events, not polled: the victim's and the leader's
# exit statuses (138: the driver's own SIGUSR1, so it was alive; 143: the report's SIGTERM,
# 137: its SIGKILL), and the end of
# the fifo ``life`` that the leader and its child hold open. A watchdog SIGTERMs the run's
# processes after 30 s, leaving a mark, when the report left them alive.
_DRIVER = """
mkfifo "$RUN/pid" "$RUN/life"
setsid sleep 300 </dev/null >/dev/null 2>&1 & victim=$!
env "$MARK" setsid bash -c 'sleep 300 > "$1" & echo $! > "$0"; exec > "$1"; wait' \
  "$RUN/pid" "$RUN/life" </dev/null 2>/dev/null & ours=$!
read -r child < "$RUN/pid"
exec 4< "$RUN/life"
rec=${REC//@victim@/$victim}; rec=${rec//@ours@/$ours}; rec=${rec//@child@/$child}
rec=${rec//@self@/$$}
printf '%s\\n' "$rec" > "$RUN/s1.p"
bash -c "$REPORT" >/dev/null 2>&1
( sleep 30; : > "$RUN/late"; kill -TERM "$ours" "$child" ) </dev/null >/dev/null 2>&1 &
watchdog=$!
wait "$ours"; echo "ours=$?"
cat <&4 >/dev/null; [ -e "$RUN/late" ] && echo late
kill -USR1 "$victim"; kill -TERM "$watchdog"; wait "$victim"; echo "victim=$?"
"""


def _report_in_namespace(tmp_path: Path, record: str) -> list[str]:
    run = tmp_path / f"run-{uuid.uuid4().hex[:8]}"
    run.mkdir()
    report = build_report(
        run_dir=str(run), run_id="s1", nonce="n1", cap=64, marker=_MARKER, keep_files=True
    )
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "bash", "-c", _DRIVER],
        env={
            "PATH": "/usr/bin:/bin",
            "RUN": str(run),
            "REC": record,
            "REPORT": report,
            "MARK": _MARKER,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.split()


@pytest.mark.parametrize(
    "record", ["01", "0000000001", "1", "@victim@", "0@victim@", "@self@", "@ours@", "@child@"]
)
def test_the_report_kills_the_run_and_nothing_else(tmp_path: Path, record: str) -> None:
    assert _report_in_namespace(tmp_path, record) == _SURVIVED


_RECORDS = st.one_of(
    st.text(alphabet="0123456789 -+x\t", max_size=12),
    st.builds(
        "{}{}{}".format,
        st.sampled_from(["", "0", "00", " ", "-", "+"]),
        st.sampled_from(["1", "@victim@", "@ours@", "@child@", "@self@", "0"]),
        st.sampled_from(["", " ", "0", "x", "\t"]),
    ),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(record=_RECORDS)
def test_no_record_makes_the_report_kill_outside_the_run(tmp_path: Path, record: str) -> None:
    """Whatever the record holds, the process outside the run (and PID 1) survive, and the
    run's processes die (by their group when the record names it, else by their marker)."""
    assert _report_in_namespace(tmp_path, record) == _SURVIVED
