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
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from .audit import AuditEvent

__all__ = [
    "SPAN_ATTRIBUTES",
    "SPAN_PREFIX",
    "TRACER_NAME",
    "annotate_span",
    "enter_span",
    "exit_span",
    "span_name",
    "start_span",
    "tracing_available",
]

TRACER_NAME = "skillruntime"
"""The instrumentation scope name of every span."""

SPAN_PREFIX = "skillruntime."
"""Prefix of every span name: ``skillruntime.<event kind>``."""

SPAN_ATTRIBUTES: Mapping[str, str] = {
    "runtime": "skillruntime.runtime",
    "conversation_id": "gen_ai.conversation.id",
    "skill_name": "skillruntime.skill.name",
    "skill_digest": "skillruntime.skill.digest",
    "skill_revision": "skillruntime.skill.revision",
    "sandbox_id": "skillruntime.sandbox.id",
    "exit_code": "process.exit.code",
    "timed_out": "skillruntime.timed_out",
    "bytes": "skillruntime.bytes",
    "error_type": "error.type",
}
"""Audit event field -> span attribute name (fields that are ``None`` are not set). The kind is
the span name and the outcome the span status (``ERROR`` for ``error``), so neither is repeated."""

_ATTRIBUTE_ITEMS = tuple(SPAN_ATTRIBUTES.items())

try:  # the API is an optional extra: skillruntime-core[otel]
    from opentelemetry import context as _context
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - exercised by the no-otel test in a subprocess
    _trace = None  # type: ignore[assignment]
    _context = None  # type: ignore[assignment]

_cached: tuple[Any, Any] = (None, None)
"""(tracer provider, its tracer): rebuilt when the application sets another provider."""


def _current_tracer() -> Any:
    """The tracer of the global provider, or ``None`` while no real provider is set.

    Until the application sets a provider the API's proxy would hand out non-recording spans;
    skipping them saves the context switch of every operation.
    """
    global _cached  # noqa: PLW0603 - one cache per process
    provider = _trace.get_tracer_provider()
    cached_provider, tracer = _cached
    if provider is cached_provider:
        return tracer
    if isinstance(provider, _trace.ProxyTracerProvider | _trace.NoOpTracerProvider):
        tracer = None
    else:
        tracer = provider.get_tracer(TRACER_NAME, __version__)
    _cached = (provider, tracer)
    return tracer


def tracing_available() -> bool:
    """True when ``opentelemetry-api`` is importable (spans are created once the application
    sets a tracer provider)."""
    return _trace is not None


def span_name(kind: str) -> str:
    """The span name of an audit event kind."""
    return SPAN_PREFIX + kind


def enter_span(kind: str) -> tuple[Any, Any] | None:
    """Start a span and make it current: ``(span, context token)``, or ``None`` when no tracer
    provider is set (or the API is absent). Pass the pair to :func:`exit_span`."""
    tracer = _current_tracer() if _trace is not None else None
    if tracer is None:
        return None
    span = tracer.start_span(span_name(kind), record_exception=False, set_status_on_exception=False)
    return span, _context.attach(_trace.set_span_in_context(span))


def exit_span(entered: tuple[Any, Any]) -> None:
    """End the span of :func:`enter_span` and restore the previous context."""
    span, token = entered
    try:
        _context.detach(token)
    finally:
        span.end()


def start_span(kind: str) -> Any:
    """A new span that is *not* made current (for streams consumed elsewhere), or ``None``."""
    tracer = _current_tracer() if _trace is not None else None
    if tracer is None:
        return None
    return tracer.start_span(span_name(kind), record_exception=False)


def annotate_span(span: Any, event: AuditEvent) -> None:
    """Copy ``event``'s fields onto ``span`` and set its status (no-op for ``None``)."""
    if span is None or _trace is None or not span.is_recording():
        return
    attributes = {}
    for field, attribute in _ATTRIBUTE_ITEMS:
        value = getattr(event, field)
        if value is not None:
            attributes[attribute] = value
    span.set_attributes(attributes)
    if event.outcome == "error":
        span.set_status(_trace.Status(_trace.StatusCode.ERROR, event.error_type or "error"))
