"""The record of one agent turn for a session store, and the sink protocol that stores it.

At the end of a turn (docs/agent-turn.md: after the last tool call, before the completion
event and the ``finally`` that closes the turn) the application hands the turn's record to a
session sink with :meth:`~.turn.SkillTurn.record_session`. The record holds what a session may
keep (``docs/agent-turn.md`` "Views and usage records"):

* the user message and the answer, with secrets redacted (:func:`~.views.redact_text`);
* one :class:`TurnToolCall` per call, in completion order: the tool, its status and error code,
  the canonical skill references (a remote skill's ``viking://`` URI, a local skill's name), the
  redacted resolved arguments, and the redacted result text only when no skill is tied to the
  call — never a skill's body or a file of it.

A sink is anything with ``record_turn(record) -> SessionOutcome``: the OpenViking session sink
(``skillruntime.viking.session_sink.VikingSessionSink``) or an application's own store; asyncio
code awaits :meth:`~.turn.SkillTurn.arecord_session`, which takes such a sink (run in a worker
thread) or an :class:`AsyncTurnSessionSink` (``async def arecord_turn``). A sink
reports failures in the outcome; should one raise anyway, the turn turns the exception into a
failed outcome, so recording a session never fails the turn nor skips its ``close()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .views import CallStatus

__all__ = [
    "AsyncTurnSessionSink",
    "SessionOutcome",
    "TurnRecord",
    "TurnSessionSink",
    "TurnToolCall",
]


@dataclass(frozen=True)
class TurnToolCall:
    """One call of the turn as a session stores it (already redacted).

    ``skills`` are canonical skill references: the ``viking://`` URI of a remote skill, the name
    of a local one. ``output`` is the result text, present only when no skill is tied to the call
    (otherwise ``None``: a skill's body or resource never leaves the turn)."""

    call_id: str | None
    tool: str
    status: CallStatus
    code: str | None = None
    cause: str | None = None
    skills: tuple[str, ...] = ()
    arguments: Mapping[str, Any] | None = None
    output: str | None = None

    @property
    def skill_uri(self) -> str | None:
        """The first remote (``viking://``) skill of the call, or ``None``."""
        return next((skill for skill in self.skills if skill.startswith("viking://")), None)


@dataclass(frozen=True)
class TurnRecord:
    """What a session stores of one turn: ``turn_id`` (the key that makes recording idempotent:
    open a retried turn with the same id), the redacted ``user_message`` and ``answer``, and the
    ``calls`` in completion order."""

    turn_id: str
    user_message: str
    answer: str
    calls: tuple[TurnToolCall, ...] = ()


@dataclass(frozen=True)
class SessionOutcome:
    """How recording one turn went (never raised: reported).

    ``written``: the turn's messages were stored by this call; ``duplicate``: they were already
    stored for this turn id, so nothing was added; ``committed``: the session was committed
    after them. ``error`` / ``commit_error``: ``"CODE: message"`` of a failed write or commit
    (redacted, no secret, no body). ``session_id``: the session written to."""

    session_id: str | None = None
    written: bool = False
    duplicate: bool = False
    committed: bool = False
    error: str | None = None
    commit_error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the turn is stored and no commit it asked for failed."""
        return self.error is None and self.commit_error is None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "session_id": self.session_id,
            "written": self.written,
            "duplicate": self.duplicate,
            "committed": self.committed,
            "error": self.error,
            "commit_error": self.commit_error,
        }


@runtime_checkable
class TurnSessionSink(Protocol):
    """Stores a turn's record in a session. Should report failures in the returned
    :class:`SessionOutcome` rather than raise; recording the same ``turn_id`` twice must not add
    the turn twice."""

    def record_turn(self, record: TurnRecord) -> SessionOutcome:
        """Store ``record`` (and commit by the sink's policy)."""
        ...


@runtime_checkable
class AsyncTurnSessionSink(Protocol):
    """The asyncio form of :class:`TurnSessionSink` (an application's natively async store):
    :meth:`~.turn.SkillTurn.arecord_session` awaits it on the loop; a sync sink is run in a
    worker thread instead. The same rules: report failures, store a ``turn_id`` once."""

    async def arecord_turn(self, record: TurnRecord) -> SessionOutcome:
        """Store ``record`` (and commit by the sink's policy)."""
        ...
