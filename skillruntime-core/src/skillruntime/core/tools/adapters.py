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
    "ToolDispatcher",
    "anthropic_tool_result",
    "openai_tool_message",
    "to_anthropic_tools",
    "to_openai_responses_tools",
    "to_openai_tools",
]


class ToolDispatcher(Protocol):
    """Anything that runs a tool call by name (``SkillTools`` is one)."""

    def dispatch(self, name: str, arguments: Mapping[str, Any] | str | None) -> str:
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


def openai_tool_message(dispatcher: ToolDispatcher, tool_call: Any) -> dict[str, Any]:
    """Run an OpenAI Chat Completions tool call; return the ``role: tool`` message to append."""
    function = _field(tool_call, "function")
    name = str(_field(function, "name") or "")
    result = dispatcher.dispatch(name, _field(function, "arguments"))
    return {"role": "tool", "tool_call_id": _field(tool_call, "id"), "content": result}


def anthropic_tool_result(dispatcher: ToolDispatcher, block: Any) -> dict[str, Any]:
    """Run an Anthropic ``tool_use`` block; return the ``tool_result`` content block."""
    result = dispatcher.dispatch(str(_field(block, "name") or ""), _field(block, "input"))
    return {
        "type": "tool_result",
        "tool_use_id": _field(block, "id"),
        "content": result,
        "is_error": result.startswith("Error:"),
    }
