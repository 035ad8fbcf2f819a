"""The adapters against the real ``openai`` and ``anthropic`` SDKs.

Every adapter's output is validated against the SDK's own ``TypedDict`` param types at runtime
(pydantic validates ``TypedDict``s with their required keys and value types), strict-mode
schemas are checked for the rules OpenAI's strict mode imposes, and one two-turn tool loop per
API runs the real SDK client against a stub model server on 127.0.0.1: turn one answers with a
``bash`` tool call, turn two checks the tool result the client sent back and answers in text.
(The static side, that the adapters' return types are assignable to the SDK types under
``mypy --strict``, is ``tests/tools/sdk_typing.py``, checked by ``make lint``.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionToolMessageParam
from openai.types.responses import FunctionToolParam
from openai.types.responses.response_input_param import FunctionCallOutput
from pydantic import TypeAdapter

from model_stub import StubModel
from skillruntime.core.plugins.registry import create_runtime
from skillruntime.core.tools import (
    SkillTools,
    anthropic_tool_result,
    openai_function_call_output,
    openai_tool_message,
    strict_schema,
    to_openai_responses_tools,
)

STRICT_KEYWORDS = {"type", "description", "enum", "properties", "required"}
STRICT_KEYWORDS |= {"additionalProperties", "items"}


@pytest.fixture
def tools(tmp_path: Path) -> Iterator[SkillTools]:
    runtime = create_runtime("local", work_root=str(tmp_path))
    with runtime, SkillTools(runtime) as toolset:
        yield toolset


def _anthropic() -> Any:
    """The ``anthropic`` SDK, imported by the tests that use it rather than at collection: its
    import costs about 2.5 s of CPU, which every xdist worker would pay for three tests."""
    import anthropic

    return anthropic


# -- shapes against the SDK types --------------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True])
def test_definitions_validate_as_the_sdk_param_types(tools: SkillTools, strict: bool) -> None:
    chat = TypeAdapter(list[ChatCompletionFunctionToolParam])
    responses = TypeAdapter(list[FunctionToolParam])
    assert chat.validate_python(tools.openai_tools(strict=strict)) == tools.openai_tools(
        strict=strict
    )
    validated = responses.validate_python(tools.openai_responses_tools(strict=strict))
    assert [item["strict"] for item in validated] == [strict] * len(tools.tools)
    assert TypeAdapter(list[_anthropic().types.ToolParam]).validate_python(tools.anthropic_tools())


def test_an_output_without_strict_fails_the_responses_type(tools: SkillTools) -> None:
    item = dict(to_openai_responses_tools(tools.tools)[0])
    del item["strict"]
    with pytest.raises(ValueError, match="strict"):
        TypeAdapter(FunctionToolParam).validate_python(item)


def test_results_validate_as_the_sdk_param_types(tools: SkillTools) -> None:
    call = {"id": "call_1", "function": {"name": "bash", "arguments": '{"command": "echo a"}'}}
    message = openai_tool_message(tools, call)
    assert TypeAdapter(ChatCompletionToolMessageParam).validate_python(message)["content"] == "a"
    item = {"call_id": "call_2", "name": "bash", "arguments": '{"command": "echo b"}'}
    output = openai_function_call_output(tools, item)
    assert output == {"type": "function_call_output", "call_id": "call_2", "output": "b"}
    TypeAdapter(FunctionCallOutput).validate_python(output)
    block = {"id": "toolu_1", "name": "bash", "input": {"command": "echo c"}}
    result = anthropic_tool_result(tools, block)
    block_result = TypeAdapter(_anthropic().types.ToolResultBlockParam)
    assert block_result.validate_python(result)["content"] == "c"


# -- strict mode -------------------------------------------------------------------------------


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from _objects(value)


def _keywords(node: Any) -> set[str]:
    if not isinstance(node, dict):
        return set()
    found = set(node)
    for key, value in node.items():
        if key == "properties":
            for sub in value.values():
                found |= _keywords(sub)
        elif key == "items":
            found |= _keywords(value)
    return found


def test_strict_schemas_follow_the_strict_mode_rules(tools: SkillTools) -> None:
    for tool in tools.all_tools:
        schema = strict_schema(tool.parameters)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert _keywords(schema) <= STRICT_KEYWORDS, tool.name
        for node in _objects(schema):
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])
        original = tool.parameters
        for name in set(original["properties"]) - set(original["required"]):
            kind = schema["properties"][name]["type"]
            assert isinstance(kind, list)
            assert "null" in kind, (tool.name, name)
        for name in original["required"]:
            assert "null" not in schema["properties"][name]["type"], (tool.name, name)


def test_strict_schema_leaves_its_input_untouched(tools: SkillTools) -> None:
    tool = tools.get("grep")
    assert tool is not None
    before = tool.parameters
    given = tool.parameters
    strict_schema(given)
    assert given == before


def test_nulls_a_strict_model_sends_mean_the_defaults(tools: SkillTools) -> None:
    bash = tools.get("bash")
    grep = tools.get("grep")
    assert bash is not None
    assert grep is not None
    arguments = {"command": "echo strict", "timeout_seconds": None, "working_directory": None}
    jsonschema.validate(arguments, strict_schema(bash.parameters))
    assert tools.dispatch("bash", arguments) == "strict"
    tools.dispatch("write", {"file_path": "notes.txt", "content": "needle\n"})
    nulls = {name: None for name in grep.parameters["properties"] if name != "pattern"}
    arguments = {"pattern": "needle", **nulls}
    jsonschema.validate(arguments, strict_schema(grep.parameters))
    assert tools.dispatch("grep", arguments).splitlines()[-1].endswith("notes.txt")
    refused = tools.dispatch("bash", {"command": None})
    assert refused.startswith("Error: invalid arguments for tool 'bash'")


# -- two-turn loops against a stub model server ------------------------------------------------


@pytest.fixture
def stub() -> Iterator[StubModel]:
    with StubModel() as server:
        yield server


def test_openai_chat_completions_two_turn_loop(tools: SkillTools, stub: StubModel) -> None:
    client = openai.OpenAI(base_url=f"{stub.base_url}/v1", api_key="test", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "run it"}]
    for _ in range(3):
        response = client.chat.completions.create(
            model="stub", messages=messages, tools=tools.openai_tools(strict=True)
        )
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        messages.extend(openai_tool_message(tools, call) for call in message.tool_calls)
    assert message.content == "done"
    first, second = stub.bodies
    assert first["tools"] == tools.openai_tools(strict=True)
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "from-the-runtime",
    }


def test_openai_responses_two_turn_loop(tools: SkillTools, stub: StubModel) -> None:
    client = openai.OpenAI(base_url=f"{stub.base_url}/v1", api_key="test", max_retries=0)
    items: list[Any] = [{"role": "user", "content": "run it"}]
    for _ in range(3):
        response = client.responses.create(
            model="stub", input=items, tools=tools.openai_responses_tools()
        )
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            break
        items.extend(item.model_dump(exclude_none=True) for item in response.output)
        items.extend(openai_function_call_output(tools, call) for call in calls)
    assert response.output_text == "done"
    first, second = stub.bodies
    assert first["tools"] == tools.openai_responses_tools()
    assert all(tool["strict"] is False for tool in first["tools"])
    assert second["input"][-1] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "from-the-runtime",
    }


def test_anthropic_messages_two_turn_loop(tools: SkillTools, stub: StubModel) -> None:
    client = _anthropic().Anthropic(base_url=stub.base_url, api_key="test", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "run it"}]
    for _ in range(3):
        response = client.messages.create(
            model="stub", max_tokens=256, messages=messages, tools=tools.anthropic_tools()
        )
        messages.append({"role": "assistant", "content": response.content})
        if response.stop_reason != "tool_use":
            break
        results = [
            anthropic_tool_result(tools, block)
            for block in response.content
            if block.type == "tool_use"
        ]
        messages.append({"role": "user", "content": results})
    assert [block.type for block in response.content] == ["text"]
    first, second = stub.bodies
    assert first["tools"] == tools.anthropic_tools()
    assert second["messages"][-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": "from-the-runtime",
                "is_error": False,
            }
        ],
    }
