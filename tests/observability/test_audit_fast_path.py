"""The cheap paths of the audit trail keep its contract: spans carry every field when nobody
receives events, hook registrations and a new plugin manager are seen at once although the hook
caller is cached, and the span attributes are exactly those of
:data:`~skillruntime.core.observability.tracing.SPAN_ATTRIBUTES`."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from audit_capture import install_tracer_provider
from hypothesis import given, settings
from hypothesis import strategies as st

from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.observability import audit, tracing
from skillruntime.core.observability.audit import AUDIT_LOGGER_NAME, AuditEvent, audited
from skillruntime.core.plugins import registry as plugins
from skillruntime.core.plugins.registry import hookimpl, register_plugin, unregister_plugin
from skillruntime.local import LocalSkillRuntime


class _Collector:
    def __init__(self) -> None:
        self.events: list[AuditEvent] = []

    @hookimpl
    def skillruntime_audit_event(self, event: AuditEvent) -> None:
        self.events.append(event)


@pytest.fixture
def quiet_audit_log() -> object:
    """No handler of the audit logger at INFO (the logger is set to WARNING meanwhile)."""
    audit_log = logging.getLogger(AUDIT_LOGGER_NAME)
    previous = audit_log.level
    audit_log.setLevel(logging.WARNING)
    try:
        yield audit_log
    finally:
        audit_log.setLevel(previous)


def test_a_span_gets_every_field_when_nobody_receives_events(
    tmp_path: Path, quiet_audit_log: object
) -> None:
    exporter = install_tracer_provider()
    exporter.clear()
    assert not audit._hook_implementations()  # nobody listens: no event is built
    previous = audit.set_audit_enabled(True)
    try:
        with LocalSkillRuntime(conversation_id="quiet", conversations_root=tmp_path) as runtime:
            runtime.execute(SkillExecutionRequest(command="exit 5"))
            with pytest.raises(FileNotFoundError):
                runtime.get_file_system().read_text("missing.txt")
    finally:
        audit.set_audit_enabled(previous)
    spans = {span.name: span for span in exporter.get_finished_spans()}
    execute = spans["skillruntime.execute"].attributes
    assert execute is not None
    assert dict(execute) == {
        "skillruntime.runtime": "local",
        "gen_ai.conversation.id": "quiet",
        "process.exit.code": 5,
        "skillruntime.timed_out": False,
    }
    read = spans["skillruntime.file.read"]
    assert read.attributes is not None
    assert read.attributes["error.type"] == "RuntimeFileNotFoundError"
    assert read.status.description == "RuntimeFileNotFoundError"


def test_hook_registrations_and_a_new_manager_are_seen_at_once(tmp_path: Path) -> None:
    first = _Collector()
    with audited("execute", runtime="t"):
        pass  # fills the hook cache with the current manager
    name = register_plugin(first, name="fast-path-first")
    try:
        with audited("execute", runtime="t"):
            pass
        assert [e.runtime for e in first.events] == ["t"]
    finally:
        unregister_plugin(name)
    with audited("execute", runtime="t"):
        pass
    assert len(first.events) == 1  # unregistered: no more events

    old = plugins.get_plugin_manager()
    plugins.reset_plugin_manager()
    try:
        second = _Collector()
        register_plugin(second, name="fast-path-second")
        assert plugins.get_plugin_manager() is not old
        with audited("file.stat", runtime="t"):
            pass
        assert [e.kind for e in second.events] == ["file.stat"]
    finally:
        plugins.reset_plugin_manager()


FIELD_VALUES = {
    "runtime": st.text(min_size=1, max_size=8),
    "conversation_id": st.text(min_size=1, max_size=8),
    "skill_name": st.text(min_size=1, max_size=8),
    "skill_digest": st.text(min_size=1, max_size=8),
    "skill_revision": st.text(min_size=1, max_size=8),
    "sandbox_id": st.text(min_size=1, max_size=8),
    "exit_code": st.integers(-1, 255),
    "timed_out": st.booleans(),
    "bytes": st.integers(0, 2**40),
    "error_type": st.sampled_from(["OSError", "TimeoutError"]),
}


@settings(max_examples=60, deadline=None)
@given(st.fixed_dictionaries({}, optional=FIELD_VALUES))
def test_span_attributes_are_exactly_the_documented_mapping(values: dict[str, object]) -> None:
    exporter = install_tracer_provider()
    exporter.clear()
    tracer = tracing._current_tracer()
    assert tracer is not None
    span = tracer.start_span("skillruntime.test")
    event = AuditEvent(
        kind="execute",
        timestamp=0.0,
        duration_seconds=0.0,
        outcome="error" if "error_type" in values else "ok",
        **values,  # type: ignore[arg-type]
    )
    tracing.annotate_span(span, event)
    span.end()
    finished = exporter.get_finished_spans()[-1]
    expected = {tracing.SPAN_ATTRIBUTES[field]: value for field, value in values.items()}
    assert dict(finished.attributes or {}) == expected
    errored = finished.status.description if "error_type" in values else None
    assert errored == values.get("error_type")
