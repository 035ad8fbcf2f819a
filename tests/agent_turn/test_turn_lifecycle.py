"""Rule 1: one ``SkillTurn`` per user message, closed in ``finally``; nothing survives it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_turn.helpers import CountingSource, MakeSkill
from skillruntime.core.tools import SkillTools
from skillruntime.core.tools.turn import TurnClosedError
from skillruntime.local import LocalSkillRuntime

RESTRICTED = "allowed-tools: Read\n"


def test_activation_lasts_for_its_turn_only(
    runtime: LocalSkillRuntime, make_skill: MakeSkill
) -> None:
    tools = SkillTools(runtime, [make_skill("reader", frontmatter=RESTRICTED)])
    everything = [tool.name for tool in tools.tools]
    with tools.turn() as turn:
        assert "Instructions of reader." in turn.dispatch("skill", {"command": "reader"})
        assert turn.active_skills == ["reader"]
        assert [tool.name for tool in tools.tools] == ["skill", "read"]
        assert "SKILL_TOOL_NOT_ALLOWED" in turn.dispatch("bash", {"command": "echo hi"})
    assert turn.closed
    assert tools.active_skills == []
    assert [tool.name for tool in tools.tools] == everything
    with tools.turn() as second:
        assert second.active_skills == []
        assert "hi" in second.dispatch("bash", {"command": "echo hi"})


def test_a_turn_is_closed_in_finally_when_the_loop_fails(
    runtime: LocalSkillRuntime, make_skill: MakeSkill
) -> None:
    tools = SkillTools(runtime, [make_skill("reader", frontmatter=RESTRICTED)])
    turn = tools.turn()

    def agent_turn() -> None:
        try:
            turn.dispatch("skill", {"command": "reader"})
            raise RuntimeError("model failed")
        finally:
            turn.close()

    with pytest.raises(RuntimeError, match="model failed"):
        agent_turn()
    assert turn.closed
    assert tools.current_turn is None
    with pytest.raises(TurnClosedError):
        turn.dispatch("read", {"file_path": "x"})
    assert tools.active_skills == []


def test_one_turn_at_a_time(runtime: LocalSkillRuntime, make_skill: MakeSkill) -> None:
    tools = SkillTools(runtime, [make_skill("reader")])
    with tools.turn("first"), pytest.raises(RuntimeError, match="turn first is still open"):
        tools.turn()
    with tools.turn("second") as turn:
        assert turn.id == "second"


def test_the_next_turn_loads_the_source_again_and_sees_a_new_revision(
    runtime: LocalSkillRuntime, make_skill: MakeSkill
) -> None:
    source = CountingSource(make_skill("greeter", {"scripts/hi.sh": "echo version one\n"}))
    tools = SkillTools(runtime, [source])
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "greeter"})
        turn.dispatch("skill", {"command": "greeter"})  # same turn: loaded once
        assert "version one" in turn.dispatch("bash", {"command": "sh scripts/hi.sh"})
    assert (source.loads, source.turn_ends) == (1, 1)
    (source.directory / "scripts/hi.sh").write_text("echo version two\n")
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "greeter"})
        assert "version two" in turn.dispatch("bash", {"command": "sh scripts/hi.sh"})
    assert (source.loads, source.turn_ends) == (2, 2)


def test_revoked_access_is_refused_on_the_next_turn(
    runtime: LocalSkillRuntime, make_skill: MakeSkill
) -> None:
    source = CountingSource(make_skill("greeter"))
    tools = SkillTools(runtime, [source])
    with tools.turn() as turn:
        assert not turn.call(("skill", {"command": "greeter"})).is_error
    source.refuse = True
    with tools.turn() as turn:
        result = turn.call(("skill", {"command": "greeter"}))
        assert result.is_error
        assert "revoked" in result.content
        assert turn.active_skills == []


def test_requirements_are_checked_again_in_every_turn(
    runtime: LocalSkillRuntime, make_skill: MakeSkill, monkeypatch: pytest.MonkeyPatch
) -> None:
    skill = make_skill(
        "needs-env", frontmatter="metadata:\n  requires:\n    env: [TURN_TEST_VAR]\n"
    )
    monkeypatch.setenv("TURN_TEST_VAR", "set")
    tools = SkillTools(runtime, [skill])
    with tools.turn() as turn:
        assert not turn.call(("skill", {"command": "needs-env"})).is_error
    monkeypatch.delenv("TURN_TEST_VAR")
    with tools.turn() as turn:
        result = turn.call(("skill", {"command": "needs-env"}))
        assert result.is_error
        assert "TURN_TEST_VAR" in result.content


def test_usage_records_belong_to_their_turn(
    runtime: LocalSkillRuntime, make_skill: MakeSkill
) -> None:
    tools = SkillTools(runtime, [make_skill("reader")])
    with tools.turn() as first:
        first.dispatch("skill", {"command": "reader"}, call_id="c1")
        first.dispatch("bash", {"command": "echo one"}, call_id="c2")
    with tools.turn() as second:
        second.dispatch("bash", {"command": "echo two"}, call_id="c3")
    assert [record.call_id for record in first.usage] == ["c1", "c2"]
    assert [record.call_id for record in second.usage] == ["c3"]


def test_closing_the_tools_closes_an_open_turn(
    runtime: LocalSkillRuntime, make_skill: MakeSkill, tmp_path: Path
) -> None:
    source = CountingSource(make_skill("greeter"))
    tools = SkillTools(runtime, [source])
    turn = tools.turn()
    turn.dispatch("skill", {"command": "greeter"})
    tools.close()
    assert turn.closed
    assert source.turn_ends == 1
