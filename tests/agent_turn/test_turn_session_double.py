"""A turn's record in an OpenViking session (protocol doubles of the skills and the session
endpoints): what the session stores of a turn, idempotence per turn, and failed writes and
commits reported in the record without failing or keeping open the turn."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_turn.helpers import MakeSkill
from doubles.viking import VikingDouble
from doubles.viking_sessions import VikingSessionsDouble
from skillruntime.core.observability.audit import AUDIT_LOGGER_NAME
from skillruntime.core.tools import SkillTools, ToolCall
from skillruntime.core.tools.turn import SkillTurn
from skillruntime.core.tools.turn_record import SessionOutcome, TurnRecord, TurnToolCall
from skillruntime.local import LocalSkillRuntime
from skillruntime.viking import VikingSkillStore, VikingStoreOptions
from skillruntime.viking.session_sink import CommitPolicy, VikingSessionSink
from skillruntime.viking.source import viking_skill_sources

ROOT = "viking://user/default/skills/turn-greeter"
MARKER = "BODY-MARKER-5c1e"
GUIDE_MARKER = "GUIDE-MARKER-88aa"
LOCAL_MARKER = "LOCAL-BODY-MARKER-31b7"
SKILL_MD = f"""---
name: turn-greeter
description: Greets from the double.
allowed-tools: Bash(sh *) Read
---

{MARKER}: run `sh scripts/greet.sh`; the guide is references/guide.md.
""".encode()
SESSION = "chat-42"


@pytest.fixture
def viking() -> Iterator[VikingDouble]:
    with VikingDouble() as double:
        double.add_skill(
            ROOT,
            {
                "SKILL.md": SKILL_MD,
                "scripts/greet.sh": b"#!/bin/sh\necho hello from the double\n",
                "references/guide.md": f"# Guide\n{GUIDE_MARKER}\n".encode(),
            },
            description="Greets from the double.",
        )
        yield double


@pytest.fixture
def server() -> Iterator[VikingSessionsDouble]:
    with VikingSessionsDouble() as double:
        yield double


@pytest.fixture
def tools(viking: VikingDouble, make_skill: MakeSkill, tmp_path: Path) -> Iterator[SkillTools]:
    local = make_skill("local-notes", body=f"{LOCAL_MARKER}: notes.\n")
    with (
        VikingSkillStore(server_url=viking.url, cache_dir=tmp_path / "cache") as store,
        LocalSkillRuntime(work_root=tmp_path / "work") as runtime,
        SkillTools(runtime, [*viking_skill_sources(store, [ROOT]), local]) as opened,
    ):
        yield opened


def _sink(server: VikingSessionsDouble, **kwargs: object) -> VikingSessionSink:
    options = VikingStoreOptions(server_url=server.url, read_timeout=0.5, operation_timeout=3)
    return VikingSessionSink(options, SESSION, **kwargs)  # type: ignore[arg-type]


def _run_turn(turn: SkillTurn) -> None:
    """The model runs a plain command, activates the remote skill, runs its script, reads its
    guide and activates the local skill."""
    turn.dispatch_batch([ToolCall("bash", {"command": "echo plain-output"}, id="c1")])
    turn.dispatch_batch([ToolCall("skill", {"command": "turn-greeter"}, id="c2")])
    turn.dispatch_batch([ToolCall("bash", {"command": "sh scripts/greet.sh"}, id="c3")])
    turn.dispatch_batch([ToolCall("read", {"file_path": "references/guide.md"}, id="c4")])
    turn.dispatch_batch([ToolCall("skill", {"command": "local-notes"}, id="c5")])


def test_a_turn_is_stored_as_one_user_and_one_assistant_message_with_tool_parts(
    tools: SkillTools, server: VikingSessionsDouble
) -> None:
    with _sink(server) as sink, tools.turn("turn-1") as turn:
        _run_turn(turn)
        outcome = turn.record_session(sink, user_message="Greet me", answer="Done: hello.")
    assert outcome == SessionOutcome(session_id=SESSION, written=True)
    assert turn.session_outcome == outcome
    stored = server.messages(SESSION)
    assert [(m["role"], m["turn_id"], m["message_kind"]) for m in stored] == [
        ("user", "turn-1", "user_query"),
        ("assistant", "turn-1", "assistant_step"),
    ]
    assert stored[0]["parts"] == [{"type": "text", "text": "Greet me"}]
    *tool_parts, answer = stored[1]["parts"]
    assert answer == {"type": "text", "text": "Done: hello."}
    assert [(p["tool_id"], p["tool_name"], p["skill_uri"]) for p in tool_parts] == [
        ("c1", "bash", ""),
        ("c2", "skill", ROOT),
        ("c3", "bash", ROOT),
        ("c4", "read", ROOT),
        ("c5", "skill", ""),
    ]
    assert all(part["tool_status"] == "completed" for part in tool_parts)
    assert tool_parts[0]["tool_output"] == "plain-output"
    assert tool_parts[0]["tool_input"] == {
        "command": "echo plain-output",
        "timeout_seconds": None,
        "working_directory": None,
    }
    assert tool_parts[1]["tool_input"] == {"command": "turn-greeter"}
    assert "local skill local-notes" in tool_parts[4]["tool_output"]
    text = json.dumps(stored)
    for body in (MARKER, GUIDE_MARKER, LOCAL_MARKER, "hello from the double"):
        assert body not in text  # no skill body, resource or skill-bound output was stored


def test_secrets_in_the_message_answer_and_outputs_are_redacted(
    tools: SkillTools, server: VikingSessionsDouble
) -> None:
    with _sink(server) as sink, tools.turn() as turn:
        turn.dispatch("bash", {"command": "echo token=s3cr3t-value-1"}, call_id="c1")
        turn.record_session(
            sink,
            user_message="my api_key=sk-live-abcdefghijkl please",
            answer="use Bearer abc.def.ghi",
        )
    text = json.dumps(server.messages(SESSION))
    for secret in ("s3cr3t-value-1", "sk-live-abcdefghijkl", "abc.def.ghi"):
        assert secret not in text


def test_a_retried_turn_is_not_stored_twice(
    tools: SkillTools, server: VikingSessionsDouble
) -> None:
    with _sink(server) as sink, tools.turn("turn-r") as turn:
        turn.dispatch("bash", {"command": "echo once"}, call_id="c1")
        first = turn.record_session(sink, user_message="q", answer="a")
        again = turn.record_session(sink, user_message="q", answer="a")
    # Another process (a new sink) retrying the same turn finds it on the server.
    with _sink(server) as other:
        elsewhere = other.record_turn(TurnRecord("turn-r", "q", "a"))
    assert first.written
    assert again == SessionOutcome(session_id=SESSION, duplicate=True)
    assert elsewhere == SessionOutcome(session_id=SESSION, duplicate=True)
    assert len(server.messages(SESSION)) == 2


def test_a_write_whose_answer_is_lost_is_not_repeated(server: VikingSessionsDouble) -> None:
    server.faults.lost_write_answers = 1  # stored, then 500
    with _sink(server) as sink:
        outcome = sink.record_turn(TurnRecord("t-lost", "q", "a"))
    assert outcome.written
    assert outcome.ok
    assert len(server.messages(SESSION)) == 2


@pytest.mark.slow
def test_a_write_that_times_out_after_storing_is_not_repeated(
    server: VikingSessionsDouble,
) -> None:
    server.faults.write_delay = 1.0  # over the client's 0.5 s read timeout
    with _sink(server) as sink:
        outcome = sink.record_turn(TurnRecord("t-slow", "q", "a"))
    assert outcome.written
    assert outcome.ok
    assert len(server.messages(SESSION)) == 2
    assert server.requests.count(("POST", f"/api/v1/sessions/{SESSION}/messages/batch")) == 1


def test_a_write_failing_with_500_is_retried_within_the_deadline(
    server: VikingSessionsDouble,
) -> None:
    server.faults.write_errors = 2
    with _sink(server) as sink:
        outcome = sink.record_turn(TurnRecord("t-500", "q", "a"))
    assert outcome.written
    assert outcome.ok
    assert len(server.messages(SESSION)) == 2


@pytest.mark.slow
def test_a_write_failing_past_the_deadline_is_reported_not_raised(
    tools: SkillTools, server: VikingSessionsDouble
) -> None:
    server.faults.write_errors = 1000
    with _sink(server, deadline_seconds=1.0) as sink, tools.turn() as turn:
        turn.dispatch("bash", {"command": "echo x"}, call_id="c1")
        outcome = turn.record_session(sink, user_message="q", answer="a")
    assert turn.closed
    assert not outcome.written
    assert not outcome.ok
    assert outcome.error is not None
    assert outcome.error.startswith("SESSION_UNAVAILABLE: ")
    assert server.messages(SESSION) == []


def test_a_refused_write_is_reported_at_once(server: VikingSessionsDouble) -> None:
    bad = TurnToolCall("c1", "bash", "ok", skills=("viking://nowhere/skills/x",))
    with _sink(server) as sink:
        outcome = sink.record_turn(TurnRecord("t-bad", "q", "a", (bad,)))
    assert outcome.error is not None
    assert outcome.error.startswith("SESSION_REFUSED: ")
    assert "INVALID_URI" in outcome.error
    assert server.requests.count(("POST", f"/api/v1/sessions/{SESSION}/messages/batch")) == 1


@pytest.mark.parametrize(
    "fault", ["commit_errors", pytest.param("commit_delay", marks=pytest.mark.slow)]
)
def test_a_failed_commit_leaves_the_turn_stored_successful_and_closed(
    tools: SkillTools, server: VikingSessionsDouble, fault: str
) -> None:
    if fault == "commit_errors":
        server.faults.commit_errors = 1
    else:
        server.faults.commit_delay = 2.0  # the client gives up after its 0.5 s read timeout
    with _sink(server, commit=CommitPolicy.every_turn()) as sink, tools.turn() as turn:
        _run_turn(turn)
        outcome = turn.record_session(sink, user_message="q", answer="a")
        assert [record.status for record in turn.usage] == ["ok"] * 5
    assert turn.closed
    assert tools.current_turn is None
    assert outcome.written
    assert not outcome.committed
    assert outcome.commit_error is not None
    assert outcome.commit_error.startswith("SESSION_UNAVAILABLE: committing session failed")
    assert server.requests.count(("POST", f"/api/v1/sessions/{SESSION}/commit")) == 1


def test_a_commit_answered_503_is_retried(server: VikingSessionsDouble) -> None:
    server.faults.commit_unavailable = 1
    with _sink(server, commit=CommitPolicy.every_turn()) as sink:
        outcome = sink.record_turn(TurnRecord("t-503", "q", "a"))
    assert outcome.committed
    assert server.requests.count(("POST", f"/api/v1/sessions/{SESSION}/commit")) == 2
    assert len(server.archives(SESSION)) == 1


def test_every_turn_commits_and_archives(server: VikingSessionsDouble) -> None:
    with _sink(server, commit=CommitPolicy.every_turn()) as sink:
        outcome = sink.record_turn(TurnRecord("t-c", "q", "a"))
    assert outcome == SessionOutcome(session_id=SESSION, written=True, committed=True)
    assert server.messages(SESSION) == []
    assert [[m["turn_id"] for m in archive] for archive in server.archives(SESSION)] == [
        ["t-c", "t-c"]
    ]


def test_a_retry_while_the_commit_is_extracted_is_still_recognized(
    server: VikingSessionsDouble,
) -> None:
    server.faults.extraction_seconds = 60.0
    with _sink(server, commit=CommitPolicy.every_turn()) as sink:
        assert sink.record_turn(TurnRecord("t-x", "q", "a")).committed
    with _sink(server) as other:
        assert other.record_turn(TurnRecord("t-x", "q", "a")).duplicate
    assert server.messages(SESSION) == []
    assert len(server.archives(SESSION)) == 1


def test_every_second_turn_commits_and_never_is_the_default(
    server: VikingSessionsDouble,
) -> None:
    with _sink(server, commit=CommitPolicy(every_turns=2)) as sink:
        committed = [sink.record_turn(TurnRecord(f"t{i}", "q", "a")).committed for i in range(4)]
    assert committed == [False, True, False, True]
    with _sink(server) as sink:
        assert not sink.record_turn(TurnRecord("t-n", "q", "a")).committed
    assert len(server.archives(SESSION)) == 2


def test_pending_tokens_threshold_commits(server: VikingSessionsDouble) -> None:
    with _sink(server, commit=CommitPolicy(pending_tokens=60)) as sink:
        small = sink.record_turn(TurnRecord("t-small", "q", "a"))
        large = sink.record_turn(TurnRecord("t-large", "q" * 400, "a"))
    assert not small.committed
    assert large.committed


@pytest.mark.slow
def test_an_unreachable_server_is_reported(tools: SkillTools) -> None:
    with VikingSessionsDouble() as gone:
        url = gone.url
    options = VikingStoreOptions(server_url=url, operation_timeout=2)
    with VikingSessionSink(options, SESSION) as sink, tools.turn() as turn:
        outcome = turn.record_session(sink, user_message="q", answer="a")
    assert outcome.error is not None
    assert outcome.error.startswith("SESSION_UNAVAILABLE: ")
    assert turn.closed


def test_a_sink_that_raises_gives_a_failed_outcome(tools: SkillTools) -> None:
    class Broken:
        def record_turn(self, record: TurnRecord) -> SessionOutcome:
            raise RuntimeError("secret-detail")

    with tools.turn() as turn:
        outcome = turn.record_session(Broken(), user_message="q", answer="a")
    assert outcome.error == "SESSION_WRITE_FAILED: RuntimeError"
    assert turn.closed


def _audit(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [r.audit for r in caplog.records if r.name == AUDIT_LOGGER_NAME]


@pytest.mark.slow
def test_failed_writes_and_commits_are_audit_events_and_the_turn_goes_on(
    tools: SkillTools, server: VikingSessionsDouble, caplog: pytest.LogCaptureFixture
) -> None:
    server.faults.write_errors = 1000
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER_NAME):
        with _sink(server, deadline_seconds=1.0) as sink, tools.turn() as turn:
            turn.dispatch("bash", {"command": "echo x"}, call_id="c1")
            failed = turn.record_session(sink, user_message="q", answer="a")
        assert turn.closed
        assert failed.error is not None
        server.faults.write_errors = 0
        server.faults.commit_errors = 1
        with _sink(server, commit=CommitPolicy.every_turn()) as sink, tools.turn() as turn:
            uncommitted = turn.record_session(sink, user_message="q", answer="a")
        assert uncommitted.written
        assert uncommitted.commit_error is not None
    events = [
        (e["kind"], e["outcome"], e["error_type"], e["conversation_id"])
        for e in _audit(caplog)
        if str(e["kind"]).startswith("session.")
    ]
    assert events == [
        ("session.write", "error", "SESSION_UNAVAILABLE", SESSION),
        ("session.write", "ok", None, SESSION),
        ("session.commit", "error", "SESSION_UNAVAILABLE", SESSION),
    ]
    assert "Internal server error" not in caplog.text.split("skillruntime.audit")[-1]


def test_the_async_turn_records_through_a_worker_thread(
    tools: SkillTools, server: VikingSessionsDouble
) -> None:
    threads: list[str] = []

    class Watching(VikingSessionSink):
        def record_turn(self, record: TurnRecord) -> SessionOutcome:
            threads.append(threading.current_thread().name)
            return super().record_turn(record)

    async def turn_async() -> tuple[SessionOutcome, SessionOutcome]:
        options = VikingStoreOptions(server_url=server.url, operation_timeout=3)
        with Watching(options, SESSION) as sink, tools.turn("turn-async") as turn:
            await turn.adispatch_batch([ToolCall("skill", {"command": "turn-greeter"}, id="c1")])
            first = await turn.arecord_session(sink, user_message="q", answer="a")
            again = await turn.arecord_session(
                sink, user_message="q", answer="a", timeout_seconds=5
            )
        assert turn.closed
        return first, again

    first, again = asyncio.run(turn_async())
    assert first == SessionOutcome(session_id=SESSION, written=True)
    assert again.duplicate
    assert threads
    assert threading.main_thread().name not in threads
    parts = server.messages(SESSION)[1]["parts"]
    assert parts[0]["skill_uri"] == ROOT


def test_the_async_turn_awaits_an_async_sink_and_bounds_a_slow_one(tools: SkillTools) -> None:
    class AsyncStore:
        def __init__(self, delay: float) -> None:
            self.delay = delay
            self.records: list[TurnRecord] = []

        async def arecord_turn(self, record: TurnRecord) -> SessionOutcome:
            await asyncio.sleep(self.delay)
            self.records.append(record)
            return SessionOutcome(session_id="app", written=True)

    async def turns() -> tuple[SessionOutcome, SessionOutcome, bool]:
        fast, slow = AsyncStore(0.0), AsyncStore(5.0)
        with tools.turn("a1") as turn:
            stored = await turn.arecord_session(fast, user_message="q", answer="a")
        with tools.turn("a2") as turn:
            late = await turn.arecord_session(
                slow, user_message="q", answer="a", timeout_seconds=0.2
            )
        return stored, late, turn.closed

    stored, late, closed = asyncio.run(turns())
    assert stored == SessionOutcome(session_id="app", written=True)
    assert late.error == "SESSION_WRITE_FAILED: no outcome within 0.2s"
    assert closed
