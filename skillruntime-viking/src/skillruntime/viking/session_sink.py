"""``VikingSessionSink``: an agent turn's record written to an OpenViking session.

The sink implements :class:`skillruntime.core.tools.turn_record.TurnSessionSink`: the turn calls
it from :meth:`~skillruntime.core.tools.turn.SkillTurn.record_session` at the end of the turn
(``docs/agent-turn.md`` "Recording the turn in a session"). One turn is
one request, ``POST /api/v1/sessions/{id}/messages/batch`` with two messages, both carrying the
turn's id as ``turn_id``:

* the user message (``role: user``, ``message_kind: user_query``, one ``text`` part);
* the answer (``role: assistant``, ``message_kind: assistant_step``): one ``tool`` part per call
  of the turn, in completion order — ``tool_id`` (the provider's call id), ``tool_name``,
  ``tool_input`` (the redacted resolved arguments), ``tool_status`` (``completed`` or
  ``error``), ``skill_uri`` (the remote skill's ``viking://`` URI; the server accepts nothing
  else there, so a local skill's name is named in ``tool_output``) and ``tool_output`` (the
  redacted result text when no skill is tied to the call, otherwise a status line: a skill's
  body or file never leaves the turn) — then a ``text`` part with the answer.

**Idempotent per turn.** Before writing, and again before retrying a write whose outcome is
unknown (a timeout, a broken connection, a 5xx), the sink reads the session's messages: a
message with the turn's ``turn_id`` means the turn is stored, and nothing is added. Within one
sink, a turn id it stored is remembered, so a retried turn costs no request at all. (A turn
archived by a commit shows among the session's messages until the commit's memory extraction
ends; a retry from another process after that would add it again.)

**Commit by policy** (:class:`CommitPolicy`): never (default), every N turns this sink stored,
or once the session's pending tokens reach M (the write's answer tells them). A commit is
retried only where the server surely did nothing (``503``, busy ``409``, no connection): a
second commit of an uncertain first one could archive twice.

Nothing raises: a failed write or commit is reported in the :class:`SessionOutcome`
(``"CODE: message"``, redacted) and logged as a warning. Each write (its checks and retries) is
one ``session.write`` audit event and each commit one ``session.commit`` event
(:mod:`skillruntime.core.observability.audit`; ``runtime="viking"``, ``conversation_id`` the
session id, ``bytes`` the written JSON); a failed one has ``outcome="error"`` and ``error_type``
its stable code (``SESSION_UNAVAILABLE``…), never the message. Storing a turn (its checks and
retries included) ends within the sink's ``deadline_seconds`` (default: the options'
``operation_timeout``), and so does a commit.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception, wait_fixed

from skillruntime.core.observability.audit import audited
from skillruntime.core.tools.turn_record import SessionOutcome, TurnRecord, TurnToolCall

from .options import VikingStoreOptions
from .sessions import SESSION_UNAVAILABLE, VikingSessionClient, VikingSessionError

__all__ = ["CommitPolicy", "VikingSessionSink", "commit_session", "session_messages"]

logger = logging.getLogger(__name__)

_REMEMBERED_TURNS = 4096
_RETRY_PAUSE_SECONDS = 0.2


@dataclass(frozen=True)
class CommitPolicy:
    """When the sink commits the session after storing a turn: every ``every_turns`` stored
    turns, or once ``pending_tokens`` reach the threshold; ``0`` turns a rule off (both ``0``:
    never, the default)."""

    every_turns: int = 0
    pending_tokens: int = 0

    def __post_init__(self) -> None:
        if self.every_turns < 0 or self.pending_tokens < 0:
            raise ValueError("commit thresholds are 0 (off) or positive")

    @classmethod
    def never(cls) -> CommitPolicy:
        """Never commit (the application or the server's own policy does)."""
        return cls()

    @classmethod
    def every_turn(cls) -> CommitPolicy:
        """Commit after every stored turn."""
        return cls(every_turns=1)

    def due(self, turns: int, pending_tokens: int | None) -> bool:
        """Whether ``turns`` stored since the last commit, or ``pending_tokens``, call for one."""
        if self.every_turns and turns >= self.every_turns:
            return True
        return bool(self.pending_tokens and (pending_tokens or 0) >= self.pending_tokens)


def _status_line(call: TurnToolCall) -> str:
    """What ``tool_output`` says of a call whose text stays in the turn."""
    line = "ok" if call.status == "ok" else f"{call.status} {call.code or ''}".rstrip()
    if call.cause:
        line += f" (cause {call.cause})"
    local = [skill for skill in call.skills if not skill.startswith("viking://")]
    if local:
        line += f"; local skill {', '.join(local)}"
    return f"{line}; the result text is not stored (tied to a skill)"


def _tool_part(call: TurnToolCall, index: int, turn_id: str) -> dict[str, Any]:
    return {
        "type": "tool",
        "tool_id": call.call_id or f"{turn_id}-{index}",
        "tool_name": call.tool,
        "skill_uri": call.skill_uri or "",
        "tool_input": dict(call.arguments or {}),
        "tool_output": call.output if call.output is not None else _status_line(call),
        "tool_status": "completed" if call.status == "ok" else "error",
    }


def session_messages(record: TurnRecord) -> list[dict[str, Any]]:
    """The two messages a turn is stored as (see the module docstring)."""
    parts = [_tool_part(call, index, record.turn_id) for index, call in enumerate(record.calls)]
    parts.append({"type": "text", "text": record.answer})
    return [
        {
            "role": "user",
            "parts": [{"type": "text", "text": record.user_message}],
            "turn_id": record.turn_id,
            "message_kind": "user_query",
        },
        {
            "role": "assistant",
            "parts": parts,
            "turn_id": record.turn_id,
            "message_kind": "assistant_step",
        },
    ]


def commit_session(
    client: VikingSessionClient, session_id: str, *, seconds: float | None = None
) -> dict[str, Any]:
    """``client.commit(session_id)`` as one ``session.commit`` audit event (a failure is
    ``outcome="error"`` with ``error_type`` its stable code); raises its
    :class:`~.sessions.VikingSessionError`."""
    failure: VikingSessionError | None = None
    with audited("session.commit", runtime="viking", conversation_id=session_id) as audit:
        try:
            return client.commit(session_id, seconds=seconds)
        except VikingSessionError as error:
            audit.error_type = error.code  # the stable code, never the message
            failure = error
    raise failure


class VikingSessionSink:
    """Stores turns in the OpenViking session ``session_id`` (see the module docstring).

    ``options`` name the server and the identity (the same as the skill store's);
    ``commit`` is the :class:`CommitPolicy`. Thread-safe; close it (or use it as a context
    manager) when done.
    """

    def __init__(
        self,
        options: VikingStoreOptions,
        session_id: str,
        *,
        commit: CommitPolicy | None = None,
        deadline_seconds: float | None = None,
        client: VikingSessionClient | None = None,
    ) -> None:
        if not session_id:
            raise ValueError("session_id is required")
        self.session_id = session_id
        self.commit_policy = commit or CommitPolicy()
        self._deadline = options.operation_timeout if deadline_seconds is None else deadline_seconds
        self._client = client or VikingSessionClient(options)
        self._lock = threading.Lock()
        self._stored: dict[str, None] = {}
        self._uncommitted_turns = 0
        self._last_commit: dict[str, Any] | None = None

    @property
    def last_commit(self) -> dict[str, Any] | None:
        """The server's answer to this sink's last successful commit (``archived``, the memory
        extraction's ``task_id`` to poll at ``GET /api/v1/tasks/{task_id}``…), if any."""
        return self._last_commit

    @property
    def client(self) -> VikingSessionClient:
        """The HTTP client of the session calls."""
        return self._client

    def record_turn(self, record: TurnRecord) -> SessionOutcome:
        """Store ``record`` once and commit by the policy; never raises."""
        with self._lock:
            if record.turn_id in self._stored:
                return SessionOutcome(session_id=self.session_id, duplicate=True)
        failure: VikingSessionError | None = None
        with audited("session.write", runtime="viking", conversation_id=self.session_id) as audit:
            try:
                written, pending, size = self._write(record)
            except VikingSessionError as error:
                audit.error_type = error.code  # the stable code, never the message
                failure = error
            else:
                audit.bytes = size
        if failure is not None:
            logger.warning("storing turn %s in session failed: %s", record.turn_id, failure.code)
            return SessionOutcome(session_id=self.session_id, error=str(failure))
        with self._lock:
            self._stored[record.turn_id] = None
            while len(self._stored) > _REMEMBERED_TURNS:
                del self._stored[next(iter(self._stored))]
            if written:
                self._uncommitted_turns += 1
            due = written and self.commit_policy.due(self._uncommitted_turns, pending)
        if not due:
            return SessionOutcome(
                session_id=self.session_id, written=written, duplicate=not written
            )
        try:
            answer = commit_session(self._client, self.session_id, seconds=self._deadline)
        except VikingSessionError as error:
            logger.warning(
                "committing session after turn %s failed: %s", record.turn_id, error.code
            )
            return SessionOutcome(session_id=self.session_id, written=True, commit_error=str(error))
        with self._lock:
            self._uncommitted_turns = 0
            self._last_commit = answer
        return SessionOutcome(session_id=self.session_id, written=True, committed=True)

    def _stored_on_server(self, turn_id: str, deadline: float) -> bool:
        messages = self._client.messages(self.session_id, seconds=deadline - time.monotonic())
        return any(message.get("turn_id") == turn_id for message in messages)

    def _write(self, record: TurnRecord) -> tuple[bool, int | None, int]:
        """``(written, pending_tokens, bytes)``: ``written`` is false when the turn was stored
        before this call (true when an earlier attempt of this call stored it); ``bytes`` the
        size of the messages' JSON (0 when nothing was written). Raises the last
        :class:`VikingSessionError` once the deadline passed."""
        deadline = time.monotonic() + self._deadline
        messages = session_messages(record)
        size = len(json.dumps({"messages": messages}).encode())
        sent = False  # whether a write of this call may have been carried out

        def attempt() -> tuple[bool, int | None, int]:
            nonlocal sent
            writing = False
            try:
                if self._stored_on_server(record.turn_id, deadline):
                    return sent, None, size if sent else 0
                writing = True
                result = self._client.add_messages(
                    self.session_id, messages, seconds=deadline - time.monotonic()
                )
            except VikingSessionError as error:
                sent = sent or (writing and error.uncertain)
                raise
            pending = result.get("pending_tokens")
            return True, pending if isinstance(pending, int) else None, size

        def worth_again(error: BaseException) -> bool:
            return isinstance(error, VikingSessionError) and (
                error.uncertain or error.code == SESSION_UNAVAILABLE
            )

        def log_again(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            code = error.code if isinstance(error, VikingSessionError) else "error"
            logger.info("storing turn %s: %s; trying again", record.turn_id, code)

        # The stored turn is read again before each write, so a write that landed although it
        # failed is not made twice.
        retrying = Retrying(
            retry=retry_if_exception(worth_again),
            stop=lambda _: time.monotonic() + _RETRY_PAUSE_SECONDS >= deadline,
            wait=wait_fixed(_RETRY_PAUSE_SECONDS),
            before_sleep=log_again,
            reraise=True,
        )
        return retrying(attempt)

    def close(self) -> None:
        """Nothing to release beyond the requests' own connections (kept for symmetry)."""

    def __enter__(self) -> VikingSessionSink:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
