"""Static proof that the adapters' outputs are the SDKs' own param types.

Not a test module: ``make lint`` runs ``mypy --strict`` on it, and every assignment below fails
type checking if a mirror in ``skillruntime.core.tools.sdk_shapes`` drifts from the ``openai``
or ``anthropic`` SDK version pinned in ``requirements-dev.txt``.
"""

from __future__ import annotations

from typing import Any

from anthropic.types import ToolParam, ToolResultBlockParam
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionToolMessageParam
from openai.types.responses import FunctionToolParam
from openai.types.responses.response_input_param import FunctionCallOutput

from skillruntime.core.tools import (
    SkillTools,
    anthropic_tool_result,
    openai_function_call_output,
    openai_tool_message,
    to_anthropic_tools,
    to_openai_responses_tools,
    to_openai_tools,
)


def adapters_fit_the_sdk_types(tools: SkillTools, call: Any) -> None:
    """Each adapter's result assigned to the SDK type a client call expects."""
    chat: list[ChatCompletionFunctionToolParam] = to_openai_tools(tools.tools, strict=True)
    chat = tools.openai_tools()
    responses: list[FunctionToolParam] = to_openai_responses_tools(tools.tools)
    responses = tools.openai_responses_tools(strict=True)
    claude: list[ToolParam] = to_anthropic_tools(tools.tools)
    claude = tools.anthropic_tools()
    message: ChatCompletionToolMessageParam = openai_tool_message(tools, call)
    output: FunctionCallOutput = openai_function_call_output(tools, call)
    result: ToolResultBlockParam = anthropic_tool_result(tools, call)
    del chat, responses, claude, message, output, result
