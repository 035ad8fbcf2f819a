"""TypedDicts mirroring the request shapes of the ``openai`` and ``anthropic`` SDKs.

The adapters return these, so their output type-checks where the SDKs expect their own
``TypedDict`` params (``FunctionToolParam``, ``ChatCompletionFunctionToolParam``,
``ChatCompletionToolMessageParam``, ``FunctionCallOutput``, ``ToolParam``,
``ToolResultBlockParam``) without importing either SDK. A ``TypedDict`` is assignable to another
only when it declares the same keys with the same types, so each mirror lists every key of its
SDK counterpart, including those the adapters never set. Nested shapes the adapters never produce
(content-block lists, caller descriptions) are typed ``Any``.

The mirrors follow the SDK versions pinned in the repository's ``requirements-dev.txt``; the test
suite checks them against those SDKs with mypy and at runtime.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, Required, TypedDict

__all__ = [
    "AnthropicCacheControl",
    "AnthropicTool",
    "AnthropicToolResult",
    "OpenAIChatTool",
    "OpenAIFunctionCallOutput",
    "OpenAIFunctionDefinition",
    "OpenAIResponsesTool",
    "OpenAIToolMessage",
]

# -- OpenAI Chat Completions -----------------------------------------------------------------


class OpenAIFunctionDefinition(TypedDict, total=False):
    """``openai.types.shared_params.FunctionDefinition``."""

    name: Required[str]
    description: str
    parameters: dict[str, object]
    strict: bool | None


class OpenAIChatTool(TypedDict, total=False):
    """``openai.types.chat.ChatCompletionFunctionToolParam``."""

    function: Required[OpenAIFunctionDefinition]
    type: Required[Literal["function"]]


class OpenAIToolMessage(TypedDict, total=False):
    """``openai.types.chat.ChatCompletionToolMessageParam`` (``content`` is always text here)."""

    content: Required[str | Iterable[Any]]
    role: Required[Literal["tool"]]
    tool_call_id: Required[str]


# -- OpenAI Responses ------------------------------------------------------------------------

_ResponsesToolReserved = TypedDict("_ResponsesToolReserved", {"async": bool}, total=False)


class OpenAIResponsesTool(_ResponsesToolReserved, total=False):
    """``openai.types.responses.FunctionToolParam`` (``strict`` is required there)."""

    name: Required[str]
    parameters: Required[dict[str, object] | None]
    strict: Required[bool | None]
    type: Required[Literal["function"]]
    allowed_callers: list[Literal["direct", "programmatic"]] | None
    defer_loading: bool
    description: str | None
    output_schema: dict[str, object] | None


class OpenAIFunctionCallOutput(TypedDict, total=False):
    """``openai.types.responses.response_input_param.FunctionCallOutput``."""

    output: Required[str | list[Any]]
    type: Required[Literal["function_call_output"]]
    id: str | None
    call_id: str | None
    caller: Any
    name: str | None
    namespace: str | None
    status: Literal["in_progress", "completed", "incomplete"] | None


# -- Anthropic Messages ----------------------------------------------------------------------


_AnthropicCaller = Literal[
    "direct", "code_execution_20250825", "code_execution_20260120", "code_execution_20260521"
]


class AnthropicCacheControl(TypedDict, total=False):
    """``anthropic.types.CacheControlEphemeralParam``."""

    type: Required[Literal["ephemeral"]]
    ttl: Literal["5m", "1h"]


class AnthropicTool(TypedDict, total=False):
    """``anthropic.types.ToolParam``."""

    input_schema: Required[Any]
    name: Required[str]
    allowed_callers: list[_AnthropicCaller]
    cache_control: AnthropicCacheControl | None
    defer_loading: bool
    description: str
    eager_input_streaming: bool | None
    input_examples: Iterable[dict[str, object]]
    strict: bool
    type: Literal["custom"] | None


class AnthropicToolResult(TypedDict, total=False):
    """``anthropic.types.ToolResultBlockParam`` (``content`` is always text here)."""

    tool_use_id: Required[str]
    type: Required[Literal["tool_result"]]
    cache_control: AnthropicCacheControl | None
    content: str | Iterable[Any]
    is_error: bool
    toolset_name: str | None
