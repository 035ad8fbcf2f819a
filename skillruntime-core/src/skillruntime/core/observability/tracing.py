"""OpenTelemetry spans of audited operations; a no-op when ``opentelemetry-api`` is absent.

Install ``skillruntime-core[otel]`` to get the API. The spans go to whatever tracer provider the
application configures (``opentelemetry.trace.set_tracer_provider``); with the API alone, or with
no provider set, they are non-recording and cost next to nothing. This module never configures a
provider or an exporter itself.

Span names are ``skillruntime.<kind>`` (``skillruntime.execute``, ``skillruntime.file.read``…,
see :data:`skillruntime.core.observability.audit.EVENT_KINDS`). Attributes follow the OpenTelemetry
semantic conventions where one exists (``process.exit.code``, ``error.type``,
``gen_ai.conversation.id``); the rest are under the ``skillruntime.`` prefix
(:data:`SPAN_ATTRIBUTES`). A failed operation sets the span status to ``ERROR`` with the exception's
type name as description; the exception message and traceback are never recorded, since they may
quote command output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .._version import __version__


class SpanFields(Protocol):
    """What :func:`annotate_span` reads: the fields of an
    :class:`~skillruntime.core.observability.audit.AuditEvent` (or of the recorder that builds
    one)."""

    @property
    def runtime(self) -> str | None: ...
    @property
    def conversation_id(self) -> str | None: ...
    @property
    def skill_name(self) -> str | None: ...
    @property
    def skill_digest(self) -> str | None: ...
    @property
    def skill_revision(self) -> str | None: ...
    @property
    def sandbox_id(self) -> str | None: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def timed_out(self) -> bool | None: ...
    @property
    def bytes(self) -> int | None: ...
    @property
    def error_type(self) -> str | None: ...
    @property
    def snapshot_id(self) -> str | None: ...
    @property
    def entries(self) -> int | None: ...
    @property
    def objects(self) -> int | None: ...
    @property
    def requests(self) -> int | None: ...


__all__ = [
    "SPAN_ATTRIBUTES",
    "SPAN_PREFIX",
    "TRACER_NAME",
    "SpanFields",
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
    "snapshot_id": "skillruntime.snapshot.id",
    "entries": "skillruntime.snapshot.entries",
    "objects": "skillruntime.snapshot.objects",
    "requests": "skillruntime.requests",
}
"""Audit event field -> span attribute name (fields that are ``None`` are not set). The kind is
the span name and the outcome the span status (``ERROR`` for ``error``), so neither is repeated."""


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


_SPAN_NAMES: dict[str, str] = {}


def span_name(kind: str) -> str:
    """The span name of an audit event kind."""
    name = _SPAN_NAMES.get(kind)
    if name is None:
        name = _SPAN_NAMES.setdefault(kind, SPAN_PREFIX + kind)
    return name


def enter_span(kind: str) -> tuple[Any, Any] | None:
    """Start a span and make it current: ``(span, context token)``, or ``None`` when no tracer
    provider is set (or the API is absent). Pass the pair to :func:`exit_span`.

    The span is made current (not only started) so that what runs inside the operation nests
    under it: a ``bootstrap`` under its ``prepare``, the ``execute`` of a bootstrap command
    under the ``bootstrap``, a ``sandbox.create`` under the command that needed it, and the
    spans of an instrumented HTTP client under the operation that sent the request. Attaching
    the context is a context-variable set, a small part of the span's cost (the SDK's
    ``start_span`` and ``end`` are most of it: see ``tests/benchmarks/bench_audit.py``).
    """
    if _trace is None:
        return None
    cached_provider, tracer = _cached
    if _trace.get_tracer_provider() is not cached_provider:
        tracer = _current_tracer()
    if tracer is None:
        return None
    name = _SPAN_NAMES.get(kind) or span_name(kind)
    span = tracer.start_span(name, record_exception=False, set_status_on_exception=False)
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


def annotate_span(span: Any, fields: SpanFields) -> None:
    """Copy the event ``fields`` onto ``span`` (those that are not ``None``, with the names of
    :data:`SPAN_ATTRIBUTES`) and set its status to ``ERROR`` when ``error_type`` is set; a no-op
    for ``None`` or a span that is not recording.

    One ``set_attributes`` call with a dict built field by field: the SDK takes its lock once
    per attribute either way, so the dict is the only part this module controls.
    """
    if span is None or not span.is_recording():
        return
    attributes: dict[str, Any] = {}
    if fields.runtime is not None:
        attributes["skillruntime.runtime"] = fields.runtime
    if fields.conversation_id is not None:
        attributes["gen_ai.conversation.id"] = fields.conversation_id
    if fields.skill_name is not None:
        attributes["skillruntime.skill.name"] = fields.skill_name
    if fields.skill_digest is not None:
        attributes["skillruntime.skill.digest"] = fields.skill_digest
    if fields.skill_revision is not None:
        attributes["skillruntime.skill.revision"] = fields.skill_revision
    if fields.sandbox_id is not None:
        attributes["skillruntime.sandbox.id"] = fields.sandbox_id
    if fields.exit_code is not None:
        attributes["process.exit.code"] = fields.exit_code
    if fields.timed_out is not None:
        attributes["skillruntime.timed_out"] = fields.timed_out
    if fields.bytes is not None:
        attributes["skillruntime.bytes"] = fields.bytes
    if fields.snapshot_id is not None:
        attributes["skillruntime.snapshot.id"] = fields.snapshot_id
    if fields.entries is not None:
        attributes["skillruntime.snapshot.entries"] = fields.entries
    if fields.objects is not None:
        attributes["skillruntime.snapshot.objects"] = fields.objects
    if fields.requests is not None:
        attributes["skillruntime.requests"] = fields.requests
    error_type = fields.error_type
    if error_type is not None:
        attributes["error.type"] = error_type
    span.set_attributes(attributes)
    if error_type is not None and _trace is not None:
        span.set_status(_trace.Status(_trace.StatusCode.ERROR, error_type))
