"""The double's ``/v1/bash/*``: real processes, separate streams, offsets, timeouts."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from doubles._polling import wait_until
from doubles.aio import AioDouble
from doubles.aio.rawclient import RawClient as Client


def _poll_until_done(client: Client, session_id: str, command_id: str) -> dict[str, Any]:
    out, err, offset, err_offset = "", "", 0, 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        data = client.ok(
            "/v1/bash/output",
            {
                "session_id": session_id,
                "command_id": command_id,
                "offset": offset,
                "stderr_offset": err_offset,
                "wait": True,
                "wait_timeout": 5,
            },
        )
        out += data["stdout"]
        err += data["stderr"]
        offset, err_offset = data["offset"], data["stderr_offset"]
        if data["command"]["status"] != "running":
            return {"stdout": out, "stderr": err, **data["command"]}
    raise AssertionError("command did not finish")


def test_sync_exec_separates_streams_and_reports_exit_code(client: Client) -> None:
    data = client.ok(
        "/v1/bash/exec",
        {
            "command": "echo out; echo err >&2; echo $SECRET_X; pwd; exit 3",
            "env": {"SECRET_X": "v1"},
        },
    )
    assert data["status"] == "completed"
    assert data["exit_code"] == 3
    assert data["stdout"] == "out\nv1\n/home/gem\n"
    assert data["stderr"] == "err\n"
    assert data["offset"] == len(b"out\nv1\n/home/gem\n")
    assert data["stderr_offset"] == 4
    assert data["session_id"]
    assert data["command_id"]


def test_env_and_cd_do_not_persist_but_exec_dir_does(client: Client, aio: AioDouble) -> None:
    aio.host_path("/home/gem/sub").mkdir(exist_ok=True)
    first = client.ok("/v1/bash/exec", {"command": "cd /tmp; export K=1", "env": {"E": "x"}})
    sid = first["session_id"]
    again = client.ok("/v1/bash/exec", {"session_id": sid, "command": 'pwd; echo "${K:-}${E:-}-"'})
    assert again["stdout"] == "/home/gem\n-\n"
    client.ok("/v1/bash/exec", {"session_id": sid, "command": "true", "exec_dir": "/home/gem/sub"})
    later = client.ok("/v1/bash/exec", {"session_id": sid, "command": "pwd"})
    assert later["stdout"] == "/home/gem/sub\n"


def test_missing_exec_dir_is_a_tool_level_failure(client: Client) -> None:
    response = client.post("/v1/bash/exec", {"command": "true", "exec_dir": "/home/gem/nope"})
    assert response.status_code == 200
    assert response.json()["success"] is False


def test_soft_timeout_returns_running_then_output_polls_to_completion(client: Client) -> None:
    data = client.ok(
        "/v1/bash/exec",
        {"command": "echo start; sleep 1; echo done; echo e >&2", "timeout": 0.2},
    )
    assert data["status"] == "running"
    assert data["exit_code"] is None
    final = _poll_until_done(client, data["session_id"], data["command_id"])
    assert final["status"] == "completed"
    assert final["exit_code"] == 0
    assert final["stdout"] == "start\ndone\n"
    assert final["stderr"] == "e\n"


def test_async_mode_returns_immediately(client: Client) -> None:
    data = client.ok("/v1/bash/exec", {"command": "sleep 0.3; echo x", "async_mode": True})
    assert data["status"] == "running"
    final = _poll_until_done(client, data["session_id"], data["command_id"])
    assert final["stdout"] == "x\n"


def test_hard_timeout_kills_the_whole_process_group(client: Client, aio: AioDouble) -> None:
    data = client.ok(
        "/v1/bash/exec",
        {
            "command": "sleep 60 & echo $! > /home/gem/bg.pid; echo started; wait",
            "hard_timeout": 2.0,
        },
    )
    assert data["status"] == "timed_out"
    assert data["exit_code"] is None
    assert data["stdout"] == "started\n"
    pid = int(aio.host_path("/home/gem/bg.pid").read_text())
    assert wait_until(lambda: aio.process_gone(pid), timeout=5)


def test_a_hard_timeout_that_kills_only_the_started_process() -> None:
    """``hard_timeout_kills="process"``: the started ``bash`` dies, its background child (its
    streams elsewhere, so the answer does not wait for them) stays."""
    with AioDouble(hard_timeout_kills="process") as double:
        client = Client(double)
        try:
            data = client.ok(
                "/v1/bash/exec",
                {
                    "command": "sleep 60 >/dev/null 2>&1 & echo $! > /home/gem/bg.pid; wait",
                    "hard_timeout": 1,
                },
            )
            assert data["status"] == "timed_out"
            pid = int(double.host_path("/home/gem/bg.pid").read_text())
            # The service signalled before it answered: a group kill would show now, as a
            # pending SIGKILL if not yet as the child's end.
            host = double.host_pid(pid)
            assert host is not None
            assert not _sigkill_pending(host)
            client.ok("/v1/bash/exec", {"command": f"kill -9 {pid}"})
            assert wait_until(lambda: double.process_gone(pid), timeout=5)
        finally:
            client.close()


def test_kill_marks_command_killed(client: Client) -> None:
    data = client.ok("/v1/bash/exec", {"command": "sleep 30", "async_mode": True})
    response = client.post("/v1/bash/kill", {"session_id": data["session_id"], "signal": "SIGKILL"})
    assert response.json()["success"] is True
    final = _poll_until_done(client, data["session_id"], data["command_id"])
    assert final["status"] == "killed"


def test_write_feeds_stdin(client: Client) -> None:
    data = client.ok("/v1/bash/exec", {"command": "read line; echo got:$line", "async_mode": True})
    client.ok("/v1/bash/write", {"session_id": data["session_id"], "input": "hello\n"})
    final = _poll_until_done(client, data["session_id"], data["command_id"])
    assert final["stdout"] == "got:hello\n"


def test_max_output_length_truncates_the_middle(client: Client) -> None:
    data = client.ok(
        "/v1/bash/exec",
        {"command": "printf 'A%.0s' $(seq 1 300); printf 'Z'", "max_output_length": 100},
    )
    assert data["stdout"].startswith("A" * 50)
    assert data["stdout"].endswith("Z")
    assert "truncated" in data["stdout"]
    assert data["offset"] == 301
    full = client.ok(
        "/v1/bash/exec", {"command": "printf 'A%.0s' $(seq 1 300)", "max_output_length": 0}
    )
    assert full["stdout"] == "A" * 300


def test_output_offsets_are_byte_offsets(client: Client) -> None:
    data = client.ok("/v1/bash/exec", {"command": "printf 'é1'; printf 'x'"})
    sid, cid = data["session_id"], data["command_id"]
    assert data["offset"] == 4
    tail = client.ok("/v1/bash/output", {"session_id": sid, "command_id": cid, "offset": 2})
    assert tail["stdout"] == "1x"
    assert tail["offset"] == 4


def test_sessions_create_list_close(client: Client) -> None:
    info = client.ok("/v1/bash/sessions/create", {"session_id": "bs-1", "exec_dir": "/tmp"})
    assert info["session_id"] == "bs-1"
    assert info["status"] == "ready"
    assert info["working_dir"] == "/tmp"
    listed = client.get("/v1/bash/sessions").json()["data"]
    assert any(s["session_id"] == "bs-1" for s in listed)
    assert client.post("/v1/bash/sessions/bs-1/close").json()["success"] is True
    closed = client.post("/v1/bash/exec", {"session_id": "bs-1", "command": "true"}).json()
    assert closed["success"] is False


def test_unknown_session_on_output_is_404(client: Client) -> None:
    response = client.post("/v1/bash/output", {"session_id": "missing"})
    assert response.status_code == 404
    assert "Session not found" in response.json()["message"]


def test_validation_errors_are_422(client: Client) -> None:
    response = client.post("/v1/bash/exec", {"session_id": "x"})
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail[0]["loc"] == ["body", "command"]
    assert detail[0]["type"] == "missing"
    response = client.post("/v1/bash/exec", {"command": "true", "timeout": "soon"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "timeout"]


def test_bash_api_can_be_switched_off() -> None:
    with AioDouble(bash_api=False, auth="none") as aio:
        client = Client(aio)
        response = client.post("/v1/bash/exec", {"command": "true"})
        assert response.status_code == 404
        assert response.json() == {"detail": "Not Found"}
        assert client.ok("/v1/shell/exec", {"command": "echo ok"})["output"] == "ok"
        aio.set_bash_api(True)
        assert client.ok("/v1/bash/exec", {"command": "echo on"})["stdout"] == "on\n"


def test_parallel_execs_on_one_session(client: Client) -> None:
    sid = client.ok("/v1/bash/sessions/create", {})["session_id"]

    def run(i: int) -> dict[str, Any]:
        return client.ok("/v1/bash/exec", {"session_id": sid, "command": f"sleep 0.2; echo {i}"})

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(run, range(8)))
    assert [r["stdout"] for r in results] == [f"{i}\n" for i in range(8)]
    assert len({r["command_id"] for r in results}) == 8


def _sigkill_pending(host_pid: int) -> bool:
    """Whether a SIGKILL is pending for the process (sent, the process not yet gone)."""
    status = Path(f"/proc/{host_pid}/status").read_text()
    pending = [int(line.split()[1], 16) for line in status.splitlines() if "Pnd:" in line]
    return any(mask & (1 << (signal.SIGKILL - 1)) for mask in pending)
