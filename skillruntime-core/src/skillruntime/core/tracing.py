"""OpenTelemetry spans of audited operations; a no-op when ``opentelemetry-api`` is absent.

Install ``skillruntime-core[otel]`` to get the API. The spans go to whatever tracer provider the
application configures (``opentelemetry.trace.set_tracer_provider``); with the API alone, or with
no provider set, they are non-recording and cost next to nothing. This module never configures a
provider or an exporter itself.

Span names are ``skillruntime.<kind>`` (``skillruntime.execute``, ``skillruntime.file.read``…,
see :data:`skillruntime.core.audit.EVENT_KINDS`). Attributes follow the OpenTelemetry semantic
conventions where one exists (``process.exit.code``, ``error.type``, ``gen_ai.conversation.id``);
the rest are under the ``skillruntime.`` prefix (:data:`SPAN_ATTRIBUTES`). A failed operation sets
the span status to ``ERROR`` with the exception's type name as description; the exception message
and traceback are never recorded, since they may quote command output.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from .audit import AuditEvent

__all__ = [
    "SPAN_ATTRIBUTES",
    "SPAN_PREFIX",
    "TRACER_NAME",
    "annotate_span",
    "span_name",
    "start_current_span",
    "start_span",
    "tracing_available",
]

TRACER_NAME = "skillruntime"
"""The instrumentation scope name of every span."""

SPAN_PREFIX = "skillruntime."
"""Prefix of every span name: ``skillruntime.<event kind>``."""

SPAN_ATTRIBUTES: Mapping[str, str] = {
    "kind": "skillruntime.event.kind",
    "runtime": "skillruntime.runtime",
    "conversation_id": "gen_ai.conversation.id",
    "skill_name": "skillruntime.skill.name",
    "skill_digest": "skillruntime.skill.digest",
    "skill_revision": "skillruntime.skill.revision",
    "sandbox_id": "skillruntime.sandbox.id",
    "exit_code": "process.exit.code",
    "timed_out": "skillruntime.timed_out",
    "bytes": "skillruntime.bytes",
    "outcome": "skillruntime.outcome",
    "error_type": "error.type",
}
"""Audit event field -> span attribute name (fields that are ``None`` are not set)."""

try:  # the API is an optional extra: skillruntime-core[otel]
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - exercised by the no-otel test in a subprocess
    _trace = None  # type: ignore[assignment]

_tracer: Any = None
if _trace is not None:
    # A ProxyTracer: spans follow a provider the application sets later.
    _tracer = _trace.get_tracer(TRACER_NAME, __version__)


def tracing_available() -> bool:
    """True when ``opentelemetry-api`` is importable (spans are then created)."""
    return _tracer is not None


def span_name(kind: str) -> str:
    """The span name of an audit event kind."""
    return SPAN_PREFIX + kind


def start_current_span(kind: str) -> AbstractContextManager[Any] | None:
    """A context manager that makes a new span current, or ``None`` without the API.

    Exceptions are neither recorded nor turned into a status by OpenTelemetry itself:
    :func:`annotate_span` sets the status from the audit event, without the message.
    """
    if _tracer is None:
        return None
    cm: AbstractContextManager[Any] = _tracer.start_as_current_span(
        span_name(kind), record_exception=False, set_status_on_exception=False
    )
    return cm


def start_span(kind: str) -> Any:
    """A new span that is *not* made current (for streams consumed elsewhere), or ``None``."""
    if _tracer is None:
        return None
    return _tracer.start_span(span_name(kind), record_exception=False)


def annotate_span(span: Any, event: AuditEvent) -> None:
    """Copy ``event``'s fields onto ``span`` and set its status (no-op for ``None``)."""
    if span is None or _trace is None or not span.is_recording():
        return
    values = event.as_dict()
    for field, attribute in SPAN_ATTRIBUTES.items():
        value = values.get(field)
        if value is not None:
            span.set_attribute(attribute, value)
    if event.outcome == "error":
        span.set_status(_trace.Status(_trace.StatusCode.ERROR, event.error_type or "error"))
