"""Pause a ``SandboxAgent`` run in one process, resume it in another on the same conversation.

The first process stops at a tool that needs approval and writes the SDK's ``RunState`` (the
sandbox session state inside it names the conversation). The second process, a new interpreter
with a new client, loads it, approves and finishes: the SDK calls the client's ``resume``, which
reopens the conversation, and the report the first process wrote is there. No workspace
snapshot is taken or restored (the state's snapshot is the SDK's no-op one); on OpenSandbox the
conversation store finds the same sandbox, so no second sandbox is created.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import preloaded_python
from agents_sdk_backends import Backend, aio_backend, local_backend, opensandbox_backend
from doubles.aio import AioDouble
from doubles.opensandbox.harness import OpenSandboxDouble

CHILD = Path(__file__).with_name("resume_child.py")
TESTS = Path(__file__).resolve().parents[1]


def _run(phase: str, backend: Backend, conversation: str, state_file: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    completed = preloaded_python.run(
        [
            sys.executable,
            str(CHILD),
            phase,
            backend.name,
            json.dumps(backend.options),
            conversation,
            str(state_file),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _session_state(state_file: Path) -> dict[str, Any]:
    text = state_file.read_text()
    assert '"skillruntime"' in text
    found: list[dict[str, Any]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("type") == "skillruntime" and "conversation_id" in value:
                found.append(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(json.loads(text))
    assert found
    assert all(item == found[0] for item in found)
    return found[0]


def _check(backend: Backend, tmp_path: Path, conversation: str) -> None:
    state_file = tmp_path / "run-state.json"
    first = _run("first", backend, conversation, state_file)
    assert "words: 78" in first["outputs"][1]
    session = _session_state(state_file)
    assert session["conversation_id"] == conversation
    assert session["runtime_name"] == backend.name
    assert session["snapshot"]["type"] == "noop"  # nothing uploaded to carry the workspace

    second = _run("second", backend, conversation, state_file)
    assert second["final"] == "Published."
    *_, published, report = second["outputs"]
    assert published == "published notes/report.txt"
    assert "words: 78" in report  # the first process's file, in the same workspace
    assert (
        "words: 78" in (backend.host_workspace(conversation) / "notes" / "report.txt").read_text()
    )


def test_local_pause_and_resume_in_a_new_process(tmp_path: Path) -> None:
    _check(local_backend(tmp_path), tmp_path, "oa-resume-local")


def test_opensandbox_resume_in_a_new_process_reuses_the_sandbox(
    tmp_path: Path, opensandbox_double: OpenSandboxDouble
) -> None:
    backend = opensandbox_backend(opensandbox_double, tmp_path)
    conversation = "oa-resume-os"
    before = {sandbox["id"] for sandbox in opensandbox_double.sandboxes()}
    try:
        _check(backend, tmp_path, conversation)
        created = [s["id"] for s in opensandbox_double.sandboxes() if s["id"] not in before]
        assert len(created) == 1  # resumed, not replaced
    finally:
        backend.cleanup(conversation)
    assert {sandbox["id"] for sandbox in opensandbox_double.sandboxes()} == before


def test_aio_pause_and_resume_in_a_new_process(tmp_path: Path, aio_double: AioDouble) -> None:
    _check(aio_backend(aio_double), tmp_path, "oa-resume-aio")


@pytest.mark.parametrize("field", ["conversation_id", "runtime_name"])
def test_a_tampered_state_is_refused_on_resume(tmp_path: Path, field: str) -> None:
    backend = local_backend(tmp_path)
    state_file = tmp_path / "run-state.json"
    _run("first", backend, "oa-tamper", state_file)
    text = state_file.read_text()
    bad = {"conversation_id": "../escape", "runtime_name": "aio"}[field]
    original = _session_state(state_file)[field]
    state_file.write_text(text.replace(json.dumps(original), json.dumps(bad)))
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    completed = preloaded_python.run(
        [
            sys.executable,
            str(CHILD),
            "second",
            backend.name,
            json.dumps(backend.options),
            "unused",
            str(state_file),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert completed.returncode != 0
    expected = "conversation" if field == "conversation_id" else "cannot resume"
    assert expected in completed.stderr
