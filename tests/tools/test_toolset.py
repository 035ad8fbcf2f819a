"""SkillTools: the tool list, JSON Schemas, adapters, dispatch and build-time validation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from skillruntime.core.files.publishing import LocalDirectoryPublisher
from skillruntime.core.models import SkillRuntimeConfig
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.tools import (
    SkillTools,
    anthropic_tool_result,
    openai_tool_message,
    to_openai_responses_tools,
)

EIGHT = ["skill", "bash", "read", "write", "edit", "ls", "glob", "grep"]

VALID_SAMPLES: dict[str, dict[str, Any]] = {
    "skill": {"command": "demo"},
    "bash": {"command": "echo hi", "timeout_seconds": 5, "working_directory": "/tmp"},
    "read": {"file_path": "/a.txt", "offset": 2, "limit": 10},
    "write": {"file_path": "/a.txt", "content": ""},
    "edit": {"file_path": "/a.txt", "old_string": "a", "new_string": "", "replace_all": True},
    "ls": {},
    "glob": {"pattern": "**/*.py", "path": "src"},
    "grep": {"pattern": "x", "output_mode": "content", "context": 2, "head_limit": 3, "offset": 1},
    "publish_file": {"file_path": "/a.txt", "file_name": "b.txt", "content_type": "text/plain"},
}
REQUIRED = {
    "skill": ["command"],
    "bash": ["command"],
    "read": ["file_path"],
    "write": ["file_path", "content"],
    "edit": ["file_path", "old_string", "new_string"],
    "ls": [],
    "glob": ["pattern"],
    "grep": ["pattern"],
    "publish_file": ["file_path"],
}


def test_eight_tools_without_publisher(runtime: SkillRuntime) -> None:
    assert [tool.name for tool in SkillTools(runtime).tools] == EIGHT


def test_nine_tools_with_publisher(runtime: SkillRuntime, tmp_path: Path) -> None:
    tools = SkillTools(runtime, publisher=LocalDirectoryPublisher(tmp_path / "pub"))
    assert [tool.name for tool in tools.tools] == [*EIGHT, "publish_file"]


def test_every_schema_is_valid_json_schema_with_truly_required_fields(
    runtime: SkillRuntime, tmp_path: Path
) -> None:
    tools = SkillTools(runtime, publisher=LocalDirectoryPublisher(tmp_path / "pub"))
    for tool in tools.tools:
        schema = tool.parameters
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert sorted(schema["required"]) == sorted(REQUIRED[tool.name]), tool.name
        validator = jsonschema.Draft202012Validator(schema)
        validator.validate(VALID_SAMPLES[tool.name])
        for field in REQUIRED[tool.name]:
            broken = {k: v for k, v in VALID_SAMPLES[tool.name].items() if k != field}
            assert not validator.is_valid(broken), (tool.name, field)
        assert not validator.is_valid({**VALID_SAMPLES[tool.name], "unexpected": 1})


def test_schema_rejects_wrong_types_and_bad_enum(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    grep = jsonschema.Draft202012Validator(tools.get("grep").parameters)  # type: ignore[union-attr]
    assert not grep.is_valid({"pattern": "x", "output_mode": "lines"})
    read = jsonschema.Draft202012Validator(tools.get("read").parameters)  # type: ignore[union-attr]
    assert not read.is_valid({"file_path": "/a", "offset": 0})
    assert not read.is_valid({"file_path": 3})


def test_openai_and_anthropic_shapes(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    openai = tools.openai_tools()
    assert [item["function"]["name"] for item in openai] == EIGHT
    for item, tool in zip(openai, tools.tools, strict=True):
        assert set(item) == {"type", "function"}
        assert item["type"] == "function"
        assert item["function"] == {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
            "strict": False,
        }
    responses = to_openai_responses_tools(tools.tools)
    assert all(
        set(item) == {"type", "name", "description", "parameters", "strict"} for item in responses
    )
    assert all(item["strict"] is False for item in responses)
    anthropic = tools.anthropic_tools()
    for item, tool in zip(anthropic, tools.tools, strict=True):
        assert item == {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.parameters,
        }
    json.dumps(openai)
    json.dumps(anthropic)


def test_dispatch_helpers_accept_dicts_and_objects(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    message = openai_tool_message(
        tools,
        {"id": "call_1", "function": {"name": "bash", "arguments": '{"command": "echo hi"}'}},
    )
    assert message == {"role": "tool", "tool_call_id": "call_1", "content": "hi"}

    class Block:
        id = "toolu_1"
        name = "bash"
        input = {"command": "exit 3"}

    result = anthropic_tool_result(tools, Block())
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "Exit code: 3",
        "is_error": False,
    }
    missing = anthropic_tool_result(tools, {"id": "t2", "name": "nope", "input": {}})
    assert missing["is_error"] is True
    assert missing["content"].startswith("Error: Unknown tool: nope")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("{not json", "Error: invalid arguments for tool 'read': arguments are not valid JSON"),
        ("[1, 2]", "Error: invalid arguments for tool 'read': arguments must be a JSON object"),
        ({}, "Error: invalid arguments for tool 'read': file_path: Field required"),
        ({"file_path": "/x", "bogus": 1}, "Error: invalid arguments for tool 'read': bogus:"),
    ],
)
def test_bad_arguments_come_back_as_errors(
    runtime: SkillRuntime, arguments: Any, expected: str
) -> None:
    assert SkillTools(runtime).dispatch("read", arguments).startswith(expected)


def test_java_style_camel_case_arguments_are_accepted(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    path = runtime.default_working_directory + "/camel.txt"
    assert "created" in tools.dispatch("write", {"filePath": path, "content": "a b\n"})
    result = tools.dispatch(
        "edit", {"filePath": path, "oldString": "a", "newString": "c", "replaceAll": True}
    )
    assert "updated" in result
    assert runtime.get_file_system().read_text(path) == "c b\n"


def test_building_prepares_nothing_and_runs_nothing(
    runtime: SkillRuntime, counting: Any, make_skill: Any
) -> None:
    wrapped = counting(runtime)
    tools = SkillTools(wrapped, [make_skill("demo")])
    tools.openai_tools()
    assert wrapped.prepare_calls == 0
    assert wrapped.executed == []


def test_skill_description_lists_skills_escaped_in_order(
    runtime: SkillRuntime, make_skill: Any
) -> None:
    tools = SkillTools(
        runtime,
        [make_skill("zeta", description="Use <b> & co"), make_skill("alpha")],
    )
    description = tools.get("skill").description  # type: ignore[union-attr]
    assert description.index("<name>zeta</name>") < description.index("<name>alpha</name>")
    assert "Use &lt;b&gt; &amp; co" in description
    assert "publish_file" in description
    assert "Only use skills listed in <available_skills>" in description


def test_custom_description_template_needs_one_placeholder(runtime: SkillRuntime) -> None:
    with pytest.raises(ValueError, match="exactly once"):
        SkillTools(runtime, description_template="no placeholder")
    tools = SkillTools(runtime, description_template="Skills:\n{available_skills}")
    assert tools.get("skill").description == "Skills:\n"  # type: ignore[union-attr]


def test_build_rejects_duplicate_names_and_unknown_configs(
    runtime: SkillRuntime, make_skill: Any
) -> None:
    demo = make_skill("demo")
    with pytest.raises(ValueError, match="Two configured skills are named 'demo'"):
        SkillTools(runtime, [demo, demo])
    with pytest.raises(ValueError, match="unknown skills: other"):
        SkillTools(runtime, [demo], configs={"other": SkillRuntimeConfig()})


def test_build_rejects_malformed_allowed_tools(runtime: SkillRuntime, make_skill: Any) -> None:
    with pytest.raises(ValueError, match=r"skill 'bad'.*unbalanced"):
        SkillTools(runtime, [make_skill("bad", allowed_tools="Bash(git:* Read")])


def test_directories_are_loaded_as_one_skill_or_a_root_of_skills(
    runtime: SkillRuntime, make_skill: Any, tmp_path: Path
) -> None:
    make_skill("one")
    make_skill("two")
    single = SkillTools(runtime, [tmp_path / "skills" / "one"])
    assert single.skill_names == ["one"]
    everything = SkillTools(runtime, [str(tmp_path / "skills")])
    assert sorted(everything.skill_names) == ["one", "two"]
    with pytest.raises(ValueError, match="does not exist"):
        SkillTools(runtime, [tmp_path / "missing"])


def test_closed_runtime_is_an_error_string_not_an_exception(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime)
    runtime.close()
    for name, arguments in [
        ("bash", {"command": "true"}),
        ("read", {"file_path": "/x"}),
        ("ls", {}),
        ("grep", {"pattern": "x"}),
    ]:
        assert tools.dispatch(name, arguments).startswith("Error: "), name
