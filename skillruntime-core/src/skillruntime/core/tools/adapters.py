"""Tool definitions in the OpenAI and Anthropic formats, and tool-call dispatch helpers.

Definitions are plain dicts typed with the mirrors in :mod:`.sdk_shapes`, so no SDK is needed
to build them and they type-check where the SDKs expect their own params. The dispatch helpers
accept the SDKs' objects or plain dicts (they read ``id``/``function.name``/``function.arguments``
for an OpenAI Chat Completions tool call, ``call_id``/``name``/``arguments`` for a Responses
``function_call`` item and ``id``/``name``/``input`` for an Anthropic ``tool_use`` block).

OpenAI's ``strict`` flag is always sent. With ``strict=False`` (the default) the model sees each
tool's schema as it is: optional arguments may be omitted. With ``strict=True`` the schema is
rewritten into the subset strict mode accepts (:func:`strict_schema`): every property required,
optional ones nullable (``null`` means "use the default", which the tools accept), and only
structural keywords kept; the tools still validate every bound themselves.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from .base import SkillTool
from .sdk_shapes import (
    AnthropicTool,
    AnthropicToolResult,
    OpenAIChatTool,
    OpenAIFunctionCallOutput,
    OpenAIResponsesTool,
    OpenAIToolMessage,
)

__all__ = [
    "AsyncToolDispatcher",
    "ToolDispatcher",
    "anthropic_tool_result",
    "anthropic_tool_result_async",
    "openai_function_call_output",
    "openai_tool_message",
    "openai_tool_message_async",
    "strict_schema",
    "to_anthropic_tools",
    "to_openai_responses_tools",
    "to_openai_tools",
]

# Keywords kept in a strict-mode schema: structure only. Bounds (minLength, minimum, ...) and
# defaults are dropped; the tool's own argument model still enforces them.
_STRICT_KEYWORDS = frozenset(
    {"type", "description", "enum", "properties", "required", "additionalProperties", "items"}
)


class ToolDispatcher(Protocol):
    """Anything that runs a tool call by name (``SkillTools`` is one)."""

    def dispatch(self, name: str, arguments: Mapping[str, Any] | str | None) -> str:
        """Run the call and return its result text (never raises)."""
        ...


class AsyncToolDispatcher(Protocol):
    """Anything that runs a tool call by name from asyncio code (``SkillTools`` is one)."""

    async def adispatch(self, name: str, arguments: Mapping[str, Any] | str | None) -> str:
        """Run the call and return its result text (never raises)."""
        ...


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    kind = node.get("type")
    if isinstance(kind, str):
        node["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        node["type"] = [*kind, "null"]
    if isinstance(node.get("enum"), list) and None not in node["enum"]:
        node["enum"] = [*node["enum"], None]
    return node


def _strict_node(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict_node(item) for item in node]
    if not isinstance(node, dict):
        return node
    result: dict[str, Any] = {}
    for key, value in node.items():
        if key not in _STRICT_KEYWORDS:
            continue
        if key == "properties":
            result[key] = {name: _strict_node(sub) for name, sub in value.items()}
        elif key == "items":
            result[key] = _strict_node(value)
        else:
            result[key] = copy.deepcopy(value)
    if result.get("type") == "object" or "properties" in result:
        properties: dict[str, Any] = result.setdefault("properties", {})
        required = set(node.get("required", []))
        for name, sub in properties.items():
            if name not in required and isinstance(sub, dict):
                properties[name] = _nullable(sub)
        result["required"] = list(properties)
        result["additionalProperties"] = False
    return result


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` rewritten for OpenAI strict mode (a new dict; the input is untouched).

    Every object lists all its properties in ``required`` and forbids others; a property that
    was optional becomes nullable (``"type": [T, "null"]``, ``None`` added to an ``enum``);
    only ``type``, ``description``, ``enum``, ``properties``, ``required``,
    ``additionalProperties`` and ``items`` are kept.
    """
    result: dict[str, Any] = _strict_node(dict(schema))
    return result


def _parameters(tool: SkillTool, strict: bool) -> dict[str, object]:
    return strict_schema(tool.parameters) if strict else tool.parameters


def to_openai_tools(tools: Iterable[SkillTool], *, strict: bool = False) -> list[OpenAIChatTool]:
    """Chat Completions format: ``{"type": "function", "function": {name, description,
    parameters, strict}}``; see the module docstring for ``strict``."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": _parameters(tool, strict),
                "strict": strict,
            },
        }
        for tool in tools
    ]


def to_openai_responses_tools(
    tools: Iterable[SkillTool], *, strict: bool = False
) -> list[OpenAIResponsesTool]:
    """Responses API format: ``{"type": "function", name, description, parameters, strict}``;
    see the module docstring for ``strict``."""
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": _parameters(tool, strict),
            "strict": strict,
        }
        for tool in tools
    ]


def to_anthropic_tools(tools: Iterable[SkillTool]) -> list[AnthropicTool]:
    """Anthropic Messages format: ``{name, description, input_schema}``."""
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]


def _field(item: Any, name: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


def _openai_call(tool_call: Any) -> tuple[str, Any]:
    function = _field(tool_call, "function")
    return str(_field(function, "name") or ""), _field(function, "arguments")


def _openai_message(tool_call: Any, result: str) -> OpenAIToolMessage:
    return {"role": "tool", "tool_call_id": str(_field(tool_call, "id") or ""), "content": result}


def openai_tool_message(dispatcher: ToolDispatcher, tool_call: Any) -> OpenAIToolMessage:
    """Run an OpenAI Chat Completions tool call; return the ``role: tool`` message to append."""
    return _openai_message(tool_call, dispatcher.dispatch(*_openai_call(tool_call)))


async def openai_tool_message_async(
    dispatcher: AsyncToolDispatcher, tool_call: Any
) -> OpenAIToolMessage:
    """:func:`openai_tool_message` through ``await dispatcher.adispatch(...)``."""
    return _openai_message(tool_call, await dispatcher.adispatch(*_openai_call(tool_call)))


def openai_function_call_output(dispatcher: ToolDispatcher, item: Any) -> OpenAIFunctionCallOutput:
    """Run an OpenAI Responses ``function_call`` item; return the ``function_call_output`` input
    item to send back."""
    result = dispatcher.dispatch(str(_field(item, "name") or ""), _field(item, "arguments"))
    return {
        "type": "function_call_output",
        "call_id": str(_field(item, "call_id") or ""),
        "output": result,
    }


def anthropic_tool_result(dispatcher: ToolDispatcher, block: Any) -> AnthropicToolResult:
    """Run an Anthropic ``tool_use`` block; return the ``tool_result`` content block."""
    result = dispatcher.dispatch(str(_field(block, "name") or ""), _field(block, "input"))
    return _anthropic_result(block, result)


async def anthropic_tool_result_async(
    dispatcher: AsyncToolDispatcher, block: Any
) -> AnthropicToolResult:
    """:func:`anthropic_tool_result` through ``await dispatcher.adispatch(...)``."""
    name = str(_field(block, "name") or "")
    return _anthropic_result(block, await dispatcher.adispatch(name, _field(block, "input")))


def _anthropic_result(block: Any, result: str) -> AnthropicToolResult:
    return {
        "type": "tool_result",
        "tool_use_id": str(_field(block, "id") or ""),
        "content": result,
        "is_error": result.startswith("Error:"),
    }
