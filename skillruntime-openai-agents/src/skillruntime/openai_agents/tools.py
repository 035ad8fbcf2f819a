"""The :class:`~skillruntime.core.tools.SkillTools` set as plain Agents SDK ``FunctionTool``s.

For agents that do not use the sandbox beta: each tool keeps its name, description and JSON
Schema; a call runs through ``adispatch`` (the event loop never waits on the runtime) and always
returns the tool's text, ``Error: …`` included, never raising into the run.

**Restricted schema.** Each tool's ``is_enabled`` is a callable the SDK's ``Runner`` evaluates
before every model call: once a skill with ``allowed-tools`` is active, the tools its policy does
not allow are left out of the schema the model sees on its next iteration (the intersection over
every active skill; ``skill`` always stays; ``docs/tools.md``, "allowed-tools").

**A call to a hidden tool.** A model may still call a tool it was not offered (it saw it on an
earlier step). By default the SDK ends such a run with ``ModelBehaviorError``; run with
:func:`function_tools_run_config` (or at least ``RunConfig(tool_not_found_behavior=
"return_error_to_model")``) and the call becomes an ``Error:`` tool result naming the active
skills, nothing runs, and the run goes on. ``function_tools(tools, hide_disallowed=False)`` keeps
every tool offered instead, for a run config you cannot change: a call the active skills do not
allow then reaches the tool, which refuses it with an ``Error:`` result.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from agents import FunctionTool, RunConfig, RunContextWrapper, ToolErrorFormatterArgs

from skillruntime.core.tools.async_toolset import AsyncSkillTools
from skillruntime.core.tools.toolset import SkillTools

__all__ = ["function_tools", "function_tools_run_config", "hidden_tool_message"]

ToolSet = SkillTools | AsyncSkillTools
"""The tool sets :func:`function_tools` converts (both answer ``adispatch``)."""


def _offered(tools: ToolSet, name: str) -> bool:
    return any(tool.name == name for tool in tools.tools)


def _tool(
    tools: ToolSet, name: str, description: str, schema: dict[str, Any], hide: bool
) -> FunctionTool:
    async def invoke(_context: RunContextWrapper[Any], arguments: str) -> str:
        return await tools.adispatch(name, arguments)

    def enabled(_context: RunContextWrapper[Any], _agent: Any) -> bool:
        # Evaluated by the Runner before each model call: the policy of the skills active now.
        return _offered(tools, name)

    return FunctionTool(
        name=name,
        description=description,
        params_json_schema=schema,
        on_invoke_tool=invoke,
        strict_json_schema=False,
        is_enabled=enabled if hide else True,
    )


def function_tools(tools: ToolSet, *, hide_disallowed: bool = True) -> list[FunctionTool]:
    """One ``FunctionTool`` per tool of ``tools`` (``Agent(tools=function_tools(tools))``).

    With ``hide_disallowed`` (the default) a tool the active skills' ``allowed-tools`` do not
    allow is disabled, so it is not in the schema of the next model call; run the agent with
    :func:`function_tools_run_config` so that a call to such a tool is an error result rather
    than the end of the run. ``hide_disallowed=False`` offers every tool on every step (each
    refuses a call the active skills do not allow).
    """
    return [
        _tool(tools, t.name, t.description, t.parameters, hide_disallowed) for t in tools.all_tools
    ]


def hidden_tool_message(tools: ToolSet, name: str) -> str:
    """The tool result of a call to ``name``, a tool of ``tools`` that was not offered."""
    offered = ", ".join(tool.name for tool in tools.tools)
    if _offered(tools, name):
        # Offered again now (the activations were reset during the run): it still did not run.
        return (
            f"Error: tool '{name}' was not offered on this step and did not run; "
            f"the tools available now: {offered}"
        )
    active = ", ".join(f"'{skill}'" for skill in tools.active_skills)
    return (
        f"Error: tool '{name}' is not available: the allowed-tools of the active skills "
        f"({active}) do not allow it, and it did not run; the tools available now: {offered}"
    )


def function_tools_run_config(tools: ToolSet, config: RunConfig | None = None) -> RunConfig:
    """``config`` (a new ``RunConfig`` by default) ready for :func:`function_tools`' hidden tools.

    A copy with ``tool_not_found_behavior="return_error_to_model"`` (a call to a tool missing
    from the model's schema is answered, not raised as ``ModelBehaviorError``) and a
    ``tool_error_formatter`` that answers a call to a hidden tool of ``tools`` with
    :func:`hidden_tool_message`; every other error goes to ``config``'s own formatter (or the
    SDK's default message). ``config`` itself is not changed.
    """
    base = config if config is not None else RunConfig()
    previous = base.tool_error_formatter

    async def formatter(args: ToolErrorFormatterArgs[Any]) -> str | None:
        if args.kind == "tool_not_found" and tools.get(args.tool_name) is not None:
            return hidden_tool_message(tools, args.tool_name)
        if previous is None:
            return None
        message = previous(args)
        return await message if inspect.isawaitable(message) else message

    return dataclasses.replace(
        base, tool_not_found_behavior="return_error_to_model", tool_error_formatter=formatter
    )
