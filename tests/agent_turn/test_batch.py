"""Rule 2: same-batch activation (activations first, blocked calls, original order)."""

from __future__ import annotations

import asyncio

import pytest

from agent_turn.helpers import MakeSkill
from skillruntime.core.tools import (
    SKILL_ACTIVATION_FAILED,
    SKILL_CONTEXT_UPDATED,
    SkillTools,
    ToolCall,
)
from skillruntime.core.tools.batch import as_call
from skillruntime.local import LocalSkillRuntime

RESTRICTED = "allowed-tools: Read\n"


@pytest.fixture
def tools(runtime: LocalSkillRuntime, make_skill: MakeSkill) -> SkillTools:
    return SkillTools(
        runtime,
        [
            make_skill("reader", frontmatter=RESTRICTED),
            make_skill("helper", {"notes.md": "helper notes\n"}),
        ],
    )


def _write_marker(name: str) -> ToolCall:
    return ToolCall("bash", {"command": f"touch {name}"}, id=name)


def _exists(runtime: LocalSkillRuntime, name: str) -> bool:
    return runtime.get_file_system().exists(f"{runtime.default_working_directory}/{name}")


def test_success_blocks_the_other_calls_with_context_updated(
    tools: SkillTools, runtime: LocalSkillRuntime
) -> None:
    with tools.turn() as turn:
        results = turn.dispatch_batch(
            [_write_marker("before"), ToolCall("skill", {"command": "reader"}, id="s")]
        )
        assert [result.call_id for result in results] == ["before", "s"]
        assert results[0].code == SKILL_CONTEXT_UPDATED
        assert results[0].usage.status == "blocked"
        assert not results[1].is_error
        assert not _exists(runtime, "before")
        # The retry is checked against the refreshed policy: bash is no longer allowed.
        retry = turn.dispatch_batch([_write_marker("before")])
        assert retry[0].code == "SKILL_TOOL_NOT_ALLOWED"
        assert not _exists(runtime, "before")


def test_a_failed_activation_blocks_every_ordinary_call(
    tools: SkillTools, runtime: LocalSkillRuntime
) -> None:
    with tools.turn() as turn:
        results = turn.dispatch_batch(
            [
                ToolCall("skill", {"command": "reader"}, id="ok"),
                _write_marker("one"),
                ToolCall("skill", {"command": "no-such-skill"}, id="bad"),
                _write_marker("two"),
            ]
        )
    assert [result.call_id for result in results] == ["ok", "one", "bad", "two"]
    assert not results[0].is_error
    assert results[2].is_error
    assert [results[1].code, results[3].code] == [SKILL_ACTIVATION_FAILED] * 2
    assert "'no-such-skill'" in results[1].content
    assert not _exists(runtime, "one")
    assert not _exists(runtime, "two")


def test_a_batch_without_activation_runs_in_order(
    tools: SkillTools, runtime: LocalSkillRuntime
) -> None:
    with tools.turn() as turn:
        results = turn.dispatch_batch(
            [
                ToolCall("bash", {"command": "echo 1 > order.txt"}, id="a"),
                ToolCall("bash", {"command": "echo 2 >> order.txt"}, id="b"),
                ToolCall("read", {"file_path": "order.txt"}, id="c"),
            ]
        )
    assert [result.call_id for result in results] == ["a", "b", "c"]
    assert results[2].content.endswith("     1\t1\n     2\t2\n")


def test_reactivating_an_active_skill_does_not_block_the_batch(tools: SkillTools) -> None:
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "helper"})
        results = turn.dispatch_batch(
            [("read", {"file_path": "notes.md"}), ("skill", {"command": "helper"})]
        )
    assert "helper notes" in results[0].content
    assert not results[1].is_error


def test_without_a_turn_the_batch_rule_applies_to_plain_dispatch(
    tools: SkillTools, runtime: LocalSkillRuntime
) -> None:
    results = tools.dispatch_batch([_write_marker("plain"), ("skill", {"command": "reader"})])
    assert results[0].code == SKILL_CONTEXT_UPDATED
    assert results[1].usage.skill_uri is not None
    assert results[1].usage.skill_uri.endswith("reader")
    failed = tools.dispatch_batch([("skill", {"command": "nope"}), _write_marker("plain")])
    assert failed[1].code == SKILL_ACTIVATION_FAILED
    assert not _exists(runtime, "plain")


def test_calls_come_in_several_shapes() -> None:
    assert as_call(("bash", {"command": "x"})) == ToolCall("bash", {"command": "x"})
    assert as_call(("bash", "{}", 7)) == ToolCall("bash", "{}", "7")
    assert as_call({"name": "read", "input": {"file_path": "a"}, "id": "i"}) == ToolCall(
        "read", {"file_path": "a"}, "i"
    )
    with pytest.raises(ValueError, match="string 'name'"):
        as_call({"arguments": {}})
    with pytest.raises(TypeError):
        as_call(42)  # type: ignore[arg-type]


def test_batches_can_be_awaited(tools: SkillTools, runtime: LocalSkillRuntime) -> None:
    async def agent() -> list[str | None]:
        with tools.turn() as turn:
            first = await turn.adispatch_batch(
                [("skill", {"command": "reader"}), _write_marker("async")]
            )
        plain = await tools.adispatch_batch([("bash", {"command": "echo plain"})])
        return [first[1].code, plain[0].code]

    assert asyncio.run(agent()) == [SKILL_CONTEXT_UPDATED, None]
    assert not _exists(runtime, "async")
