"""execd ``/command`` of the OpenSandbox double over raw HTTP: events, exit codes, isolation."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from doubles._polling import proc_state, process_gone, wait_until
from doubles.opensandbox import OpenSandboxDouble
from doubles.opensandbox.harness import SCALED_TAIL_DELAY
from doubles.opensandbox.rawclient import RawSandbox, create_raw
from doubles.opensandbox.registry import Registry


def _texts(events: list[dict[str, Any]], kind: str) -> list[str]:
    return [e["text"] for e in events if e["type"] == kind]


def test_line_events_blank_lines_and_nonzero_exit(sandbox: RawSandbox) -> None:
    events = sandbox.run({"command": "printf 'a\\n\\nb\\n'; echo err >&2; printf tail; exit 3"})
    assert events[0]["type"] == "init"
    assert events[0]["text"]
    assert all(isinstance(e["timestamp"], int) for e in events)
    assert _texts(events, "stdout") == ["a", "\n", "b", "tail"]
    assert _texts(events, "stderr") == ["err"]
    assert events[-1]["type"] == "error"
    assert events[-1]["error"] == {
        "ename": "CommandExecError",
        "evalue": "3",
        "traceback": ["exit status 3"],
    }
    assert not [e for e in events if e["type"] == "execution_complete"]


def test_success_ends_with_execution_complete(sandbox: RawSandbox) -> None:
    events = sandbox.run({"command": "echo ok", "timeout": 5000})
    assert [e["type"] for e in events] == ["init", "stdout", "execution_complete"]
    assert isinstance(events[-1]["execution_time"], int)


def test_timeout_kills_the_whole_process_group_with_minus_one(sandbox: RawSandbox) -> None:
    events = sandbox.run(
        {
            "command": "sleep 300 & echo $! > /workspace/child.pid; echo started; wait",
            "timeout": 300,
        }
    )
    assert _texts(events, "stdout") == ["started"]
    assert events[-1]["error"]["evalue"] == "-1"
    assert events[-1]["error"]["traceback"] == ["signal: killed"]
    pid = int((sandbox.double.workspace_of(sandbox.id) / "child.pid").read_text())
    assert wait_until(lambda: process_gone(pid))


def test_commands_and_files_share_workspace_and_tmp_per_sandbox(
    opensandbox_double: OpenSandboxDouble, http: requests.Session, sandbox: RawSandbox
) -> None:
    events = sandbox.run(
        {"command": "echo hi > /workspace/a.txt; echo t > /tmp/t.txt; pwd", "cwd": "/workspace"}
    )
    assert _texts(events, "stdout") == ["/workspace"]
    assert (opensandbox_double.workspace_of(sandbox.id) / "a.txt").read_text() == "hi\n"
    assert sandbox.call("GET", "/files/download", params={"path": "/tmp/t.txt"}).content == b"t\n"
    other = create_raw(opensandbox_double, http)
    try:
        seen = other.run({"command": "ls -A /workspace; ls -A /tmp"})
        assert _texts(seen, "stdout") == []
    finally:
        other.lifecycle("DELETE", f"/sandboxes/{other.id}")
    assert not Path("/workspace/a.txt").exists()


def test_missing_cwd_is_an_error_event_without_exit_code(sandbox: RawSandbox) -> None:
    events = sandbox.run({"command": "true", "cwd": "/workspace/nope"})
    assert [e["type"] for e in events] == ["error"]
    evalue = events[0]["error"]["evalue"]
    assert "no such file or directory" in evalue
    assert not evalue.lstrip("-").isdigit()


def test_argv_is_literal_and_envs_apply(sandbox: RawSandbox) -> None:
    events = sandbox.run({"argv": ["printf", "%s|", "$HOME", "x'y", ""]})
    assert _texts(events, "stdout") == ["$HOME|x'y||"]
    events = sandbox.run({"command": "echo $FOO:$HOME", "envs": {"FOO": "bar"}})
    assert _texts(events, "stdout") == ["bar:/root"]


def test_sandbox_env_is_visible_to_commands(
    opensandbox_double: OpenSandboxDouble, http: requests.Session
) -> None:
    raw = create_raw(opensandbox_double, http, env={"GREETING": "hello"})
    try:
        assert _texts(raw.run({"command": "echo $GREETING"}), "stdout") == ["hello"]
    finally:
        raw.lifecycle("DELETE", f"/sandboxes/{raw.id}")


def test_bad_request_bodies_are_400_json(sandbox: RawSandbox) -> None:
    bodies: list[dict[str, Any]] = [
        {},
        {"command": "  "},
        {"argv": []},
        {"command": "x", "timeout": -1},
    ]
    for body in bodies:
        response = sandbox.call("POST", "/command", json=body)
        assert response.status_code == 400, body
        assert response.json()["code"] == "INVALID_REQUEST_BODY"


def test_status_of_finished_and_unknown_commands(sandbox: RawSandbox) -> None:
    events = sandbox.run({"command": "exit 4"})
    command_id = events[0]["text"]
    status = sandbox.call("GET", f"/command/status/{command_id}").json()
    assert status["id"] == command_id
    assert status["content"] == "exit 4"
    assert status["running"] is False
    assert status["exit_code"] == 4
    assert status["finished_at"]
    assert sandbox.call("GET", "/command/status/nope").status_code == 404


def test_background_command_status_and_logs(sandbox: RawSandbox) -> None:
    sandbox.call("POST", "/directories", json={"/workspace/flags": {"mode": 755}})
    events = sandbox.run(
        {
            "command": (
                "echo one; while [ ! -e /workspace/flags/go ]; do sleep 0.02; done; echo two"
            ),
            "background": True,
        }
    )
    assert [e["type"] for e in events] == ["init", "execution_complete"]
    command_id = events[0]["text"]
    assert sandbox.call("GET", f"/command/status/{command_id}").json()["running"] is True
    assert wait_until(
        lambda: sandbox.call("GET", f"/command/{command_id}/logs").content == b"one\n"
    )
    first = sandbox.call("GET", f"/command/{command_id}/logs")
    cursor = int(first.headers["EXECD-COMMANDS-TAIL-CURSOR"])
    assert cursor == 4
    (sandbox.double.workspace_of(sandbox.id) / "flags" / "go").write_text("")
    assert wait_until(
        lambda: not sandbox.call("GET", f"/command/status/{command_id}").json()["running"]
    )
    rest = sandbox.call("GET", f"/command/{command_id}/logs", params={"cursor": cursor})
    assert rest.content == b"two\n"
    assert sandbox.call("GET", f"/command/status/{command_id}").json()["exit_code"] == 0


def test_output_streams_before_the_command_ends(sandbox: RawSandbox) -> None:
    """The first line arrives while the command still waits for a file the test creates."""
    flag = sandbox.double.workspace_of(sandbox.id) / "go"
    response = sandbox.call(
        "POST",
        "/command",
        json={
            "command": "echo first; while [ ! -e /workspace/go ]; do sleep 0.02; done; echo second",
            "timeout": 20000,
        },
        stream=True,
    )
    lines = response.iter_lines(chunk_size=1)
    seen: list[dict[str, Any]] = []
    for line in lines:
        if not line.strip():
            continue
        event = json.loads(line)
        seen.append(event)
        if event.get("text") == "first":
            flag.write_text("")
        if event["type"] in ("execution_complete", "error"):
            break
    assert [e.get("text") for e in seen if e["type"] == "stdout"] == ["first", "second"]
    assert seen[-1]["type"] == "execution_complete"


def test_interrupt_kills_a_running_command(sandbox: RawSandbox) -> None:
    result: dict[str, Any] = {}
    started = threading.Event()

    def consume() -> None:
        response = sandbox.http.post(
            f"{sandbox.execd}/command",
            json={"command": "echo up; sleep 300"},
            stream=True,
            timeout=60,
        )
        events = []
        for line in response.iter_lines(chunk_size=1):
            if line.strip():
                events.append(json.loads(line))
                if events[-1]["type"] == "init":
                    result["id"] = events[-1]["text"]
                    started.set()
        result["events"] = events

    worker = threading.Thread(target=consume)
    worker.start()
    assert started.wait(10)
    assert wait_until(
        lambda: sandbox.call("GET", f"/command/status/{result['id']}").json()["running"]
    )
    with requests.Session() as other:
        interrupted = other.delete(
            f"{sandbox.execd}/command", params={"id": result["id"]}, timeout=30
        )
    assert interrupted.status_code == 200
    worker.join(30)
    assert result["events"][-1]["error"]["evalue"] == "-1"
    assert sandbox.call("DELETE", "/command", params={"id": result["id"]}).status_code == 500


def test_deleting_the_sandbox_kills_its_commands(
    opensandbox_double: OpenSandboxDouble, http: requests.Session
) -> None:
    raw = create_raw(opensandbox_double, http)
    events = raw.run({"command": "sleep 300 & echo $! > /workspace/pid", "background": True})
    assert events[-1]["type"] == "execution_complete"
    pid_file = opensandbox_double.workspace_of(raw.id) / "pid"
    assert wait_until(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    pid = int(pid_file.read_text())
    assert raw.lifecycle("DELETE", f"/sandboxes/{raw.id}").status_code == 204
    assert wait_until(lambda: process_gone(pid))


def test_large_output_streams_with_bounded_server_memory(sandbox: RawSandbox) -> None:
    """64 MiB of output in 1000-byte lines: every byte arrives, server RSS stays small."""
    total_mib = 64
    response = sandbox.call(
        "POST",
        "/command",
        json={
            "command": f"head -c {total_mib}M /dev/zero | tr '\\0' x | fold -w 1000",
            "timeout": 120000,
        },
        stream=True,
    )
    received = 0
    last: dict[str, Any] = {}
    buffer = b""
    for chunk in response.iter_content(chunk_size=256 * 1024):
        buffer += chunk
        frames = buffer.split(b"\n\n")
        buffer = frames.pop()
        for frame in frames:
            event = json.loads(frame)
            if event["type"] == "stdout":
                received += len(event["text"])
            last = event
    assert received == total_mib * 1024 * 1024
    assert last["type"] == "execution_complete"
    status = Path(f"/proc/{sandbox.double.pid}/status").read_text()
    peak_kib = int(
        next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1]
    )
    assert peak_kib < 200 * 1024, f"server peak RSS {peak_kib} KiB"
    assert os.path.isdir(sandbox.double.workspace_of(sandbox.id))


def test_silent_commands_carry_ping_events(sandbox: RawSandbox) -> None:
    sandbox.double.set_ping_interval(0.05)
    try:
        events = sandbox.run({"command": "sleep 0.5; echo done"})
    finally:
        sandbox.double.set_ping_interval(3.0)
    kinds = [e["type"] for e in events]
    assert "ping" in kinds
    assert kinds[0] == "init"
    # pings come at any moment, between the output and the completion too (as execd's do)
    assert [kind for kind in kinds if kind != "ping"] == ["init", "stdout", "execution_complete"]


def test_uid_and_gid_drop_privileges(sandbox: RawSandbox) -> None:
    events = sandbox.run({"command": "id -u; id -g", "uid": 65534, "gid": 65534})
    assert [e["text"] for e in events if e["type"] == "stdout"] == ["65534", "65534"]
    rejected = sandbox.call("POST", "/command", json={"command": "id", "gid": 1})
    assert rejected.status_code == 400


def test_pause_freezes_the_sandbox_processes(sandbox: RawSandbox) -> None:
    events = sandbox.run(
        {"command": "sleep 300 & echo $! > /workspace/pid; wait", "background": True}
    )
    assert events[-1]["type"] == "execution_complete"
    pid_file = sandbox.double.workspace_of(sandbox.id) / "pid"
    assert wait_until(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    pid = int(pid_file.read_text())
    # The pid is written as soon as the shell forks; the child may still be running into exec.
    assert wait_until(lambda: proc_state(pid) == "S")
    assert sandbox.lifecycle("POST", f"/sandboxes/{sandbox.id}/pause").status_code == 202
    assert wait_until(lambda: proc_state(pid) in ("D", "T"))
    assert sandbox.lifecycle("POST", f"/sandboxes/{sandbox.id}/resume").status_code == 202
    assert wait_until(lambda: proc_state(pid) == "S")


def test_only_workspace_tmp_and_home_are_writable(sandbox: RawSandbox) -> None:
    marker = f"osdouble-{sandbox.id}"
    events = sandbox.run(
        {"command": f"echo h > ~/{marker}; touch /opt/{marker} 2>&1; echo $HOME", "cwd": "/"}
    )
    stdout = [e["text"] for e in events if e["type"] == "stdout"]
    assert "Read-only file system" in stdout[0]
    assert stdout[1] == "/root"
    assert not Path(f"/opt/{marker}").exists()
    assert not Path(f"/root/{marker}").exists()
    got = sandbox.call("GET", "/files/download", params={"path": f"~/{marker}"})
    assert got.content == b"h\n"


def test_death_by_signal_is_minus_one_with_go_wording(sandbox: RawSandbox) -> None:
    events = sandbox.run({"command": "echo x; kill -TERM $$"})
    assert events[-1]["error"]["evalue"] == "-1"
    assert events[-1]["error"]["traceback"] == ["signal: terminated"]
    status = sandbox.call("GET", f"/command/status/{events[0]['text']}").json()
    assert status["exit_code"] == -1
    assert status["error"] == "signal: terminated"


def test_a_bare_carriage_return_ends_a_line_as_in_execd(sandbox: RawSandbox) -> None:
    events = sandbox.run({"command": "printf 'a\\rb\\n'; printf 'c\\r\\nd\\r\\re\\n\\n\\r\\nf'"})
    assert _texts(events, "stdout") == ["a", "b", "c", "d", "\n", "e", "\n", "\n", "f"]


def test_a_long_line_is_one_event_never_split(sandbox: RawSandbox) -> None:
    """A 5 MiB line without a newline, then a short one: two events, every byte in place."""
    size = 5 * 1024 * 1024 + 3
    events = sandbox.run(
        {"command": f"head -c {size} /dev/zero | tr '\\0' x; printf '\\nnext\\n'; echo e >&2"}
    )
    texts = _texts(events, "stdout")
    assert [len(t) for t in texts] == [size, 4]
    assert texts[0] == "x" * size
    assert texts[1] == "next"
    assert _texts(events, "stderr") == ["e"]
    assert events[-1]["type"] == "execution_complete"


def test_a_long_multibyte_line_keeps_every_character(sandbox: RawSandbox) -> None:
    """Pieces of a long line are cut by bytes (1 MiB is not a multiple of the 9-byte unit);
    characters across the cuts survive."""
    events = sandbox.run({"command": "yes 'é€😀' | head -n 200000 | tr -d '\\n'"})
    assert _texts(events, "stdout") == ["é€😀" * 200000]


def _read_after_terminal(sandbox: RawSandbox, wait: float) -> tuple[str, bytes | None]:
    """Run ``true`` over a raw socket; return the terminal event's type and what the stream
    delivered within ``wait`` seconds after it (``None``: still open, nothing more)."""
    url = urlsplit(sandbox.execd)
    body = json.dumps({"command": "true"}).encode()
    with socket.create_connection((url.hostname, url.port), timeout=30) as conn:
        conn.sendall(
            f"POST {url.path}/command HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        received = b""
        while b"execution_complete" not in received:
            chunk = conn.recv(65536)
            assert chunk, "stream ended before the terminal event"
            received += chunk
        after = received.split(b"execution_complete", 1)[1]
        while b"\n\n" not in after:
            after += conn.recv(65536)
        tail = after.split(b"\n\n", 1)[1]
        if b"0\r\n\r\n" in tail:  # the body's end came in the same read as the terminal event
            return "execution_complete", tail
        conn.settimeout(wait)
        try:
            more = conn.recv(65536)
        except TimeoutError:
            return "execution_complete", None
        return "execution_complete", tail + more


def test_the_grace_after_the_terminal_event_is_one_second_by_default(tmp_path: Path) -> None:
    assert Registry(tmp_path).tail_delay == 1.0


def test_the_stream_stays_open_after_the_terminal_event(sandbox: RawSandbox) -> None:
    """execd's grace: the final chunk comes only after ``tail_delay`` (1 s by default)."""
    sandbox.double.set_tail_delay(30.0)
    try:
        kind, more = _read_after_terminal(sandbox, 0.5)
    finally:
        sandbox.double.set_tail_delay(1.0)
    assert kind == "execution_complete"
    assert more is None  # nothing, not even the end of the chunked body
    sandbox.double.set_tail_delay(0.0)
    try:
        kind, more = _read_after_terminal(sandbox, 10.0)
    finally:
        sandbox.double.set_tail_delay(1.0)
    assert more is not None
    assert b"0\r\n\r\n" in more  # the chunked body's end follows at once


def _hang_up_after_terminal(sandbox: RawSandbox, command: str) -> None:
    """Run ``command`` and close the connection as soon as its terminal event arrived."""
    response = sandbox.call("POST", "/command", json={"command": command}, stream=True)
    assert response.status_code == 200
    buffer = b""
    for chunk in response.iter_content(chunk_size=None):
        buffer += chunk
        if b'"execution_complete"' in buffer or b'"error"' in buffer:
            break
    response.close()  # the connection goes, in execd's grace period


@pytest.mark.parametrize("tail_delay", [1.0, SCALED_TAIL_DELAY])
def test_hanging_up_in_the_grace_period_relays_sigpipe_to_every_running_command(
    sandbox: RawSandbox, tail_delay: float
) -> None:
    """As execd does: the SIGPIPE it takes ending a stream whose client left is relayed to the
    process group of every command running in the sandbox; one reading to the end kills none.
    So it is with execd's 1 s linger and with the linger the suites scale it down to."""
    sandbox.double.set_tail_delay(tail_delay)
    try:
        _relay_on_hang_up(sandbox)
    finally:
        sandbox.double.set_tail_delay(1.0)


def _relay_on_hang_up(sandbox: RawSandbox) -> None:
    marker = f"/tmp/hangup-{os.getpid()}-{threading.get_ident()}"
    results: list[list[dict[str, Any]]] = []

    def long_command(name: str) -> None:
        results.append(sandbox.run({"command": f"touch {marker}-{name}; sleep 30"}))

    host_tmp = sandbox.double.workspace_of(sandbox.id).parent / "tmp"
    before = sandbox.double.stats()["grace_hangups"]
    sandbox.run({"command": "true"})  # read to its end: nothing is relayed
    runner = threading.Thread(target=long_command, args=("a",))
    runner.start()
    assert wait_until((host_tmp / f"{Path(marker).name}-a").exists)
    _hang_up_after_terminal(sandbox, "true")
    runner.join(timeout=30)
    assert not runner.is_alive()
    (events,) = results
    assert events[-1]["type"] == "error"
    assert events[-1]["error"]["evalue"] == "-1"
    assert sandbox.double.stats()["grace_hangups"] == before + 1


def _read_until(response: requests.Response, marker: bytes) -> tuple[bytes, Iterator[bytes]]:
    """Read a command stream until ``marker`` arrived; the bytes so far and the rest's reader."""
    chunks = response.iter_content(chunk_size=None)
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        if marker in buffer:
            break
    return buffer, chunks


@pytest.mark.parametrize("how", ["delete", "kill_behind_back"])
def test_removing_a_sandbox_cuts_its_open_streams(
    opensandbox_double: OpenSandboxDouble, http: requests.Session, how: str
) -> None:
    """execd dies with its sandbox: a stream still lingering after its terminal event, and one
    whose command still runs, end where they stand, with no terminal event and no chunked
    terminator (the client's read fails), never as a clean end."""
    raw = create_raw(opensandbox_double, http)
    lingering = raw.call("POST", "/command", json={"command": "echo hi"}, stream=True)
    with requests.Session() as other:
        running = other.post(
            f"{raw.execd}/command", json={"command": "echo up; sleep 30"}, stream=True, timeout=30
        )
        _, rest_lingering = _read_until(lingering, b'"execution_complete"')
        seen_running, rest_running = _read_until(running, b'"up"')
        if how == "delete":
            assert raw.lifecycle("DELETE", f"/sandboxes/{raw.id}").status_code == 204
        else:
            assert opensandbox_double.kill_behind_back(raw.id)
        for rest in (rest_lingering, rest_running):
            with pytest.raises(requests.exceptions.ChunkedEncodingError):
                b"".join(rest)
    assert b'"error"' not in seen_running
