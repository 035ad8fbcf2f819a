"""Tool results of an agent turn: the call, its usage record and its three views.

A turn keeps three views of every tool result (``docs/agent-turn.md``, "Views and usage records"):

* the **model view** (:attr:`ToolResult.content`): the full text, including a skill's restored
  instructions; it belongs in the current turn's model messages only;
* the **persisted view** (:meth:`ToolResult.persisted_view`), for session stores and
  ``TOOL_RESULT`` events: status, error code and ``skill_uri``/``skill_uris``; the text is left out
  whenever the call is tied to a skill (an activation, a read of a skill's resource), so no skill
  body is ever stored;
* the **log view** (:meth:`ToolResult.log_view`): the persisted view with secrets redacted from
  what remains and the text cut to :data:`LOG_TEXT_LIMIT` characters.

Each call also has a :class:`UsageRecord`: ``skill_uri`` (the first associated skill, for
consumers of a single value), ``skill_uris`` (all of them) and ``resolved_args`` (the arguments
after resource resolution, redacted).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "LOG_TEXT_LIMIT",
    "CallStatus",
    "ToolCall",
    "ToolResult",
    "UsageRecord",
    "error_code",
    "redact_text",
]

LOG_TEXT_LIMIT = 2_000
"""Characters of a result text the log view keeps at most."""

CallStatus = Literal["ok", "error", "blocked"]
"""``ok``: the tool ran and succeeded; ``error``: it ran (or was refused) and failed;
``blocked``: it did not run because of the batch rule (``SKILL_CONTEXT_UPDATED`` or
``SKILL_ACTIVATION_FAILED``)."""

_SECRET_PATTERNS = (
    re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]+"),
    re.compile(
        r"(?i)\b([A-Za-z0-9_]*(?:api[_-]?key|token|secret|password|passwd|credential)s?)"
        r"([\"']?\s*[=:]\s*|\s+)(\"[^\"]*\"|'[^']*'|[^\s,;&|]+)"
    ),
    re.compile(r"\b(sk|pk|rk|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{8,}"),
)

_CODE = re.compile(r"^Error: ([A-Z][A-Z0-9_]+): ")


def redact_text(text: str) -> str:
    """``text`` with bearer tokens, ``key=value`` secrets and well-known token shapes masked."""
    text = _SECRET_PATTERNS[0].sub(r"\1 [REDACTED]", text)
    text = _SECRET_PATTERNS[1].sub(r"\1\2[REDACTED]", text)
    return _SECRET_PATTERNS[2].sub("[REDACTED]", text)


def error_code(content: str) -> str | None:
    """The stable code of an ``Error: CODE: …`` result (``SKILL_RESOURCE_NOT_FOUND``, …)."""
    match = _CODE.match(content)
    return match.group(1) if match else None


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {str(key): _redact_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(item) for item in value]
    return value


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a model response: the tool ``name``, its ``arguments`` (a mapping, a JSON
    object string or ``None``) and the provider's call ``id`` if any."""

    name: str
    arguments: Mapping[str, Any] | str | None = None
    id: str | None = None


@dataclass(frozen=True)
class UsageRecord:
    """What one call did, for the session's tool-usage records (no result text, no secrets).

    ``code`` is the stable error code of a failed call; ``cause`` the code of the failure
    behind it when that differs (e.g. the skill store's ``SKILL_UNAVAILABLE`` behind
    ``SKILL_MATERIALIZATION_FAILED``)."""

    call_id: str | None
    tool: str
    status: CallStatus
    code: str | None = None
    skill_uris: tuple[str, ...] = ()
    resolved_args: Mapping[str, Any] | None = None
    cause: str | None = None

    @property
    def skill_uri(self) -> str | None:
        """The first associated skill (``None`` when there is none)."""
        return self.skill_uris[0] if self.skill_uris else None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready copy; ``resolved_args`` redacted."""
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "status": self.status,
            "code": self.code,
            "cause": self.cause,
            "skill_uri": self.skill_uri,
            "skill_uris": list(self.skill_uris),
            "resolved_args": None
            if self.resolved_args is None
            else _redact_value(dict(self.resolved_args)),
        }


@dataclass(frozen=True)
class ToolResult:
    """The result of one call: the model view (:attr:`content`) and its :attr:`usage` record."""

    call: ToolCall
    content: str
    usage: UsageRecord = field(repr=False)

    @property
    def call_id(self) -> str | None:
        """The provider's call id, for pairing the result with its call."""
        return self.call.id

    @property
    def code(self) -> str | None:
        """The error code (``SKILL_CONTEXT_UPDATED``, ``SKILL_RESOURCE_NOT_FOUND``, …), if any."""
        return self.usage.code

    @property
    def is_error(self) -> bool:
        """Whether the call failed or was blocked."""
        return self.usage.status != "ok"

    @property
    def model_view(self) -> str:
        """The full text for the current turn's model messages."""
        return self.content

    def persisted_view(self) -> dict[str, Any]:
        """What a session may store: status, code, ``skill_uri(s)``, redacted resolved
        arguments, and the text only when no skill is associated with the call."""
        view = self.usage.as_dict()
        if not self.usage.skill_uris:
            view["content"] = redact_text(self.content)
        return view

    def log_view(self) -> dict[str, Any]:
        """The persisted view with the remaining text cut to :data:`LOG_TEXT_LIMIT`."""
        view = self.persisted_view()
        text = view.get("content")
        if isinstance(text, str) and len(text) > LOG_TEXT_LIMIT:
            view["content"] = text[:LOG_TEXT_LIMIT] + f"... ({len(text) - LOG_TEXT_LIMIT} more)"
        return view
