"""Same-batch activation: the tool calls of one model response (``docs/agent-turn.md``, "The loop").

A model may activate a skill and, in the same response, call a tool built against the tool list
of before the activation. :func:`run_batch` therefore runs the activation calls (``skill``) first,
in their order; then:

* if any activation failed, every other call returns ``Error: SKILL_ACTIVATION_FAILED: …``
  without running (a failed activation adds no policy, so nothing may run unrestricted);
* else, if the set of active skills changed, every other call returns
  ``Error: SKILL_CONTEXT_UPDATED: …`` without running — the model retries against the refreshed
  tool list;
* else (no activation, or only re-activations of active skills) the other calls run in order.

Results always come back in the original call order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .views import ToolCall, ToolResult, UsageRecord

__all__ = [
    "ACTIVATION_TOOL",
    "SKILL_ACTIVATION_FAILED",
    "SKILL_CONTEXT_UPDATED",
    "CallInput",
    "as_call",
    "blocked_result",
    "run_batch",
]

SKILL_CONTEXT_UPDATED = "SKILL_CONTEXT_UPDATED"
SKILL_ACTIVATION_FAILED = "SKILL_ACTIVATION_FAILED"
ACTIVATION_TOOL = "skill"
"""The tool whose calls activate skills."""

CallInput = ToolCall | tuple[str, Any] | tuple[str, Any, str | None] | Mapping[str, Any]
"""A call: a :class:`ToolCall`, ``(name, arguments[, id])`` or a mapping with ``name``,
``arguments`` (or ``input``/``args``) and optionally ``id``."""


def as_call(item: CallInput) -> ToolCall:
    """``item`` as a :class:`ToolCall`; raises ``TypeError``/``ValueError`` for anything else."""
    if isinstance(item, ToolCall):
        return item
    if isinstance(item, tuple):
        if len(item) not in (2, 3) or not isinstance(item[0], str):
            raise ValueError("a call tuple is (name, arguments) or (name, arguments, id)")
        call_id = item[2] if len(item) == 3 else None
        return ToolCall(item[0], item[1], None if call_id is None else str(call_id))
    if isinstance(item, Mapping):
        name = item.get("name")
        if not isinstance(name, str):
            raise ValueError("a call mapping needs a string 'name'")
        arguments = next((item[key] for key in ("arguments", "input", "args") if key in item), None)
        call_id = item.get("id")
        return ToolCall(name, arguments, None if call_id is None else str(call_id))
    raise TypeError(f"unsupported tool call: {type(item).__name__}")


def blocked_result(call: ToolCall, code: str, message: str) -> ToolResult:
    """The result of a call the batch rule kept from running."""
    return ToolResult(
        call,
        f"Error: {code}: {message}",
        UsageRecord(call_id=call.id, tool=call.name, status="blocked", code=code),
    )


def run_batch(
    calls: Iterable[CallInput],
    run_one: Callable[[ToolCall], ToolResult],
    active_names: Callable[[], Sequence[str]],
) -> list[ToolResult]:
    """Run one model response's ``calls`` under the same-batch rule (see the module)."""
    batch = [as_call(item) for item in calls]
    results: list[ToolResult | None] = [None] * len(batch)
    activations = [index for index, call in enumerate(batch) if call.name == ACTIVATION_TOOL]
    before = list(active_names())
    failed: list[str] = []
    for index in activations:
        result = run_one(batch[index])
        results[index] = result
        if result.is_error:
            failed.append(_skill_named(batch[index]))
    added = [name for name in active_names() if name not in before]
    for index, call in enumerate(batch):
        if results[index] is not None:
            continue
        if failed:
            results[index] = blocked_result(
                call,
                SKILL_ACTIVATION_FAILED,
                f"the activation of {', '.join(failed)} in the same batch failed, so this call "
                "did not run",
            )
        elif added:
            results[index] = blocked_result(
                call,
                SKILL_CONTEXT_UPDATED,
                f"{', '.join(added)} became active in this batch and the available tools may "
                "have changed; this call did not run: call it again if it is still needed",
            )
        else:
            results[index] = run_one(call)
    return [result for result in results if result is not None]


def _skill_named(call: ToolCall) -> str:
    arguments = call.arguments
    if isinstance(arguments, Mapping):
        for key in ("command", "name", "skill"):
            value = arguments.get(key)
            if isinstance(value, str) and value.strip():
                return repr(value.strip())
    return "a skill"
