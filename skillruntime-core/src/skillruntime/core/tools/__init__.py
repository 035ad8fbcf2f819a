"""Model-facing skill tools over any :class:`~skillruntime.core.runtime.spi.SkillRuntime`.

:class:`SkillTools` builds ``skill``, ``bash``, ``read``, ``write``, ``edit``, ``ls``, ``glob``,
``grep`` and (with a publisher) ``publish_file``. Each is a :class:`SkillTool` with a name, a
description, a JSON Schema and ``invoke(arguments) -> str``; errors come back as ``Error: …``
strings. Adapters give the OpenAI and Anthropic tool formats. :class:`AsyncSkillTools` is the
same set over an :class:`~skillruntime.core.runtime.async_spi.AsyncSkillRuntime`, awaited natively.
:class:`SkillTurn` is one agent turn; its record (:class:`TurnRecord`) goes to a session sink
(:class:`TurnSessionSink`, :class:`AsyncTurnSessionSink`) and comes back as a
:class:`SessionOutcome`.
"""

from .adapters import (
    ToolDispatcher,
    anthropic_tool_result,
    openai_function_call_output,
    openai_tool_message,
    strict_schema,
    to_anthropic_tools,
    to_openai_responses_tools,
    to_openai_tools,
)
from .async_toolset import AsyncSkillTool, AsyncSkillTools
from .base import SkillTool, arguments_schema
from .batch import SKILL_ACTIVATION_FAILED, SKILL_CONTEXT_UPDATED
from .policy import SkillPolicy, ToolSpec, parse_allowed_tools
from .resources import SKILL_RESOURCE_AMBIGUOUS, SKILL_RESOURCE_NOT_FOUND
from .skill import DEFAULT_DESCRIPTION_TEMPLATE, LoadedSkillSource, SkillSource
from .toolset import SkillInput, SkillTools
from .turn import SkillTurn
from .turn_record import (
    AsyncTurnSessionSink,
    SessionOutcome,
    TurnRecord,
    TurnSessionSink,
    TurnToolCall,
)
from .views import ToolCall, ToolResult, UsageRecord

__all__ = [
    "DEFAULT_DESCRIPTION_TEMPLATE",
    "SKILL_ACTIVATION_FAILED",
    "SKILL_CONTEXT_UPDATED",
    "SKILL_RESOURCE_AMBIGUOUS",
    "SKILL_RESOURCE_NOT_FOUND",
    "AsyncSkillTool",
    "AsyncSkillTools",
    "AsyncTurnSessionSink",
    "LoadedSkillSource",
    "SessionOutcome",
    "SkillInput",
    "SkillPolicy",
    "SkillSource",
    "SkillTool",
    "SkillTools",
    "SkillTurn",
    "ToolCall",
    "ToolDispatcher",
    "ToolResult",
    "ToolSpec",
    "TurnRecord",
    "TurnSessionSink",
    "TurnToolCall",
    "UsageRecord",
    "anthropic_tool_result",
    "arguments_schema",
    "openai_function_call_output",
    "openai_tool_message",
    "parse_allowed_tools",
    "strict_schema",
    "to_anthropic_tools",
    "to_openai_responses_tools",
    "to_openai_tools",
]
