"""The :class:`~skillruntime.core.tools.SkillTools` set as plain Agents SDK ``FunctionTool``s.

For agents that do not use the sandbox beta: each tool keeps its name, description and JSON
Schema; a call runs through :meth:`SkillTools.adispatch` (the event loop never waits on the
runtime) and always returns the tool's text, ``Error: …`` included, never raising into the run.

Every tool stays enabled whatever the active skills' ``allowed-tools`` say: the SDK ends a run
with ``ModelBehaviorError`` when the model calls a disabled tool, so hiding a tool would turn
the refusal into a crash. A call the active skills do not allow is refused by the tool itself,
with an ``Error:`` result naming the restriction, and nothing runs.
"""

from __future__ import annotations

from typing import Any

from agents import FunctionTool, RunContextWrapper

from skillruntime.core.tools.toolset import SkillTools

__all__ = ["function_tools"]


def _tool(tools: SkillTools, name: str, description: str, schema: dict[str, Any]) -> FunctionTool:
    async def invoke(_context: RunContextWrapper[Any], arguments: str) -> str:
        return await tools.adispatch(name, arguments)

    return FunctionTool(
        name=name,
        description=description,
        params_json_schema=schema,
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


def function_tools(tools: SkillTools) -> list[FunctionTool]:
    """One ``FunctionTool`` per tool of ``tools`` (``Agent(tools=function_tools(tools))``)."""
    return [_tool(tools, t.name, t.description, t.parameters) for t in tools.all_tools]
