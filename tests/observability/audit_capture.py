"""What the audit and tracing tests share: one in-memory span exporter for the process, and a
capture of every audit event (hook and logger) and span of one test (the ``capture`` fixture,
re-exported by this folder's ``conftest``)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from skillruntime.core.observability import audit
from skillruntime.core.observability.audit import AUDIT_LOGGER_NAME, AuditEvent
from skillruntime.core.plugins.registry import hookimpl, registered_plugin

_EXPORTER = InMemorySpanExporter()
_PROVIDER_LOCK = threading.Lock()
_PROVIDER_SET = False


def install_tracer_provider() -> InMemorySpanExporter:
    """Make an SDK provider exporting to one in-memory exporter the global one (once: the
    OpenTelemetry API allows a single global provider per process)."""
    global _PROVIDER_SET  # noqa: PLW0603 - one provider per process
    with _PROVIDER_LOCK:
        if not _PROVIDER_SET:
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
            trace.set_tracer_provider(provider)
            _PROVIDER_SET = True
    return _EXPORTER


class _ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class _Collector:
    def __init__(self) -> None:
        self.events: list[AuditEvent] = []

    @hookimpl
    def skillruntime_audit_event(self, event: AuditEvent) -> None:
        self.events.append(event)


@dataclass
class AuditCapture:
    """What one test emitted: hook events, audit log records and finished spans."""

    collector: _Collector
    handler: _ListHandler
    exporter: InMemorySpanExporter
    extra: list[Any] = field(default_factory=list)

    @property
    def events(self) -> list[AuditEvent]:
        return list(self.collector.events)

    @property
    def records(self) -> list[logging.LogRecord]:
        return list(self.handler.records)

    def spans(self) -> list[ReadableSpan]:
        spans = self.exporter.get_finished_spans()
        return [span for span in spans if span.name.startswith("skillruntime.")]

    def kinds(self) -> set[str]:
        return {event.kind for event in self.events}

    def of(self, kind: str) -> list[AuditEvent]:
        return [event for event in self.events if event.kind == kind]

    def text(self) -> str:
        """Everything emitted, as text: events, log messages and extras, and full span JSON
        (name, attributes, status, events, resource)."""
        parts = [repr(event) for event in self.events]
        parts += [json.dumps(event.as_dict()) for event in self.events]
        for record in self.records:
            parts.append(record.getMessage())
            parts.append(repr(getattr(record, "audit", None)))
            parts.append(repr(record.args))
        parts += [span.to_json() for span in self.exporter.get_finished_spans()]
        return "\n".join(parts)


@pytest.fixture
def capture() -> Iterator[AuditCapture]:
    """Record every audit event and span of the test (auditing switched on)."""
    exporter = install_tracer_provider()
    exporter.clear()
    collector = _Collector()
    handler = _ListHandler()
    audit_log = logging.getLogger(AUDIT_LOGGER_NAME)
    previous_level = audit_log.level
    audit_log.addHandler(handler)
    audit_log.setLevel(logging.INFO)
    previous = audit.set_audit_enabled(True)
    try:
        with registered_plugin(collector, name="audit-test-collector"):
            yield AuditCapture(collector, handler, exporter)
    finally:
        audit.set_audit_enabled(previous)
        audit_log.removeHandler(handler)
        audit_log.setLevel(previous_level)
