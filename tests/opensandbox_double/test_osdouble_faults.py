"""Fault injection of the OpenSandbox double, observed over raw HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from doubles.opensandbox.rawclient import RawSandbox


def _read_frames(response: requests.Response) -> tuple[list[dict[str, Any]], Exception | None]:
    """Frames received before the stream ended, and the transport error that ended it, if any."""
    raw = b""
    error: Exception | None = None
    try:
        for chunk in response.iter_content(chunk_size=None):
            raw += chunk
    except requests.RequestException as exc:
        error = exc
    frames = [json.loads(f) for f in raw.split(b"\n\n") if f.strip()]
    return frames, error


def test_status_fault_hits_only_idempotent_calls_of_its_plane(sandbox: RawSandbox) -> None:
    sandbox.double.set_fault("status", status=503, count=2, plane="lifecycle")
    assert sandbox.call("GET", "/ping").status_code == 200  # execd plane untouched
    created = sandbox.lifecycle(
        "POST",
        "/sandboxes",
        json={
            "image": {"uri": "x"},
            "entrypoint": ["true"],
            "resourceLimits": {},
            "timeout": 60,
        },
    )
    assert created.status_code == 202  # POST is never faulted
    first = sandbox.lifecycle("GET", f"/sandboxes/{sandbox.id}")
    second = sandbox.lifecycle("GET", f"/sandboxes/{sandbox.id}")
    third = sandbox.lifecycle("GET", f"/sandboxes/{sandbox.id}")
    assert [first.status_code, second.status_code, third.status_code] == [503, 503, 200]
    assert first.json()["code"] == "SERVICE_UNAVAILABLE"
    sandbox.lifecycle("DELETE", f"/sandboxes/{created.json()['id']}")


def test_rate_limit_fault_carries_retry_after(sandbox: RawSandbox) -> None:
    sandbox.double.set_fault("status", status=429, plane="execd", retry_after=7)
    limited = sandbox.call("GET", "/files/info", params={"path": "/workspace"})
    assert limited.status_code == 429
    assert limited.headers["Retry-After"] == "7"
    assert sandbox.call("GET", "/files/info", params={"path": "/workspace"}).status_code == 200


def test_unknown_fault_kind_is_rejected(sandbox: RawSandbox) -> None:
    with pytest.raises(RuntimeError):
        sandbox.double.set_fault("explode")


def test_drop_after_terminal_cuts_the_chunked_body(sandbox: RawSandbox) -> None:
    sandbox.double.set_fault("drop_after_terminal")
    response = sandbox.call("POST", "/command", json={"command": "echo a; exit 6"}, stream=True)
    frames, error = _read_frames(response)
    assert isinstance(error, requests.exceptions.ChunkedEncodingError)
    assert [f["type"] for f in frames] == ["init", "stdout", "error"]
    assert frames[-1]["error"]["evalue"] == "6"
    clean = sandbox.run({"command": "echo again"})
    assert clean[-1]["type"] == "execution_complete"


def test_no_terminal_ends_cleanly_without_terminal_event(sandbox: RawSandbox) -> None:
    sandbox.double.set_fault("no_terminal")
    response = sandbox.call("POST", "/command", json={"command": "echo a; echo b"}, stream=True)
    frames, error = _read_frames(response)
    assert error is None
    assert [f["type"] for f in frames] == ["init", "stdout", "stdout"]


def test_drop_mid_stream_kills_the_command(sandbox: RawSandbox) -> None:
    sandbox.double.set_fault("drop_mid_stream", after_events=1)
    response = sandbox.call(
        "POST",
        "/command",
        json={
            "command": "echo one; while [ ! -e /workspace/go ]; do sleep 0.02; done; echo two",
            "timeout": 30000,
        },
        stream=True,
    )
    frames, error = _read_frames(response)
    assert error is not None
    assert [f.get("text") for f in frames] == [frames[0]["text"], "one"]
    status = sandbox.call("GET", f"/command/status/{frames[0]['text']}").json()
    assert status["running"] is False
    assert status["exit_code"] == -1
