"""execd bash sessions of the OpenSandbox double (raw HTTP and the SDK)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from opensandbox.config import ConnectionConfigSync
from opensandbox.exceptions import SandboxApiException

from doubles.opensandbox import OpenSandboxDouble
from doubles.opensandbox.rawclient import RawSandbox
from opensandbox import SandboxSync


def _run(sandbox: RawSandbox, session_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = sandbox.call("POST", f"/session/{session_id}/run", json=body, stream=True)
    assert response.status_code == 200, response.text
    raw = b"".join(response.iter_content(chunk_size=None))
    return [json.loads(f) for f in raw.split(b"\n\n") if f.strip()]


def _stdout(events: list[dict[str, Any]]) -> list[str]:
    return [e["text"] for e in events if e["type"] == "stdout"]


def test_state_persists_between_runs(sandbox: RawSandbox) -> None:
    created = sandbox.call("POST", "/session", json={"cwd": "/workspace"})
    assert created.status_code == 200
    session_id = created.json()["session_id"]
    first = _run(sandbox, session_id, {"command": "V=7; mkdir -p s; cd s; g() { echo g$1; }"})
    assert first[-1]["type"] == "execution_complete"
    second = _run(sandbox, session_id, {"command": "echo $V; pwd; g 2; false"})
    assert _stdout(second) == ["7", "/workspace/s", "g2"]
    assert second[-1]["error"]["evalue"] == "1"
    elsewhere = _run(sandbox, session_id, {"command": "pwd", "cwd": "/tmp"})
    assert _stdout(elsewhere) == ["/tmp"]
    assert sandbox.call("DELETE", f"/session/{session_id}").status_code == 200
    gone = sandbox.call("POST", f"/session/{session_id}/run", json={"command": "true"})
    assert gone.status_code == 404
    assert sandbox.call("DELETE", f"/session/{session_id}").status_code == 404


def test_exit_ends_the_session_and_timeout_kills_it(sandbox: RawSandbox) -> None:
    session_id = sandbox.call("POST", "/session", json={}).json()["session_id"]
    ended = _run(sandbox, session_id, {"command": "echo bye; exit 3"})
    assert _stdout(ended) == ["bye"]
    assert ended[-1]["error"]["evalue"] == "3"
    after = sandbox.call("POST", f"/session/{session_id}/run", json={"command": "true"})
    assert after.status_code == 404

    other = sandbox.call("POST", "/session", json={}).json()["session_id"]
    timed_out = _run(sandbox, other, {"command": "echo start; sleep 30", "timeout": 300})
    assert _stdout(timed_out) == ["start"]
    assert timed_out[-1]["error"]["evalue"] == "-1"
    assert (
        sandbox.call("POST", f"/session/{other}/run", json={"command": "true"}).status_code == 404
    )


def test_sessions_through_the_sdk(opensandbox_double: OpenSandboxDouble) -> None:
    config = ConnectionConfigSync(
        domain=opensandbox_double.domain, api_key=opensandbox_double.api_key, disable_metrics=True
    )
    sandbox = SandboxSync.create("python:3.12", connection_config=config)
    try:
        session_id = sandbox.commands.create_session(working_directory="/workspace")
        sandbox.commands.run_in_session(session_id, "export GREETING=hi; cd /tmp")
        execution = sandbox.commands.run_in_session(
            session_id, "echo $GREETING; pwd", timeout=timedelta(seconds=10)
        )
        assert execution.exit_code == 0
        assert [m.text for m in execution.logs.stdout] == ["hi", "/tmp"]
        sandbox.commands.delete_session(session_id)
        with pytest.raises(SandboxApiException) as missing:
            sandbox.commands.run_in_session(session_id, "true")
        assert missing.value.status_code == 404
    finally:
        sandbox.kill()
        sandbox.close()
