"""``skillruntime viking session show|commit ID`` against the session endpoints' protocol double.

The commands are reached through ``build_cli()`` (the viking plugin's ``skillruntime_cli`` hook).
Errors are ``Error: [CODE] message`` with exit status 1 (2 for a usage mistake); the API key is
never printed; a commit is one ``session.commit`` audit event.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner, Result

from doubles.viking_sessions import VikingSessionsDouble
from skillruntime.core.cli import build_cli
from skillruntime.core.observability.audit import AUDIT_LOGGER_NAME
from skillruntime.core.tools.turn_record import TurnRecord, TurnToolCall
from skillruntime.viking import VikingSessionSink, VikingStoreOptions

Invoke = Callable[..., Result]
SESSION = "cli-chat-7"
API_KEY = "cli-session-key-9f3e1d"
ROOT = "viking://user/default/skills/greeter"


@pytest.fixture
def server() -> Iterator[VikingSessionsDouble]:
    with VikingSessionsDouble() as double:
        yield double


@pytest.fixture
def invoke(server: VikingSessionsDouble, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    for name in ("API_KEY", "ACCOUNT", "AGENT", "USER", "CACHE_DIR"):
        monkeypatch.delenv(f"SKILLRUNTIME_VIKING_{name}", raising=False)
    env = {
        "SKILLRUNTIME_VIKING_SERVER_URL": server.url,
        "SKILLRUNTIME_VIKING_API_KEY": API_KEY,
        "SKILLRUNTIME_VIKING_READ_TIMEOUT": "0.5",
        "SKILLRUNTIME_VIKING_OPERATION_TIMEOUT": "3",
    }

    def run(*args: str) -> Result:
        return CliRunner().invoke(build_cli(), ["viking", "session", *args], env=env)

    return run


def _store_turn(server: VikingSessionsDouble) -> None:
    options = VikingStoreOptions(server_url=server.url)
    call = TurnToolCall("c1", "bash", "ok", skills=(ROOT,), arguments={"command": "sh x.sh"})
    with VikingSessionSink(options, SESSION) as sink:
        assert sink.record_turn(TurnRecord("turn-1", "Greet me", "Hello!", (call,))).written


def test_show_prints_the_messages_of_a_stored_turn(
    server: VikingSessionsDouble, invoke: Invoke
) -> None:
    _store_turn(server)
    shown = invoke("show", SESSION)
    assert shown.exit_code == 0, shown.output
    assert f"session:   {SESSION}" in shown.output
    assert "messages:  2" in shown.output
    assert "  user  turn turn-1" in shown.output
    assert f"    tool bash [completed] {ROOT}" in shown.output
    assert "    text Hello!" in shown.output
    as_json = invoke("show", SESSION, "--json")
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    assert data["session"]["session_id"] == SESSION
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"]
    assert API_KEY not in shown.output + as_json.output


def test_commit_archives_and_prints_the_task(
    server: VikingSessionsDouble, invoke: Invoke, caplog: pytest.LogCaptureFixture
) -> None:
    _store_turn(server)
    # The write's own event is captured too when an earlier test of this worker left the
    # audit logger at INFO: only the commit's events count here.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER_NAME):
        committed = invoke("commit", SESSION, "--json")
    assert committed.exit_code == 0, committed.output
    answer = json.loads(committed.output)
    assert answer["archived"] is True
    assert answer["task_id"]
    assert len(server.archives(SESSION)) == 1
    assert server.messages(SESSION) == []
    events = [r.audit for r in caplog.records if getattr(r, "audit", {}).get("kind")]
    assert [(e["kind"], e["outcome"], e["conversation_id"]) for e in events] == [
        ("session.commit", "ok", SESSION)
    ]
    again = invoke("commit", SESSION)
    assert again.exit_code == 0, again.output
    assert "status:    skipped" in again.output  # nothing left to archive


def test_a_missing_session_is_an_error_with_its_code(invoke: Invoke) -> None:
    for command in ("show", "commit"):
        result = invoke(command, "nowhere")
        assert result.exit_code == 1, result.output
        assert "Error: [SESSION_NOT_FOUND] " in result.output
        assert API_KEY not in result.output


def test_a_failed_commit_is_an_error_and_not_retried(
    server: VikingSessionsDouble, invoke: Invoke, caplog: pytest.LogCaptureFixture
) -> None:
    _store_turn(server)
    caplog.clear()  # only the commit's events count (see the test above)
    server.faults.commit_errors = 1
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER_NAME):
        result = invoke("commit", SESSION)
    assert result.exit_code == 1
    assert "Error: [SESSION_UNAVAILABLE] committing session failed: HTTP 500" in result.output
    assert "Traceback" not in result.output
    assert API_KEY not in result.output + caplog.text
    assert server.requests.count(("POST", f"/api/v1/sessions/{SESSION}/commit")) == 1
    events = [r.audit for r in caplog.records if getattr(r, "audit", {}).get("kind")]
    assert [(e["kind"], e["outcome"], e["error_type"]) for e in events] == [
        ("session.commit", "error", "SESSION_UNAVAILABLE")
    ]


def test_usage_mistakes_exit_with_status_2(invoke: Invoke) -> None:
    too_long = invoke("show", "x" * 257)
    assert too_long.exit_code == 2
    assert "a session id is 1 to 256 characters" in too_long.output
    missing = invoke("commit")
    assert missing.exit_code == 2
    bad = CliRunner().invoke(
        build_cli(), ["viking", "--server-url", "ftp://nope", "session", "show", "x"]
    )
    assert bad.exit_code == 2, bad.output
    assert "ftp://nope" not in bad.output
