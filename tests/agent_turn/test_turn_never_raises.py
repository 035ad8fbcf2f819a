"""``resource_inputs`` is validated when the turn opens; ``turn.call``/``dispatch`` never raise.

A malformed pointer (``{"read": {"file_path": "local_file"}}``, no leading ``/``) used to be
accepted by ``tools.turn()`` and to make the first ``turn.call`` raise ``ValueError``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_turn.helpers import MakeSkill
from skillruntime.core.tools import SkillTools
from skillruntime.core.tools.resources import ResourceResolver, validate_resource_inputs
from skillruntime.local import LocalSkillRuntime

FILES = {"scripts/run.py": "print('ran')\n", "references/guide.md": "# Guide\n"}


@pytest.fixture
def tools(runtime: LocalSkillRuntime, make_skill: MakeSkill) -> SkillTools:
    return SkillTools(
        runtime,
        [
            make_skill(
                "reader",
                FILES,
                frontmatter="allowed-tools: Bash(echo:*) Read LS Glob Grep\n",
            )
        ],
    )


@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        ({"read": {"file_path": "local_file"}}, "'file_path'"),
        ({"read": {"": "local_file"}}, "''"),
        ({"read": {"/file_path": "file"}}, "'file'"),
        ({"read": ["/file_path"]}, "resource_inputs['read']"),
        ({"read": {3: "local_file"}}, "3"),
        (["read"], "resource_inputs must map"),
    ],
)
def test_a_malformed_resource_input_is_refused_when_the_turn_opens(
    tools: SkillTools, inputs: Any, named: str
) -> None:
    with pytest.raises(ValueError, match="resource_inputs") as raised:
        tools.turn(resource_inputs=inputs)
    assert named in str(raised.value)
    with tools.turn() as turn:  # no turn was left open
        assert turn.dispatch("skill", {"command": "reader"}).startswith("Runtime:")


def test_valid_resource_inputs_are_kept() -> None:
    inputs = {"read": {"/file_path": "local_file"}, "tool": {"/files/*/path": "local_directory"}}
    assert validate_resource_inputs(inputs) == inputs


def test_a_call_that_fails_inside_the_turn_is_an_error_result(
    tools: SkillTools, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: ResourceResolver, command: str) -> str:
        raise RuntimeError("resolver broke")

    monkeypatch.setattr(ResourceResolver, "resolve_command", broken)
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "reader"})
        result = turn.call(("bash", {"command": "echo scripts/run.py"}))
        assert result.is_error
        assert result.content == (
            "Error: the call of tool 'bash' failed: RuntimeError: resolver broke"
        )
        assert turn.usage[-1].status == "error"


@pytest.mark.parametrize("call", [42, ("bash",), {"arguments": {}}, ("bash", {}, 1, 2)])
def test_an_input_that_is_not_a_call_is_an_error_result(tools: SkillTools, call: Any) -> None:
    with tools.turn() as turn:
        result = turn.call(call)
        assert result.content.startswith("Error: invalid tool call: ")
        assert turn.usage[-1].status == "error"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
PATHS = st.sampled_from(
    ["scripts/run.py", "references", "../x", "workspace:..", "viking://x/y", "%2e%2e/a", "~", ""]
)
ARGUMENTS = st.one_of(
    JSON,
    st.text(max_size=20),
    st.fixed_dictionaries(
        {},
        optional={
            "file_path": PATHS | JSON,
            "path": PATHS | JSON,
            "pattern": st.text(max_size=6) | JSON,
            "command": st.sampled_from(["echo scripts/run.py", "echo x", "touch y"]) | JSON,
            "offset": JSON,
            "limit": JSON,
        },
    ),
)


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    name=st.sampled_from(["read", "ls", "glob", "grep", "bash", "skill", "write", "nope", ""]),
    arguments=ARGUMENTS,
    inputs_tool=st.sampled_from(["read", "ls", "glob", "grep", "bash"]),
    pointer=st.sampled_from(["/file_path", "/path", "/*", "/command", "/x/*/y"]),
)
def test_dispatch_never_raises_for_any_arguments(
    tools: SkillTools, name: str, arguments: Any, inputs_tool: str, pointer: str
) -> None:
    with tools.turn(resource_inputs={inputs_tool: {pointer: "local_file"}}) as turn:
        turn.dispatch("skill", {"command": "reader"})
        content = turn.dispatch(name, arguments)
        assert isinstance(content, str)
