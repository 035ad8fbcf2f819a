"""Benchmark of the audit trail and tracing: ``execute("true")`` with both on against both off.

Run from the repository root::

    .venv/bin/python tests/benchmarks/bench_audit.py [--runs 500] [--dir DIR]

One local runtime in a conversation workspace runs ``execute("true")`` ``--runs`` times with
auditing on and as many times with it off
(:func:`skillruntime.core.observability.audit.set_audit_enabled`), interleaved (the order of the
pair alternates), and the medians are compared:

1. "on" is audit events to a ``skillruntime_audit_event`` hook (counting them) plus tracing through
   the OpenTelemetry SDK (a tracer provider with a batch span processor whose exporter drops the
   spans) — target ratio <= 1.05;
2. the same plus a ``logging.FileHandler`` writing every ``skillruntime.audit`` JSON line to a
   file (the application's handler: its cost is logging's, reported for scale).

The floor of (1) is measured in the same interleaving: auditing off and one bare span of the
same provider around each ``execute`` (``tracer.start_span`` with the attributes of an execute
event, then ``end``): what the OpenTelemetry SDK alone costs per command, with none of our code.
(1) over this floor is our own overhead (the audit event, the hook call, making the span current).

The per-event cost is measured apart, with no command: one ``audited`` block with the consumers
of (1) and the same bare SDK span, ``--micro-runs`` times each, interleaved in batches and timed
with the thread's CPU clock (other processes on a loaded machine do not count); then one block
with the consumers of (2) attached.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench_common import Row, default_scratch
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.observability import audit
from skillruntime.core.observability.audit import AUDIT_LOGGER_NAME, AuditEvent, audited
from skillruntime.core.plugins.registry import hookimpl, register_plugin
from skillruntime.local import LocalSkillRuntime


class _DroppingExporter(SpanExporter):
    """Accepts every batch and keeps nothing (a collector's cost is not ours to measure)."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


class _Counter:
    def __init__(self) -> None:
        self.events = 0

    @hookimpl
    def skillruntime_audit_event(self, event: AuditEvent) -> None:
        self.events += 1


ATTRIBUTES = {
    "skillruntime.runtime": "local",
    "gen_ai.conversation.id": "bench-audit",
    "process.exit.code": 0,
    "skillruntime.timed_out": False,
}
"""The attributes of an execute span of :func:`bench_execute` (the bare span sets the same)."""

MODES = ("off", "on", "floor")


def bench_execute(runs: int, work: Path) -> dict[str, float]:
    """Median seconds of ``execute("true")`` per mode, interleaved (the order rotates):
    ``off`` (auditing off), ``on`` (auditing on) and ``floor`` (auditing off, one bare SDK span
    with the same attributes around the call)."""
    samples: dict[str, list[float]] = {mode: [] for mode in MODES}
    request = SkillExecutionRequest(command="true")
    tracer = trace.get_tracer("bench-audit-floor")
    with LocalSkillRuntime(conversation_id="bench-audit", conversations_root=work) as runtime:

        def once(mode: str) -> float:
            audit.set_audit_enabled(mode == "on")
            start = time.perf_counter()
            if mode == "floor":
                span = tracer.start_span("skillruntime.execute", attributes=ATTRIBUTES)
                result = runtime.execute(request)
                span.end()
            else:
                result = runtime.execute(request)
            elapsed = time.perf_counter() - start
            if result.exit_code != 0:
                raise SystemExit(f"execute failed: {result}")
            return elapsed

        for _ in range(20):  # warm up every path
            for mode in MODES:
                once(mode)
        for run in range(runs):
            shift = run % len(MODES)
            for mode in MODES[shift:] + MODES[:shift]:
                samples[mode].append(once(mode))
    audit.set_audit_enabled(True)
    medians = {mode: statistics.median(values) for mode, values in samples.items()}
    for mode in ("on", "floor"):  # robust to a load that drifts: the ratio within each round
        rounds = zip(samples[mode], samples["off"], strict=True)
        medians[f"{mode}_paired"] = statistics.median(value / off for value, off in rounds)
    return medians


def bench_event(runs: int) -> tuple[float, float]:
    """Median seconds of an empty ``audited`` block with auditing off and on."""
    samples: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(runs):
        for enabled in (False, True):
            audit.set_audit_enabled(enabled)
            start = time.perf_counter()
            with audited("execute", runtime="local", conversation_id="bench") as record:
                record.exit_code = 0
            samples[enabled].append(time.perf_counter() - start)
    audit.set_audit_enabled(True)
    return statistics.median(samples[False]), statistics.median(samples[True])


def bench_block_cpu(runs: int) -> dict[str, float]:
    """Median thread-CPU seconds of one audited execute block (``ours``), of one bare SDK span
    with the same attributes (``sdk``) and of the block with auditing off (``off``)."""
    tracer = trace.get_tracer("bench-audit-floor")

    def ours() -> None:
        with audited("execute", runtime="local", conversation_id="bench-audit") as record:
            record.exit_code = 0
            record.timed_out = False

    def sdk() -> None:
        tracer.start_span("skillruntime.execute", attributes=ATTRIBUTES).end()

    def off() -> None:
        audit.set_audit_enabled(False)
        try:
            ours()
        finally:
            audit.set_audit_enabled(True)

    functions = {"ours": ours, "sdk": sdk, "off": off}
    samples: dict[str, list[float]] = {name: [] for name in functions}
    batch = 50
    for _ in range(max(1, runs // batch)):
        for name, function in functions.items():
            start = time.thread_time()
            for _ in range(batch):
                function()
            samples[name].append((time.thread_time() - start) / batch)
    return {name: statistics.median(values) for name, values in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500, help="execute runs per mode")
    parser.add_argument("--micro-runs", type=int, default=20000, help="empty audited blocks")
    parser.add_argument("--dir", default=default_scratch(), help="scratch directory")
    parser.add_argument("--rows-json", help="also write the medians to this JSON file")
    args = parser.parse_args(argv)

    exporter = _DroppingExporter()
    provider = TracerProvider()
    processor = BatchSpanProcessor(exporter)
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    counter = _Counter()
    register_plugin(counter, name="bench-audit-counter")

    with tempfile.TemporaryDirectory(prefix="bench-audit-", dir=args.dir) as scratch:
        base = Path(scratch)
        execute = bench_execute(args.runs, base / "conversations")
        off, on, floor = execute["off"], execute["on"], execute["floor"]
        block = bench_block_cpu(args.micro_runs)
        handler = logging.FileHandler(base / "audit.jsonl")
        handler.setFormatter(logging.Formatter("%(message)s"))
        audit_log = logging.getLogger(AUDIT_LOGGER_NAME)
        audit_log.addHandler(handler)
        audit_log.setLevel(logging.INFO)
        audit_log.propagate = False
        try:
            logged = bench_execute(args.runs, base / "conversations-logged")
            log_off, log_on = logged["off"], logged["on"]
            event_off, event_on = bench_event(args.micro_runs)
            processor.force_flush()
            lines = sum(1 for _ in (base / "audit.jsonl").open())
        finally:
            audit_log.removeHandler(handler)
            handler.close()
    provider.shutdown()

    ratio = on / off
    print(f"[1] execute('true'), local runtime, median of {args.runs} interleaved runs each")
    print("    events to a hook + spans through the OpenTelemetry SDK (batch processor)")
    print(f"    audit + tracing off : {off * 1e3:8.3f} ms")
    print(f"    audit + tracing on  : {on * 1e3:8.3f} ms")
    print(f"    ratio on/off        : {ratio:8.3f}   (target <= 1.05)")
    print(f"    floor: off + one bare SDK span, same attributes: {floor * 1e3:8.3f} ms")
    print(f"    floor ratio         : {floor / off:8.3f}   (the SDK's own share)")
    print(
        f"    median of the per-round ratios: on/off {execute['on_paired']:.3f}, "
        f"floor/off {execute['floor_paired']:.3f}"
    )
    print("[1c] one audited block vs one bare SDK span, thread CPU time")
    print(f"    audited block (hook + SDK): {block['ours'] * 1e6:7.2f} us")
    print(f"    bare SDK span, same attrs : {block['sdk'] * 1e6:7.2f} us")
    print(f"    ours = difference         : {(block['ours'] - block['sdk']) * 1e6:7.2f} us")
    print(f"    block with auditing off   : {block['off'] * 1e6:7.2f} us")
    print("[1b] the same with a FileHandler writing the audit log's JSON lines")
    print(f"    off: {log_off * 1e3:.3f} ms   on: {log_on * 1e3:.3f} ms")
    print(f"    ratio on/off        : {log_on / log_off:8.3f}")
    print(f"[2] one audited block (consumers of 1b), median of {args.micro_runs} runs each")
    print(f"    off: {event_off * 1e6:7.2f} us   on: {event_on * 1e6:7.2f} us")
    print(f"    events to the hook: {counter.events}, log lines: {lines}, spans: {exporter.spans}")
    verdict = "met" if ratio <= 1.05 else "missed"
    print(f"    target ratio <= 1.05 for [1]: {verdict}")
    if args.rows_json:
        medians = {"off": off, "on": on, "floor": floor, "log_off": log_off, "log_on": log_on}
        medians.update(on_paired=execute["on_paired"], floor_paired=execute["floor_paired"])
        medians.update(event_off=event_off, event_on=event_on)
        medians.update(block_ours=block["ours"], block_sdk=block["sdk"], block_off=block["off"])
        Path(args.rows_json).write_text(json.dumps(medians), encoding="utf-8")
    return 0


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``).

    Measured in a child process: the benchmark installs a global tracer provider and a hook
    plugin, which must not outlive it in the caller (the test suite runs this in-process).
    """
    runs, micro = (10, 200) if quick else (500, 20000)
    with tempfile.TemporaryDirectory(prefix="bench-audit-rows-") as scratch:
        target = Path(scratch) / "rows.json"
        command = [sys.executable, __file__, "--runs", str(runs), "--micro-runs", str(micro)]
        subprocess.run(
            [*command, "--rows-json", str(target)],
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=1800,
        )
        medians = json.loads(target.read_text(encoding="utf-8"))
    return [
        Row(
            "execute('true'), audit + OTel SDK tracing",
            medians["on"],
            medians["off"],
            target=1.05,
            note="audit and tracing off",
        ),
        Row(
            "execute('true'), one bare OTel SDK span (floor)",
            medians["floor"],
            medians["off"],
            note="audit and tracing off; the SDK's own cost",
        ),
        Row(
            "one audited block, thread CPU",
            medians["block_ours"],
            medians["block_sdk"],
            note="one bare SDK span with the same attributes",
        ),
        Row(
            "execute('true'), plus a file log handler",
            medians["log_on"],
            medians["log_off"],
            note="audit and tracing off",
        ),
        Row(
            "one audited block",
            medians["event_on"],
            medians["event_off"],
            note="auditing off",
        ),
    ]


if __name__ == "__main__":
    sys.exit(main())
