"""The double's ``/v1/shell/*``: persistent sessions, statuses and documented quirks."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from doubles._polling import wait_until
from doubles.aio import AioDouble
from doubles.aio.rawclient import RawClient as Client


def _session(client: Client, sid: str, **extra: object) -> str:
    data = client.ok("/v1/shell/sessions/create", {"id": sid, **extra})
    assert data["session_id"] == sid
    return sid


def _wait_done(client: Client, sid: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = client.ok("/v1/shell/wait", {"id": sid, "seconds": 5})["status"]
        if status != "running":
            return client.ok("/v1/shell/view", {"id": sid})
    raise AssertionError("command did not finish")


def test_unknown_session_id_is_404_session_not_found(client: Client) -> None:
    response = client.post("/v1/shell/exec", {"id": "never-created", "command": "true"})
    assert response.status_code == 404
    body = response.json()
    assert body["success"] is False
    assert "session not found" in body["message"].lower()


def test_exec_without_id_creates_a_session(client: Client) -> None:
    data = client.ok("/v1/shell/exec", {"command": "echo out; echo err >&2; false"})
    assert data["status"] == "completed"
    assert data["exit_code"] == 1
    assert data["output"] == "out\nerr"
    sessions = client.get("/v1/shell/sessions").json()["data"]["sessions"]
    assert data["session_id"] in sessions


def test_create_is_idempotent_and_state_persists(client: Client) -> None:
    sid = _session(client, "persist", exec_dir="/tmp")
    again = client.ok("/v1/shell/sessions/create", {"id": sid, "exec_dir": "/home/gem"})
    assert again["working_dir"] == "/tmp"
    client.ok("/v1/shell/exec", {"id": sid, "command": "cd /home/gem && export V=42"})
    data = client.ok("/v1/shell/exec", {"id": sid, "command": "pwd; echo $V"})
    assert data["output"] == "/home/gem\n42"
    assert data["exit_code"] == 0
    assert [c["command"] for c in data["console"]][-1] == "pwd; echo $V"


def test_async_then_wait_and_view(client: Client) -> None:
    sid = _session(client, "async")
    data = client.ok(
        "/v1/shell/exec", {"id": sid, "command": "sleep 0.3; echo fin", "async_mode": True}
    )
    assert data["status"] == "running"
    assert data["exit_code"] is None
    view = _wait_done(client, sid)
    assert view["status"] == "completed"
    assert view["exit_code"] == 0
    assert view["console"][-1]["output"] == "fin"
    assert "sleep 0.3; echo fin" in view["output"]  # the transcript, not only the output


def test_soft_timeout_returns_running_and_kill_terminates(client: Client) -> None:
    sid = _session(client, "soft")
    data = client.ok(
        "/v1/shell/exec", {"id": sid, "command": "echo begin; sleep 30", "timeout": 0.3}
    )
    assert data["status"] == "running"
    killed = client.ok("/v1/shell/kill", {"id": sid})
    assert killed["status"] == "terminated"
    assert killed["exit_code"] == killed["returncode"]
    # the session's shell survives a kill of its command
    after = client.ok("/v1/shell/exec", {"id": sid, "command": "echo alive"})
    assert after["status"] == "completed"
    assert after["output"] == "alive"


def test_hard_timeout(client: Client) -> None:
    sid = _session(client, "hard")
    data = client.ok(
        "/v1/shell/exec", {"id": sid, "command": "echo part; sleep 30", "hard_timeout": 2.0}
    )
    assert data["status"] == "hard_timeout"
    assert data["exit_code"] is None
    assert data["output"] == "part"
    assert client.ok("/v1/shell/exec", {"id": sid, "command": "echo next"})["output"] == "next"


def test_no_change_timeout_leaves_the_command_running(client: Client) -> None:
    sid = _session(client, "quiet", no_change_timeout=1)
    data = client.ok("/v1/shell/exec", {"id": sid, "command": "sleep 3; echo late"})
    assert data["status"] == "no_change_timeout"
    busy = client.ok("/v1/shell/exec", {"id": sid, "command": "echo hi"})
    assert busy["output"] == "'ErrorObservation' object has no attribute 'exit_code'"
    assert _wait_done(client, sid)["console"][-1]["output"] == "late"


def test_exit_terminates_the_session_for_good(client: Client) -> None:
    sid = _session(client, "exiting")
    first = client.ok("/v1/shell/exec", {"id": sid, "command": "exit 3"})
    assert first["status"] == "terminated"
    later = client.ok("/v1/shell/exec", {"id": sid, "command": "echo hi"})
    assert later["status"] == "terminated"
    assert later["exit_code"] is None
    assert client.ok("/v1/shell/view", {"id": sid})["status"] == "terminated"
    wrapped = _session(client, "wrapped")
    data = client.ok("/v1/shell/exec", {"id": wrapped, "command": "(\nexit 3\n)"})
    assert data["status"] == "completed"
    assert data["exit_code"] == 3


def test_admin_terminate_and_evict(client: Client, aio: AioDouble) -> None:
    sid = _session(client, "victim")
    aio.terminate_shell_session(sid)
    assert client.ok("/v1/shell/exec", {"id": sid, "command": "true"})["status"] == "terminated"
    aio.evict_shell_session(sid)
    response = client.post("/v1/shell/exec", {"id": sid, "command": "true"})
    assert response.status_code == 404


def test_truncate_at_30000_characters(client: Client) -> None:
    command = "head -c 40000 /dev/zero | tr '\\0' a"
    data = client.ok("/v1/shell/exec", {"command": command})
    assert len(data["output"]) == 30000
    full = client.ok("/v1/shell/exec", {"command": command, "truncate": False})
    assert len(full["output"]) == 40000


def test_write_feeds_the_running_command(client: Client) -> None:
    sid = _session(client, "writer")
    client.ok("/v1/shell/exec", {"id": sid, "command": "read x; echo got-$x", "async_mode": True})
    client.ok("/v1/shell/write", {"id": sid, "input": "abc", "press_enter": True})
    assert _wait_done(client, sid)["console"][-1]["output"] == "got-abc"


def test_session_management(client: Client) -> None:
    sid = _session(client, "managed")
    client.ok("/v1/shell/sessions/update", {"id": sid, "no_change_timeout": 5})
    stats = client.get("/v1/shell/sessions/stats").json()["data"]
    assert stats["total_sessions"] >= 1
    assert set(stats) >= {
        "active_sessions",
        "idle_sessions",
        "max_sessions",
        "session_timeout",
        "usage_ratio",
    }
    info = client.get("/v1/shell/sessions").json()["data"]["sessions"][sid]
    assert info["working_dir"] == "/home/gem"
    assert client.delete(f"/v1/shell/sessions/{sid}").json()["success"] is True
    assert client.delete(f"/v1/shell/sessions/{sid}").status_code == 404
    assert client.post("/v1/shell/wait", {"id": sid}).status_code == 404


def test_wait_requires_integer_seconds(client: Client) -> None:
    response = client.post("/v1/shell/wait", {"id": "x", "seconds": 1.5})
    assert response.status_code == 422
    assert client.post("/v1/shell/write", {"id": "x", "input": "y"}).status_code == 422


def test_concurrent_exec_on_one_session_hits_the_error_observation(client: Client) -> None:
    sid = _session(client, "racy")
    client.ok("/v1/shell/exec", {"id": sid, "command": "sleep 30", "async_mode": True})
    with ThreadPoolExecutor(4) as pool:
        results = list(
            pool.map(
                lambda i: client.ok("/v1/shell/exec", {"id": sid, "command": f"echo {i}"}), range(4)
            )
        )
    assert all(
        r["output"] == "'ErrorObservation' object has no attribute 'exit_code'" for r in results
    )
    assert client.ok("/v1/shell/kill", {"id": sid})["status"] == "terminated"
    assert client.ok("/v1/shell/view", {"id": sid})["console"][-1]["command"] == "sleep 30"


def test_least_recently_used_session_is_evicted_at_the_cap() -> None:
    with AioDouble(auth="none", max_shell_sessions=2) as aio:
        client = Client(aio)
        for sid in ("s1", "s2"):
            _session(client, sid)
        client.ok("/v1/shell/exec", {"id": "s1", "command": "true"})
        _session(client, "s3")
        assert client.post("/v1/shell/exec", {"id": "s2", "command": "true"}).status_code == 404
        assert client.ok("/v1/shell/exec", {"id": "s1", "command": "echo 1"})["output"] == "1"
        assert client.get("/v1/shell/sessions/stats").json()["data"]["max_sessions"] == 2
        client.close()


def test_exit_with_a_background_job_still_terminates(client: Client) -> None:
    sid = _session(client, "bg-exit")
    client.ok(
        "/v1/shell/exec", {"id": sid, "command": "setsid sleep 30 & exit 0", "async_mode": True}
    )
    deadline = time.monotonic() + 10
    status = "running"
    while status != "terminated" and time.monotonic() < deadline:
        status = client.ok("/v1/shell/wait", {"id": sid, "seconds": 1})["status"]
    assert status == "terminated"
    assert client.ok("/v1/shell/exec", {"id": sid, "command": "true"})["status"] == "terminated"


def test_heredoc_and_multiline_commands(client: Client) -> None:
    data = client.ok(
        "/v1/shell/exec",
        {"command": "cat <<'EOF'\nline $HOME\nEOF\nfor i in 1 2; do\n  echo $i\ndone"},
    )
    assert data["output"] == "line $HOME\n1\n2"


def test_idle_sessions_expire() -> None:
    with AioDouble(auth="none", shell_session_timeout=1.0) as aio:
        client = Client(aio)
        _session(client, "idle")
        client.ok("/v1/shell/exec", {"id": "idle", "command": "sleep 2", "async_mode": True})
        deadline = time.monotonic() + 20
        seen_running = 0
        while time.monotonic() < deadline:
            response = client.post("/v1/shell/view", {"id": "idle"})
            assert response.status_code == 200  # a busy session never expires
            if response.json()["data"]["status"] != "running":
                break
            seen_running += 1
            time.sleep(0.1)
        assert seen_running > 0
        assert wait_until(
            lambda: client.post("/v1/shell/view", {"id": "idle"}).status_code == 404,
            timeout=deadline - time.monotonic(),
            interval=0.05,
        )
        assert client.get("/v1/shell/sessions/stats").json()["data"]["session_timeout"] == 1
        client.close()
