"""Every documented event kind is emitted; spans nest, carry semantic-convention attributes and
error status; hooks that fail are isolated; the switch turns everything off; and the code works
without ``opentelemetry-api``."""

from __future__ import annotations

import io
import json
import re
import secrets
import subprocess
import sys
import textwrap
import uuid
import zipfile
from pathlib import Path

import pytest
from audit_capture import AuditCapture
from opentelemetry.trace import StatusCode

from doubles.aio import AioDouble
from doubles.opensandbox import OpenSandboxDouble
from doubles.viking import VikingDouble
from doubles.viking.samples import DEMO_ROOT, demo_files
from doubles.viking_sessions import VikingSessionsDouble
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.core.artifacts import SkillArtifact, SkillPackage, ZipSkillArtifactStore
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.durability import WorkspaceSnapshots
from skillruntime.core.errors import WorkspaceEscapeError
from skillruntime.core.models import (
    BootstrapCommand,
    Skill,
    SkillExecutionRequest,
    SkillPreparationRequest,
    SkillRuntimeConfig,
)
from skillruntime.core.observability import audit, tracing
from skillruntime.core.observability.audit import EVENT_KINDS, AuditEvent
from skillruntime.core.plugins.registry import hookimpl, registered_plugin
from skillruntime.core.snapshots import LocalSnapshotStore
from skillruntime.core.tools.turn_record import TurnRecord
from skillruntime.local import LocalSkillRuntime
from skillruntime.opensandbox import OpenSandboxSkillRuntime
from skillruntime.viking import (
    CommitPolicy,
    VikingSessionSink,
    VikingSkillStore,
    VikingStoreOptions,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def _skill(root: Path, name: str = "kinds") -> Skill:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "SKILL.md").write_text(f"---\nname: {name}\ndescription: d\n---\nbody\n")
    return Skill(name=name, description="d", base_path=str(directory), frontmatter={"name": name})


def _zip(name: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("SKILL.md", f"---\nname: {name}\ndescription: d\n---\nbody\n")
    return buffer.getvalue()


def _local_operations(tmp: Path) -> None:
    config = SkillRuntimeConfig(bootstrap=[BootstrapCommand(command="true")])
    with LocalSkillRuntime(conversation_id="kinds", conversations_root=tmp / "conv") as runtime:
        skill = _skill(tmp / "skills")
        runtime.prepare(SkillPreparationRequest(skills=[skill], configs={skill.name: config}))
        runtime.execute(SkillExecutionRequest(command="exit 3"))
        fs = runtime.get_file_system()
        fs.make_directory("d")
        fs.write_text("d/a.txt", "x")
        fs.read_text("d/a.txt")
        fs.stat("d/a.txt")
        fs.list_directory("d")
        source = tmp / "upload.txt"
        source.write_text("y")
        fs.upload_files([(source, "d/b.txt", False)])
        fs.delete("d")
        snapshots = WorkspaceSnapshots(LocalSnapshotStore(tmp / "snapshots"))
        snapshots.snapshot(runtime, conversation_id="kinds")
        snapshots.restore(runtime, conversation_id="kinds")


def _opensandbox_lifecycle(double: OpenSandboxDouble) -> None:
    store = InMemoryConversationStore()
    conversation = f"kinds-{uuid.uuid4().hex[:10]}"

    def runtime() -> OpenSandboxSkillRuntime:
        return OpenSandboxSkillRuntime(
            domain=double.domain,
            api_key=double.api_key,
            conversation_id=conversation,
            conversation_store=store,
        )

    with runtime() as first:
        first.execute(SkillExecutionRequest(command="true"))  # sandbox.create
        created = first.sandbox_id
    assert created is not None
    with runtime() as second:
        second.execute(SkillExecutionRequest(command="true"))  # sandbox.attach
    assert double.kill_behind_back(created)
    with runtime() as third:
        third.execute(SkillExecutionRequest(command="true"))  # sandbox.replace
        assert third.sandbox_id != created
        third.destroy_conversation_sandbox()  # sandbox.destroy


class _EmptyPool:
    """A warm pool with no member: every claim misses."""

    def claim(self, owner: str) -> None:
        return None

    def recorded(self, claimed: object) -> None:
        raise AssertionError("nothing was claimed")

    give_back = recorded


def _pool_claim(tmp_path: Path) -> None:
    """``pool.claim``: a new conversation's first sandbox asked of a (here empty) warm pool."""
    import importlib.util

    from skillruntime.core.conversations.binding import ConversationBinding
    from skillruntime.core.conversations.sandboxes import ConversationSandboxes

    example = Path(__file__).resolve().parents[2] / "examples" / "directory_driver.py"
    spec = importlib.util.spec_from_file_location("directory_driver_kinds", example)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    binding = ConversationBinding(
        InMemoryConversationStore(),
        service_key="kinds",
        conversation_id="pooled",
        runtime_name="directory",
        workspace_root="/w",
    )
    sandboxes = ConversationSandboxes(
        module.DirectoryDriver(tmp_path / "pool-sandboxes"),
        binding=binding,
        tags={},
        pool=_EmptyPool(),  # type: ignore[arg-type]
    )
    assert not sandboxes.acquire().pooled


def test_every_documented_kind_is_emitted(tmp_path: Path, capture: AuditCapture) -> None:
    rows = r"^\| `([a-z.]+)` \| `skillruntime\.\1` \|"
    documented = re.findall(rows, DOCS.read_text(), flags=re.MULTILINE)
    assert documented == list(EVENT_KINDS)

    _local_operations(tmp_path)
    _pool_claim(tmp_path)
    api_key = "kindskey" + secrets.token_hex(8)
    with OpenSandboxDouble(api_key=api_key) as double:
        _opensandbox_lifecycle(double)
    with (
        AioDouble(bash_api=True) as aio,
        AioSandboxSkillRuntime(base_url=aio.url, token=aio.token) as runtime,
    ):
        runtime.get_file_system().list_directory(runtime.default_working_directory)
    store = ZipSkillArtifactStore(tmp_path / "store")
    installed = store.install(
        SkillArtifact(name="zipped", version="7"), SkillPackage.from_bytes(_zip("zipped"))
    )
    store.materialize(installed)
    with VikingDouble() as viking:
        viking.add_skill(DEMO_ROOT, demo_files(), description="A demo skill")
        with VikingSkillStore(server_url=viking.url, cache_dir=tmp_path / "cache") as vstore:
            vstore.materialize(DEMO_ROOT)
    with VikingSessionsDouble() as sessions:
        options = VikingStoreOptions(server_url=sessions.url)
        with VikingSessionSink(options, "kinds-chat", commit=CommitPolicy.every_turn()) as sink:
            assert sink.record_turn(TurnRecord("kinds-turn", "q", "a")).committed

    assert capture.kinds() == set(EVENT_KINDS)
    attach = [e for e in capture.of("sandbox.attach") if e.runtime == "aio"]
    assert attach
    assert attach[0].outcome == "ok"
    sandbox = capture.of("sandbox.replace")
    assert sandbox[0].sandbox_id is not None
    assert sandbox[0].conversation_id is not None
    assert {e.runtime for e in capture.of("sandbox.create")} == {"opensandbox"}
    failed = [e for e in capture.of("execute") if e.exit_code == 3]
    assert failed[0].outcome == "ok"  # a non-zero exit is a result
    materialized = capture.of("artifact.materialize")[0]
    assert (materialized.skill_name, materialized.skill_revision) == ("zipped", "7")
    assert materialized.skill_digest == installed.digest
    written = capture.of("session.write")[0]
    assert (written.outcome, written.conversation_id, written.runtime) == (
        "ok",
        "kinds-chat",
        "viking",
    )
    assert written.bytes
    assert capture.of("session.commit")[0].outcome == "ok"
    viking_event = capture.of("viking.materialize")[0]
    assert viking_event.skill_revision
    assert viking_event.outcome == "ok"
    assert api_key not in capture.text()
    assert aio.token is None or aio.token not in capture.text()


def test_spans_nest_and_use_semantic_convention_names(
    tmp_path: Path, capture: AuditCapture
) -> None:
    config = SkillRuntimeConfig(bootstrap=[BootstrapCommand(command="true")])
    with LocalSkillRuntime(conversation_id="spans", conversations_root=tmp_path / "c") as runtime:
        skill = _skill(tmp_path / "skills")
        runtime.prepare(SkillPreparationRequest(skills=[skill], configs={skill.name: config}))
        runtime.execute(SkillExecutionRequest(command="exit 4"))
    spans = {span.name: span for span in capture.spans()}
    prepare, bootstrap = spans["skillruntime.prepare"], spans["skillruntime.bootstrap"]
    executes = [span for span in capture.spans() if span.name == "skillruntime.execute"]
    assert bootstrap.parent is not None
    assert bootstrap.parent.span_id == prepare.context.span_id
    nested = [span for span in executes if span.parent is not None]
    assert nested[0].parent.span_id == bootstrap.context.span_id  # type: ignore[union-attr]
    alone = next(span for span in executes if span.parent is None)
    assert alone.attributes is not None
    assert alone.attributes["process.exit.code"] == 4
    assert alone.attributes["gen_ai.conversation.id"] == "spans"
    assert alone.attributes["skillruntime.runtime"] == "local"
    assert alone.attributes["skillruntime.timed_out"] is False
    assert prepare.attributes is not None
    assert str(prepare.attributes["skillruntime.skill.digest"])


def test_a_failure_is_an_error_event_and_span_without_its_message(
    tmp_path: Path, capture: AuditCapture
) -> None:
    with LocalSkillRuntime(conversation_id="err", conversations_root=tmp_path / "c") as runtime:
        fs = runtime.get_file_system()
        with pytest.raises(WorkspaceEscapeError):
            fs.read_text("../outside-secret-path")
        with pytest.raises(WorkspaceEscapeError):
            list(fs.read_stream("../other-secret-path"))
    events = capture.of("file.read")
    assert [(e.outcome, e.error_type) for e in events] == [("error", "WorkspaceEscapeError")] * 2
    spans = [span for span in capture.spans() if span.name == "skillruntime.file.read"]
    assert len(spans) == 2
    for span in spans:
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "WorkspaceEscapeError"
        assert span.attributes is not None
        assert span.attributes["error.type"] == "WorkspaceEscapeError"
        assert not span.events  # no exception event, no message
    assert "secret-path" not in capture.text()


def test_a_stream_event_counts_its_bytes_when_it_ends(
    tmp_path: Path, capture: AuditCapture
) -> None:
    with LocalSkillRuntime(work_root=tmp_path / "w") as runtime:
        fs = runtime.get_file_system()
        fs.write_bytes("big.bin", b"z" * 200_000)
        assert sum(len(chunk) for chunk in fs.read_stream("big.bin", 4096)) == 200_000
        stream = fs.read_stream("big.bin", 4096)
        next(stream)
        stream.close()  # closed early: the event counts what was read
    reads = capture.of("file.read")
    assert [e.bytes for e in reads] == [200_000, 4096]
    assert capture.of("file.write")[0].bytes == 200_000


def test_a_failing_hook_never_breaks_the_operation(
    tmp_path: Path, capture: AuditCapture, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        @hookimpl
        def skillruntime_audit_event(self, event: AuditEvent) -> None:
            raise RuntimeError("hook failure " + event.kind)

    with (
        registered_plugin(Broken(), name="broken-audit-hook"),
        LocalSkillRuntime(work_root=tmp_path / "w") as runtime,
    ):
        result = runtime.execute(SkillExecutionRequest(command="echo fine"))
    assert result.stdout == "fine\n"
    assert capture.of("execute")  # the other hook still got the event
    assert any("broken-audit-hook raised RuntimeError" in r.getMessage() for r in caplog.records)
    assert not any("hook failure" in r.getMessage() for r in caplog.records)


def test_disabled_auditing_emits_nothing(tmp_path: Path, capture: AuditCapture) -> None:
    previous = audit.set_audit_enabled(False)
    try:
        assert not audit.audit_enabled()
        with LocalSkillRuntime(work_root=tmp_path / "w") as runtime:
            runtime.execute(SkillExecutionRequest(command="true"))
            fs = runtime.get_file_system()
            fs.write_text("a.txt", "a")
            assert b"".join(fs.read_stream("a.txt")) == b"a"
    finally:
        audit.set_audit_enabled(previous)
    assert capture.events == []
    assert capture.records == []
    assert capture.spans() == []


def test_the_audit_log_line_is_json_of_the_event(tmp_path: Path, capture: AuditCapture) -> None:
    with LocalSkillRuntime(work_root=tmp_path / "w") as runtime:
        runtime.execute(SkillExecutionRequest(command="true"))
    record = capture.records[-1]
    line = json.loads(record.getMessage())
    assert line["kind"] == "execute"
    assert line["exit_code"] == 0
    assert record.audit == capture.events[-1].as_dict()
    assert "sandbox_id" not in line  # None fields are left out of the line
    assert tracing.tracing_available()


NO_OTEL = textwrap.dedent(
    """
    import importlib.abc, json, sys, tempfile

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, Block())
    from skillruntime.core.observability import tracing
    from skillruntime.core.plugins.registry import hookimpl, register_plugin
    from skillruntime.core.models import SkillExecutionRequest
    from skillruntime.local import LocalSkillRuntime

    seen = []

    class Collect:
        @hookimpl
        def skillruntime_audit_event(self, event):
            seen.append(event.kind)

    register_plugin(Collect(), name="collect")
    with tempfile.TemporaryDirectory() as work:
        with LocalSkillRuntime(work_root=work) as runtime:
            result = runtime.execute(SkillExecutionRequest(command="echo ok"))
            fs = runtime.get_file_system()
            fs.write_text("a", "b")
            data = b"".join(fs.read_stream("a"))
    print(json.dumps({
        "available": tracing.tracing_available(),
        "loaded": any(m.startswith("opentelemetry") for m in sys.modules),
        "stdout": result.stdout, "data": data.decode(), "kinds": seen,
    }))
    """
)


def test_without_opentelemetry_events_still_flow_and_spans_are_skipped() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", NO_OTEL], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["available"] is False
    assert report["loaded"] is False
    assert report["stdout"] == "ok\n"
    assert report["data"] == "b"
    assert report["kinds"] == ["execute", "file.write", "file.read"]
