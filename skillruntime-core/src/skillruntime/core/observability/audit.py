"""The audit trail: one structured event per operation, to a pluggy hook, ``logging`` and a span.

Every prepare, bootstrap command, execute, file operation of a runtime's file system, sandbox
create/attach/replace/destroy, artifact or Viking materialization, and OpenViking session write
or commit of an agent turn's record produces one :class:`AuditEvent` when it ends (successfully
or not). The event goes to

- every implementation of the ``skillruntime_audit_event(event)`` hook
  (:class:`~skillruntime.core.plugins.registry.SkillRuntimeHookSpecs`); a hook that raises is logged
  and skipped, never breaking the operation;
- the logger :data:`AUDIT_LOGGER_NAME` (``skillruntime.audit``) at ``INFO``: the message is the
  event as one line of JSON and the record carries the event's fields as ``record.audit``;
- an OpenTelemetry span (:mod:`skillruntime.core.observability.tracing`) when ``opentelemetry-api``
  is installed.

An event never holds an environment value, a key or token, a file's content, a command or its
output, or an exception message: only the fields of :class:`AuditEvent`. Paths are left out too
(they come from the model and may carry anything).

Auditing is on by default; :func:`set_audit_enabled` (or ``SKILLRUNTIME_AUDIT=off`` in the
environment at import) turns events and spans off process-wide.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator
from contextlib import asynccontextmanager
from functools import wraps
from types import TracebackType
from typing import Any, Literal, NamedTuple, ParamSpec, Protocol, TypeVar

from . import hooks, tracing

__all__ = [
    "AUDIT_LOGGER_NAME",
    "EVENT_KINDS",
    "AuditEvent",
    "AuditRecorder",
    "audit_async_stream",
    "audit_enabled",
    "audit_stream",
    "audited",
    "audited_async",
    "audited_call",
    "emit",
    "set_audit_enabled",
]

AUDIT_LOGGER_NAME = "skillruntime.audit"
"""Name of the logger every audit event is written to (level ``INFO``)."""

audit_logger = logging.getLogger(AUDIT_LOGGER_NAME)
logger = logging.getLogger(__name__)

EVENT_KINDS: tuple[str, ...] = (
    "prepare",
    "bootstrap",
    "execute",
    "file.read",
    "file.write",
    "file.stat",
    "file.list",
    "file.delete",
    "file.mkdir",
    "file.upload",
    "sandbox.create",
    "sandbox.attach",
    "sandbox.replace",
    "sandbox.destroy",
    "artifact.materialize",
    "viking.materialize",
    "session.write",
    "session.commit",
    "workspace.snapshot",
    "workspace.restore",
    "pool.claim",
)
"""Every event kind, in the order the documentation lists them."""

Outcome = Literal["ok", "error"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


class _CommandResult(Protocol):
    @property
    def exit_code(self) -> int: ...
    @property
    def timed_out(self) -> bool: ...


ResultT = TypeVar("ResultT", bound=_CommandResult)

_FALSE = {"0", "false", "no", "off"}
_enabled = os.environ.get("SKILLRUNTIME_AUDIT", "on").strip().lower() not in _FALSE


def audit_enabled() -> bool:
    """True when operations emit audit events and spans (the default)."""
    return _enabled


def set_audit_enabled(enabled: bool) -> bool:
    """Turn audit events and spans on or off process-wide; returns the previous setting."""
    global _enabled
    previous, _enabled = _enabled, bool(enabled)
    return previous


class AuditEvent(NamedTuple):
    """One finished operation (immutable).

    ``kind`` is one of :data:`EVENT_KINDS`; ``runtime`` the runtime name (``local``,
    ``opensandbox``, ``aio``…) or the store (``zip``, ``objectstore``, ``viking``) for a
    materialization; ``conversation_id`` the conversation, when there is one; ``skill_name``,
    ``skill_digest`` (content digest, ``sha256:…`` or hex) and ``skill_revision`` (an artifact
    version or a Viking revision) name the skill an operation concerns; ``sandbox_id`` the sandbox
    of a remote runtime. ``timestamp`` is the start (Unix seconds), ``duration_seconds`` the
    monotonic duration. ``exit_code`` and ``timed_out`` are set for ``execute`` and ``bootstrap``;
    ``bytes`` for reads and writes (content moved). ``outcome`` is ``ok`` when the operation
    returned (a command that exits non-zero is ``ok``: its exit code says the rest) and ``error``
    when it raised, with ``error_type`` the exception's class name (never its message). The
    session kinds (``session.write``, ``session.commit``) never raise into the turn: a failed one
    is ``error`` with ``error_type`` the failure's stable code (``SESSION_UNAVAILABLE``…), and
    ``conversation_id`` is the session's id. The workspace kinds (``workspace.snapshot``,
    ``workspace.restore``) set ``snapshot_id``, ``entries`` (the manifest's paths), ``objects``
    (objects uploaded, or files restored), ``bytes`` (their content) and ``requests`` (calls
    made to the runtime).
    """

    kind: str
    timestamp: float
    duration_seconds: float
    outcome: Outcome
    runtime: str | None = None
    conversation_id: str | None = None
    skill_name: str | None = None
    skill_digest: str | None = None
    skill_revision: str | None = None
    sandbox_id: str | None = None
    exit_code: int | None = None
    timed_out: bool | None = None
    bytes: int | None = None
    error_type: str | None = None
    snapshot_id: str | None = None
    entries: int | None = None
    objects: int | None = None
    requests: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The event's fields as a plain dict (JSON types only)."""
        return dict(zip(self._fields, self, strict=True))

    def to_json(self) -> str:
        """The event as one line of JSON, ``None`` fields left out."""
        return _json_line(self.as_dict())


def _json_line(values: dict[str, Any]) -> str:
    return json.dumps(
        {key: value for key, value in values.items() if value is not None}, separators=(",", ":")
    )


class AuditRecorder:
    """What an audited operation fills in while it runs; :func:`audited` returns one, a context
    manager whose ``with`` block is the operation.

    Set ``exit_code``, ``timed_out``, ``bytes``, ``sandbox_id`` or the skill fields when they
    become known (``sandbox_source``, a callable, is asked for the sandbox id at the end);
    :meth:`result` copies a command result's exit code and timeout flag.
    """

    __slots__ = (
        "_span",
        "_started",
        "_timestamp",
        "bytes",
        "conversation_id",
        "entries",
        "error_type",
        "exit_code",
        "kind",
        "objects",
        "requests",
        "runtime",
        "sandbox_id",
        "sandbox_source",
        "skill_digest",
        "skill_name",
        "skill_revision",
        "snapshot_id",
        "timed_out",
    )

    def __init__(
        self,
        kind: str,
        *,
        runtime: str | None = None,
        conversation_id: str | None = None,
        skill_name: str | None = None,
        skill_digest: str | None = None,
        skill_revision: str | None = None,
        sandbox_id: str | None = None,
        sandbox_source: Callable[[], str | None] | None = None,
    ) -> None:
        self.kind = kind
        self.runtime = runtime
        self.conversation_id = conversation_id
        self.skill_name = skill_name
        self.skill_digest = skill_digest
        self.skill_revision = skill_revision
        self.sandbox_id = sandbox_id
        self.sandbox_source = sandbox_source
        self.exit_code: int | None = None
        self.timed_out: bool | None = None
        self.bytes: int | None = None
        self.error_type: str | None = None
        self.snapshot_id: str | None = None
        self.entries: int | None = None
        self.objects: int | None = None
        self.requests: int | None = None
        self._span: Any = None
        self._started: float | None = None
        self._timestamp = 0.0

    def __enter__(self) -> AuditRecorder:
        if _enabled:
            self._span = tracing.enter_span(self.kind)
            self._timestamp = time.time()  # a C call: cheaper than the SDK span's start_time
            self._started = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        started = self._started
        if started is None:
            return
        duration = time.perf_counter() - started
        self._started = None
        if exc is not None:
            self.error_type = type(exc).__name__
        span = self._span
        try:
            if self.sandbox_source is not None and self.sandbox_id is None:
                self.resolve_sandbox()
            if span is not None:
                tracing.annotate_span(span[0], self)
            _finish_event(self, self._timestamp, duration)
        finally:
            if span is not None:
                tracing.exit_span(span)

    def result(self, result: ResultT) -> ResultT:
        """Record ``result.exit_code`` and ``result.timed_out``; returns ``result``."""
        self.exit_code = int(result.exit_code)
        self.timed_out = bool(result.timed_out)
        return result

    def failed(self, error: BaseException) -> None:
        """Record that the operation raised ``error`` (its type name only)."""
        self.error_type = type(error).__name__

    def resolve_sandbox(self) -> None:
        """Ask ``sandbox_source`` for the sandbox id when none is set yet (an exception of the
        source leaves the id unset: a closed client must not turn the event into an error)."""
        if self.sandbox_id is None and self.sandbox_source is not None:
            try:
                self.sandbox_id = self.sandbox_source()
            except Exception:  # a closed client must not turn the event into an error
                self.sandbox_id = None

    def event(self, timestamp: float, duration: float) -> AuditEvent:
        """The finished event (``sandbox_source``, when set and no id was, is asked now)."""
        if self.sandbox_source is not None and self.sandbox_id is None:
            self.resolve_sandbox()
        return AuditEvent._make(  # positional: the order of AuditEvent's fields
            (
                self.kind,
                timestamp,
                duration,
                "error" if self.error_type is not None else "ok",
                self.runtime,
                self.conversation_id,
                self.skill_name,
                self.skill_digest,
                self.skill_revision,
                self.sandbox_id,
                self.exit_code,
                self.timed_out,
                self.bytes,
                self.error_type,
                self.snapshot_id,
                self.entries,
                self.objects,
                self.requests,
            )
        )


def _hook_implementations() -> list[Any]:
    """The current implementations of the audit hook, from the source handed in to
    :func:`~skillruntime.core.observability.hooks.set_hook_source` (none without)."""
    return hooks.hook_implementations()


def _finish_event(recorder: AuditRecorder, timestamp: float, duration: float) -> None:
    """Build and send the recorder's event, unless nobody would receive it (no handler of the
    audit logger at ``INFO``, no hook implementation): then no event is built at all."""
    logged = audit_logger.isEnabledFor(logging.INFO)
    try:
        implementations = _hook_implementations()
    except Exception as error:  # the trail must never break the operation it describes
        logger.warning("audit hooks unavailable: %s", type(error).__name__)
        implementations = []
    if logged or implementations:
        _deliver(recorder.event(timestamp, duration), logged, implementations)


def emit(event: AuditEvent) -> None:
    """Send ``event`` to the audit logger and every ``skillruntime_audit_event`` hook.

    The JSON line is encoded only when the logger is enabled for ``INFO``; implementations are
    called directly (no pluggy call loop), each isolated from the others' errors.
    """
    try:
        implementations = _hook_implementations()
    except Exception as error:  # the trail must never break the operation it describes
        logger.warning("audit hooks unavailable: %s", type(error).__name__)
        implementations = []
    _deliver(event, audit_logger.isEnabledFor(logging.INFO), implementations)


def _deliver(event: AuditEvent, logged: bool, implementations: list[Any]) -> None:
    if logged:
        values = event.as_dict()
        audit_logger.info("%s", _json_line(values), extra={"audit": values})
    for impl in implementations:
        try:
            if impl.argnames:
                impl.function(event)
            else:
                impl.function()
        except Exception as error:
            logger.warning(
                "skillruntime_audit_event hook of plugin %s raised %s",
                impl.plugin_name,
                type(error).__name__,
            )


def _finish(recorder: AuditRecorder, span: Any, timestamp: float, started: float) -> None:
    duration = time.perf_counter() - started
    recorder.resolve_sandbox()
    tracing.annotate_span(span, recorder)
    _finish_event(recorder, timestamp, duration)


def audited(kind: str, **context: Any) -> AuditRecorder:
    """Audit a ``with`` block as one ``kind`` operation (keyword arguments: the fields of
    :class:`AuditRecorder`): ``with audited("execute", runtime="local") as record: ...``.

    The block's span is current inside it, so nested operations are children; it works around
    ``await`` too (the span follows the task's context). The exception of a failing block
    propagates unchanged.
    """
    return AuditRecorder(kind, **context)


@asynccontextmanager
async def audited_async(kind: str, **context: Any) -> AsyncIterator[AuditRecorder]:
    """The ``async with`` form of :func:`audited`."""
    with audited(kind, **context) as recorder:
        yield recorder


class _StreamAudit:
    """The recorder and span of one audited stream: started when the stream is asked for,
    finished exactly once (:meth:`end`) when it fails to open, ends, fails or is closed."""

    def __init__(self, kind: str, context: dict[str, Any]) -> None:
        self.recorder = AuditRecorder(kind, **context)
        self.span = tracing.start_span(kind)
        self.timestamp = time.time()
        self.started = time.perf_counter()

    def open(self, open_stream: Callable[[], S]) -> S:
        """``open_stream()``; its error is recorded, the audit ended and the error raised."""
        try:
            return open_stream()
        except BaseException as error:
            self.recorder.failed(error)
            self.end()
            raise

    def end(self) -> None:
        _finish(self.recorder, self.span, self.timestamp, self.started)
        if self.span is not None:
            self.span.end()


def audit_stream(
    kind: str, open_stream: Callable[[], Generator[bytes, None, None]], **context: Any
) -> Generator[bytes, None, None]:
    """The stream ``open_stream()`` returns, audited as one ``kind`` operation.

    ``open_stream`` is called at once, so its errors (a refused path) raise here and are audited.
    The event counts the bytes yielded and is emitted when the stream ends, fails or is closed;
    its span is not made current (the consumer runs between chunks).
    """
    if not _enabled:
        return open_stream()
    audit = _StreamAudit(kind, context)
    return _counted(audit.open(open_stream), audit)


def _counted(
    stream: Generator[bytes, None, None], audit: _StreamAudit
) -> Generator[bytes, None, None]:
    recorder = audit.recorder
    recorder.bytes = 0
    try:
        for chunk in stream:
            recorder.bytes += len(chunk)
            yield chunk
    except GeneratorExit:
        stream.close()
        raise
    except BaseException as error:
        recorder.failed(error)
        raise
    finally:
        audit.end()


def audit_async_stream(
    kind: str, open_stream: Callable[[], AsyncGenerator[bytes, None]], **context: Any
) -> AsyncGenerator[bytes, None]:
    """The async twin of :func:`audit_stream` (the same rules; only the iteration differs)."""
    if not _enabled:
        return open_stream()
    audit = _StreamAudit(kind, context)
    return _counted_async(audit.open(open_stream), audit)


async def _counted_async(
    stream: AsyncGenerator[bytes, None], audit: _StreamAudit
) -> AsyncGenerator[bytes, None]:
    recorder = audit.recorder
    recorder.bytes = 0
    try:
        async for chunk in stream:
            recorder.bytes += len(chunk)
            yield chunk
    except GeneratorExit:
        await stream.aclose()
        raise
    except BaseException as error:
        recorder.failed(error)
        raise
    finally:
        audit.end()


def audited_call(
    kind: str, context: Callable[..., dict[str, Any]]
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator: audit every call of a function as one ``kind`` operation.

    ``context(*args, **kwargs)`` returns the event fields known from the arguments (for example
    the artifact's name and version); it must not raise.
    """

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if not _enabled:
                return function(*args, **kwargs)
            with audited(kind, **context(*args, **kwargs)):
                return function(*args, **kwargs)

        return wrapper

    return decorate
