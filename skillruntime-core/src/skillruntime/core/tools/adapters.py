"""Tool definitions in the OpenAI and Anthropic formats, and tool-call dispatch helpers.

Definitions are plain dicts, so no SDK is needed to build them. The dispatch helpers accept the
SDKs' objects or plain dicts (they read ``id``/``function.name``/``function.arguments`` for an
OpenAI tool call and ``id``/``name``/``input`` for an Anthropic ``tool_use`` block).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from .base import SkillTool

__all__ = [
    "AsyncToolDispatcher",
    "ToolDispatcher",
    "anthropic_tool_result",
    "anthropic_tool_result_async",
    "openai_tool_message",
    "openai_tool_message_async",
    "to_anthropic_tools",
    "to_openai_responses_tools",
    "to_openai_tools",
]


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


def to_openai_tools(tools: Iterable[SkillTool]) -> list[dict[str, Any]]:
    """Chat Completions format: ``{"type": "function", "function": {name, description,
    parameters}}``."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def to_openai_responses_tools(tools: Iterable[SkillTool]) -> list[dict[str, Any]]:
    """Responses API format: ``{"type": "function", name, description, parameters}``."""
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        }
        for tool in tools
    ]


def to_anthropic_tools(tools: Iterable[SkillTool]) -> list[dict[str, Any]]:
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


def _openai_message(tool_call: Any, result: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": _field(tool_call, "id"), "content": result}


def openai_tool_message(dispatcher: ToolDispatcher, tool_call: Any) -> dict[str, Any]:
    """Run an OpenAI Chat Completions tool call; return the ``role: tool`` message to append."""
    return _openai_message(tool_call, dispatcher.dispatch(*_openai_call(tool_call)))


async def openai_tool_message_async(
    dispatcher: AsyncToolDispatcher, tool_call: Any
) -> dict[str, Any]:
    """:func:`openai_tool_message` through ``await dispatcher.adispatch(...)``."""
    return _openai_message(tool_call, await dispatcher.adispatch(*_openai_call(tool_call)))


def anthropic_tool_result(dispatcher: ToolDispatcher, block: Any) -> dict[str, Any]:
    """Run an Anthropic ``tool_use`` block; return the ``tool_result`` content block."""
    result = dispatcher.dispatch(str(_field(block, "name") or ""), _field(block, "input"))
    return _anthropic_result(block, result)


async def anthropic_tool_result_async(
    dispatcher: AsyncToolDispatcher, block: Any
) -> dict[str, Any]:
    """:func:`anthropic_tool_result` through ``await dispatcher.adispatch(...)``."""
    name = str(_field(block, "name") or "")
    return _anthropic_result(block, await dispatcher.adispatch(name, _field(block, "input")))


def _anthropic_result(block: Any, result: str) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": _field(block, "id"),
        "content": result,
        "is_error": result.startswith("Error:"),
    }
