"""Rule 7: model, persisted and log views; usage records; structured skill events."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from agent_turn.helpers import MakeSkill
from doubles.viking import VikingDouble
from skillruntime.core.tools import SkillTools, ToolCall, ToolResult, UsageRecord
from skillruntime.core.tools.views import LOG_TEXT_LIMIT, redact_text
from skillruntime.local import LocalSkillRuntime
from skillruntime.viking import VikingSkillStore
from skillruntime.viking.source import viking_skill_sources

MARKER = "LOCAL-BODY-MARKER-91c2"


def _events(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [
        {key: value for key, value in vars(record).items() if key.startswith("skill_")}
        for record in caplog.records
        if hasattr(record, "skill_event")
    ]


def test_views_of_a_local_turn(
    runtime: LocalSkillRuntime, make_skill: MakeSkill, caplog: pytest.LogCaptureFixture
) -> None:
    tools = SkillTools(
        runtime, [make_skill("notes", {"ref.md": f"{MARKER} in a reference\n"}, body=MARKER)]
    )
    caplog.set_level(logging.INFO)
    stored: list[str] = []
    with tools.turn("t-1") as turn:
        for batch in (
            [ToolCall("skill", {"command": "notes"}, "a")],
            [
                ToolCall("read", {"file_path": "ref.md"}, "b"),
                ToolCall("bash", {"command": "echo API_KEY=hunter22 done"}, "c"),
            ],
        ):
            for result in turn.dispatch_batch(batch):
                stored.append(json.dumps(result.persisted_view()))
                stored.append(json.dumps(result.log_view()))
                if result.call_id in ("a", "b"):
                    assert MARKER in result.model_view
                if result.call_id == "c":
                    assert "hunter22" in result.model_view
    text = "\n".join(stored) + caplog.text
    assert MARKER not in text
    assert "hunter22" not in text
    uri = turn.skill_uri("notes")
    assert [record.skill_uri for record in turn.usage] == [uri, uri, None]
    assert [record.status for record in turn.usage] == ["ok", "ok", "ok"]
    assert turn.usage[1].resolved_args is not None
    assert turn.usage[1].resolved_args["file_path"].endswith("/ref.md")
    assert turn.usage[1].resolved_args["file_path"] != "ref.md"
    events = [event["skill_event"] for event in _events(caplog)]
    assert events[0] == "turn_opened"
    assert "activated" in events
    assert "resource_resolved" in events
    assert events[-1] == "turn_closed"
    assert all(
        event.get("skill_turn_id", "t-1") == "t-1" for event in _events(caplog)
    )  # no field named after the turn leaks another turn


def test_usage_record_redacts_resolved_arguments() -> None:
    record = UsageRecord(
        call_id="x",
        tool="bash",
        status="ok",
        skill_uris=("viking://user/u/skills/a", "viking://user/u/skills/b"),
        resolved_args={"command": "curl -H 'Authorization: Bearer abc.def' --token=s3cr3t x"},
    )
    data = record.as_dict()
    assert data["skill_uri"] == "viking://user/u/skills/a"
    assert data["skill_uris"] == ["viking://user/u/skills/a", "viking://user/u/skills/b"]
    assert "abc.def" not in json.dumps(data)
    assert "s3cr3t" not in json.dumps(data)


def test_log_view_is_bounded() -> None:
    result = ToolResult(
        ToolCall("bash", {}), "x" * (LOG_TEXT_LIMIT * 3), UsageRecord(None, "bash", "ok")
    )
    assert len(str(result.log_view()["content"])) < LOG_TEXT_LIMIT + 40
    assert result.persisted_view()["content"] == "x" * (LOG_TEXT_LIMIT * 3)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer eyJhbGciOi.x.y", "eyJhbGciOi"),
        ("password = 'p@ss w0rd'", "p@ss w0rd"),
        ("OPENVIKING_API_KEY=abcdef123", "abcdef123"),
        ("use sk-live_1234567890abcdef", "1234567890abcdef"),
        ('{"token": "tok-999"}', "tok-999"),
    ],
)
def test_redaction(text: str, secret: str) -> None:
    assert secret not in redact_text(text)


def test_cache_events_are_structured(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = "viking://user/default/skills/cached"
    caplog.set_level(logging.INFO)
    with (
        VikingDouble() as viking,
        VikingSkillStore(server_url=viking.url, cache_dir=tmp_path / "cache") as store,
        LocalSkillRuntime(work_root=tmp_path / "work") as runtime,
    ):
        viking.add_skill(
            root, {"SKILL.md": b"---\nname: cached\ndescription: C.\n---\n\nC.\n"}, description="C."
        )
        tools = SkillTools(runtime, viking_skill_sources(store, [root]))
        for _ in range(2):
            with tools.turn() as turn:
                assert not turn.call(("skill", {"command": "cached"})).is_error
                assert "C." in turn.dispatch("bash", {"command": "cat SKILL.md"})
        tools.close()
    cache = [event for event in _events(caplog) if event["skill_event"] == "cache"]
    assert [event["skill_cache"] for event in cache] == ["miss", "hit"]
    assert all(event["skill_uri"] == root for event in cache)
