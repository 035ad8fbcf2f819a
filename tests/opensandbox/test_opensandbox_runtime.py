"""Behaviour of the OpenSandbox runtime against the protocol double, through the real SDK."""

from __future__ import annotations

import contextlib
import logging
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opensandbox.exceptions import SandboxConnectionException
from opensandbox.sync.adapters.filesystem_adapter import FilesystemAdapterSync

import skillruntime.opensandbox.command_plans as command_plans
from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import (
    ConversationRecord,
    ConversationStoreError,
    InMemoryConversationStore,
)
from skillruntime.core.errors import RuntimeClosedError, RuntimeFileNotFoundError, SkillRuntimeError
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from skillruntime.opensandbox import (
    OpenSandboxExecutionError,
    OpenSandboxSkillRuntime,
    SandboxUnavailableError,
)

RuntimeFactory = Callable[..., OpenSandboxSkillRuntime]


@pytest.fixture
def store() -> InMemoryConversationStore:
    return InMemoryConversationStore()


@pytest.fixture
def make(
    opensandbox_double: OpenSandboxDouble, store: InMemoryConversationStore
) -> Iterator[RuntimeFactory]:
    """Builds runtimes on the double; closes them and destroys their sandboxes afterwards."""
    made: list[OpenSandboxSkillRuntime] = []

    def factory(**options: Any) -> OpenSandboxSkillRuntime:
        options.setdefault("domain", opensandbox_double.domain)
        options.setdefault("api_key", opensandbox_double.api_key)
        if options.get("conversation_id") is not None:
            options.setdefault("conversation_store", store)
        runtime = OpenSandboxSkillRuntime(**options)
        made.append(runtime)
        return runtime

    yield factory
    for runtime in made:
        with contextlib.suppress(Exception):
            runtime.close()
        if runtime.workspace is not None:
            with contextlib.suppress(Exception):
                runtime.destroy_conversation_sandbox()


def _conversation() -> str:
    return f"os-{uuid.uuid4().hex[:12]}"


def _run(runtime: OpenSandboxSkillRuntime, command: str, **fields: Any) -> SkillExecutionResult:
    return runtime.execute(SkillExecutionRequest(command=command, **fields))


def _skill(root: Path, name: str, files: int = 3) -> Skill:
    directory = root / name
    (directory / "data").mkdir(parents=True)
    (directory / "SKILL.md").write_text(f"---\nname: {name}\ndescription: d\n---\nbody\n")
    for index in range(files):
        (directory / "data" / f"f{index:04d}.txt").write_text(f"{name} file {index}\n")
    script = directory / "run.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(0o755)
    return Skill(name=name, description="d", base_path=str(directory))


def _prepare(runtime: OpenSandboxSkillRuntime, *skills: Skill) -> list[Skill]:
    return runtime.prepare(SkillPreparationRequest(skills=skills))


def _record(
    store: InMemoryConversationStore, runtime: OpenSandboxSkillRuntime
) -> ConversationRecord | None:
    key = runtime.conversation_record_key
    assert key is not None
    return store.get(key)


def _live(double: OpenSandboxDouble) -> set[str]:
    return set(double.stats()["live_sandbox_ids"])


# ------------------------------------------------------------------- lifecycle


def test_sandbox_is_created_lazily_and_killed_at_close_without_a_conversation(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble
) -> None:
    before = opensandbox_double.stats()["creates"]
    runtime = make()
    assert opensandbox_double.stats()["creates"] == before
    assert _run(runtime, "pwd").stdout == "/workspace/skills\n"
    sandbox_id = runtime.sandbox_id
    assert sandbox_id in _live(opensandbox_double)
    runtime.close()
    assert sandbox_id not in _live(opensandbox_double)
    with pytest.raises(RuntimeClosedError):
        _run(runtime, "true")


def test_close_keeps_a_conversation_sandbox_and_destroy_ends_it(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble, store: InMemoryConversationStore
) -> None:
    conversation = _conversation()
    first = make(conversation_id=conversation)
    first.get_file_system().write_text("kept.txt", "kept")
    sandbox_id = first.sandbox_id
    first.close()
    assert sandbox_id in _live(opensandbox_double)
    second = make(conversation_id=conversation)
    assert second.get_file_system().read_text("kept.txt") == "kept"
    assert second.sandbox_id == sandbox_id
    second.destroy_conversation_sandbox()
    assert sandbox_id not in _live(opensandbox_double)
    assert _record(store, second) is None


def test_destroy_without_record_or_sandbox_creates_nothing(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble, store: InMemoryConversationStore
) -> None:
    before = opensandbox_double.stats()["creates"]
    runtime = make(conversation_id=_conversation())
    runtime.destroy_conversation_sandbox()
    assert opensandbox_double.stats()["creates"] == before
    assert _record(store, runtime) is None


def test_metadata_values_longer_than_63_characters_are_clipped(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble
) -> None:
    runtime = make(metadata={"team": "t" * 100})
    assert _run(runtime, "true").ok
    (entry,) = [s for s in opensandbox_double.sandboxes() if s["id"] == runtime.sandbox_id]
    assert entry["metadata"]["team"] == "t" * 63


def test_a_sandbox_killed_behind_the_back_is_replaced_and_the_record_follows(
    make: RuntimeFactory,
    opensandbox_double: OpenSandboxDouble,
    store: InMemoryConversationStore,
    tmp_path: Path,
) -> None:
    runtime = make(conversation_id=_conversation())
    (prepared,) = _prepare(runtime, _skill(tmp_path, "phoenix"))
    old = runtime.sandbox_id
    assert old is not None
    assert opensandbox_double.kill_behind_back(old)
    result = _run(runtime, "pwd")
    assert result.stdout == runtime.default_working_directory + "\n"
    new = runtime.sandbox_id
    assert new is not None
    assert new != old
    record = _record(store, runtime)
    assert record is not None
    assert record.sandbox_id == new
    assert record.prepared_skills == {}
    (again,) = _prepare(runtime, _skill(tmp_path / "again", "phoenix"))
    assert again.base_path == prepared.base_path
    assert runtime.get_file_system().read_text(f"{again.base_path}/SKILL.md").startswith("---")
    final = _record(store, runtime)
    assert final is not None
    assert len(final.prepared_skills) == 1


def test_a_stored_sandbox_that_vanished_is_replaced_by_a_new_runtime(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble, store: InMemoryConversationStore
) -> None:
    conversation = _conversation()
    first = make(conversation_id=conversation)
    assert _run(first, "true").ok
    old = first.sandbox_id
    first.close()
    assert old is not None
    opensandbox_double.kill_behind_back(old)
    second = make(conversation_id=conversation)
    assert _run(second, "true").ok
    assert second.sandbox_id != old
    record = _record(store, second)
    assert record is not None
    assert record.sandbox_id == second.sandbox_id


def test_a_transient_failure_creating_the_workspace_on_attach_is_retried(
    make: RuntimeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = FilesystemAdapterSync.create_directories
    failures: list[str] = []

    def flaky(self: FilesystemAdapterSync, entries: list[Any]) -> None:
        if not failures:
            failures.append(entries[0].path)
            raise SandboxConnectionException("Server disconnected without sending a response")
        real(self, entries)

    monkeypatch.setattr(FilesystemAdapterSync, "create_directories", flaky)
    runtime = make(conversation_id=_conversation())
    fs = runtime.get_file_system()
    fs.write_text("new.txt", "new")
    assert failures == [runtime.default_working_directory]
    assert fs.read_text("new.txt") == "new"


class _LostAcknowledgementStore(InMemoryConversationStore):
    """Stores the first new record but reports that write as failed: ``"false"`` answers
    ``False``, ``"raise"`` raises, like a commit whose acknowledgement was lost."""

    def __init__(self, outcome: str) -> None:
        super().__init__()
        self.outcome = outcome
        self.misreported = 0

    def create(self, record: ConversationRecord) -> bool:
        inserted = super().create(record)
        if not inserted or self.misreported:
            return inserted
        self.misreported += 1
        if self.outcome == "raise":
            raise ConversationStoreError("the connection was lost while committing")
        return False


def test_a_record_insert_reported_as_lost_that_landed_keeps_its_sandbox(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble
) -> None:
    store = _LostAcknowledgementStore("false")
    before = opensandbox_double.stats()
    runtime = make(conversation_id=_conversation(), conversation_store=store)
    assert _run(runtime, "true").ok
    after = opensandbox_double.stats()
    assert store.misreported == 1
    assert after["creates"] - before["creates"] == 1
    assert after["deletes"] == before["deletes"], "the recorded sandbox was killed"
    record = _record(store, runtime)
    assert record is not None
    assert record.sandbox_id == runtime.sandbox_id
    assert runtime.sandbox_id in _live(opensandbox_double)


def test_a_failed_record_insert_that_landed_does_not_kill_the_recorded_sandbox(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble
) -> None:
    store = _LostAcknowledgementStore("raise")
    conversation = _conversation()
    before = opensandbox_double.stats()
    first = make(conversation_id=conversation, conversation_store=store)
    with pytest.raises(ConversationStoreError, match="lost while committing"):
        _run(first, "true")
    record = _record(store, first)
    assert record is not None
    assert record.sandbox_id in _live(opensandbox_double), "the recorded sandbox was killed"
    assert opensandbox_double.stats()["deletes"] == before["deletes"]
    second = make(conversation_id=conversation, conversation_store=store)
    assert _run(second, "true").ok
    assert second.sandbox_id == record.sandbox_id
    assert opensandbox_double.stats()["creates"] - before["creates"] == 1


def test_a_failed_record_insert_that_did_not_land_kills_the_candidate(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble
) -> None:
    class FailingStore(InMemoryConversationStore):
        def create(self, record: ConversationRecord) -> bool:
            raise ConversationStoreError("the database is unreachable")

    store = FailingStore()
    before = opensandbox_double.stats()
    runtime = make(conversation_id=_conversation(), conversation_store=store)
    with pytest.raises(ConversationStoreError, match="unreachable"):
        _run(runtime, "true")
    after = opensandbox_double.stats()
    assert after["creates"] - before["creates"] == 1
    assert after["deletes"] - before["deletes"] == 1, "the unrecorded candidate was left running"
    assert _record(store, runtime) is None


def test_an_unreachable_stored_sandbox_raises_and_leaves_the_record(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble, store: InMemoryConversationStore
) -> None:
    conversation = _conversation()
    first = make(conversation_id=conversation)
    assert _run(first, "true").ok
    first.close()
    record = _record(store, first)
    creates = opensandbox_double.stats()["creates"]
    opensandbox_double.set_fault("status", status=502, count=10_000, plane="execd")
    try:
        second = make(conversation_id=conversation, ready_timeout_seconds=1.0, retry_seconds=1.0)
        with pytest.raises(SandboxUnavailableError, match="cannot be reached"):
            _run(second, "true")
    finally:
        opensandbox_double.clear_faults()
    assert _record(store, first) == record
    assert opensandbox_double.stats()["creates"] == creates


# ---------------------------------------------------------------------- execute


def test_stdout_is_rebuilt_exactly_with_blank_lines_and_no_final_newline(
    make: RuntimeFactory,
) -> None:
    runtime = make()
    result = _run(runtime, "printf 'a\\n\\n\\nb\\n\\n'; printf 'tail'")
    assert result.stdout == "a\n\n\nb\n\ntail"
    assert _run(runtime, "printf '\\n'").stdout == "\n"
    assert _run(runtime, "true").stdout == ""


def test_a_lost_stream_after_the_terminal_event_still_yields_the_result(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble
) -> None:
    runtime = make()
    assert _run(runtime, "true").ok
    opensandbox_double.set_fault("drop_after_terminal", count=1)
    result = _run(runtime, "printf 'done\\n'; exit 4")
    assert result.exit_code == 4
    assert result.stdout == "done\n"
    assert not result.timed_out


def test_a_stream_without_terminal_event_still_yields_the_reported_result(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble
) -> None:
    """The wrapper's report precedes execd's terminal event and carries the whole result."""
    runtime = make()
    assert _run(runtime, "true").ok
    opensandbox_double.set_fault("no_terminal", count=1)
    result = _run(runtime, "printf 'x\\n'; exit 5")
    assert result.exit_code == 5
    assert result.stdout == "x\n"


def test_a_stream_lost_before_the_report_is_an_error_not_exit_zero(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble
) -> None:
    runtime = make()
    assert _run(runtime, "true").ok
    commands = opensandbox_double.stats()["commands"]
    opensandbox_double.set_fault("drop_mid_stream", count=1, after_events=0)
    with pytest.raises(OpenSandboxExecutionError, match="was not retried"):
        _run(runtime, "printf x >> once.txt; sleep 0.5")
    assert opensandbox_double.stats()["commands"] == commands + 1, "the command was retried"
    # Killed with the stream, maybe before it wrote: never twice.
    assert _run(runtime, "cat once.txt 2>/dev/null").stdout in ("", "x")


def test_server_timeout_reports_timed_out(make: RuntimeFactory) -> None:
    result = _run(make(), "printf 'before\\n'; sleep 30", timeout_seconds=1.0)
    assert result.timed_out
    assert result.exit_code == -1
    assert result.stdout == "before\n"


def test_the_outer_deadline_interrupts_a_command_the_server_does_not_stop(
    make: RuntimeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = command_plans.RunCommandOpts  # type: ignore[attr-defined]
    real_wrapper = command_plans.build_wrapper  # type: ignore[attr-defined]

    def lenient(**fields: Any) -> Any:
        fields["timeout"] = fields["timeout"] * 1000
        return real(**fields)

    def no_watchdog(**fields: Any) -> str:
        fields["timeout"] = fields["timeout"] * 1000
        return str(real_wrapper(**fields))

    monkeypatch.setattr(command_plans, "RunCommandOpts", lenient)
    monkeypatch.setattr(command_plans, "build_wrapper", no_watchdog)
    runtime = make(deadline_grace_seconds=0.5)
    result = _run(runtime, "printf 'started\\n'; sleep 60", timeout_seconds=1.0)
    assert result.timed_out
    assert result.exit_code == -1
    assert "started" in result.stdout


def test_200_mib_of_output_keeps_memory_bounded(make: RuntimeFactory) -> None:
    runtime = make()
    assert _run(runtime, "true").ok
    printed = 200 * 1024 * 1024
    tracemalloc.start()
    try:
        result = _run(
            runtime,
            f"yes \"$(head -c 8000 /dev/zero | tr '\\0' a)\" | head -c {printed}",
            max_output_bytes=64 * 1024,
            timeout_seconds=300,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.ok
    assert result.stdout_truncated
    assert peak < 16 * 1024 * 1024, f"{peak} bytes held for 200 MiB of output"
    assert str(printed - 64 * 1024)[:3] in result.stdout


def test_uid_and_gid_are_sent_with_commands(make: RuntimeFactory) -> None:
    runtime = make(uid=0, gid=0)
    assert _run(runtime, "id -u").stdout == "0\n"


# ------------------------------------------------------------------------ files


def test_transient_failures_of_idempotent_calls_are_retried(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble
) -> None:
    runtime = make(conversation_id=_conversation())
    fs = runtime.get_file_system()
    fs.write_text("x.txt", "content")
    opensandbox_double.set_fault("status", status=503, count=2, plane="execd")
    assert fs.stat("x.txt") is not None
    opensandbox_double.set_fault("status", status=429, count=2, plane="execd")
    assert fs.read_text("x.txt") == "content"
    opensandbox_double.clear_faults()


def test_prepare_costs_a_constant_number_of_requests_per_batch(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    runtime = make(conversation_id=_conversation())
    assert _run(runtime, "true").ok
    opensandbox_double.reset_stats()
    (prepared,) = _prepare(runtime, _skill(tmp_path, "wide", files=450))
    stats = opensandbox_double.stats()
    assert stats["uploaded_files"] == 452
    assert stats["upload_requests"] == 3
    assert sum(stats["requests"].values()) <= 6
    fs = runtime.get_file_system()
    assert fs.read_text(f"{prepared.base_path}/data/f0449.txt") == "wide file 449\n"
    assert _run(runtime, f"{prepared.base_path}/run.sh").stdout == "ran\n"


def test_a_resumed_runtime_uploads_nothing(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    conversation = _conversation()
    skills = [_skill(tmp_path, "one"), _skill(tmp_path, "two")]
    first = make(conversation_id=conversation)
    prepared = _prepare(first, *skills)
    first.close()
    opensandbox_double.reset_stats()
    second = make(conversation_id=conversation)
    resumed = _prepare(second, *skills)
    assert [s.base_path for s in resumed] == [s.base_path for s in prepared]
    stats = opensandbox_double.stats()
    assert stats["upload_requests"] == 0
    assert stats["creates"] == 0


def test_commands_run_as_the_configured_non_root_user(make: RuntimeFactory) -> None:
    runtime = make(conversation_id=_conversation(), uid=65534, gid=65534)
    assert _run(runtime, "id -u; id -g").stdout == "65534\n65534\n"
    fs = runtime.get_file_system()
    fs.write_text("by-api/file.txt", "from the file API")
    assert _run(runtime, "printf more >> by-api/file.txt && touch made-by-command").ok
    assert fs.read_text("by-api/file.txt") == "from the file APImore"
    assert _run(runtime, "stat -c %u by-api/file.txt .").stdout == "65534\n65534\n"


def test_a_paused_stored_sandbox_is_resumed(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble, store: InMemoryConversationStore
) -> None:
    from opensandbox.config.connection_sync import ConnectionConfigSync
    from opensandbox.sync.sandbox import SandboxSync

    conversation = _conversation()
    first = make(conversation_id=conversation)
    first.get_file_system().write_text("before-pause.txt", "kept")
    sandbox_id = first.sandbox_id
    assert sandbox_id is not None
    first.close()
    config = ConnectionConfigSync(
        domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
    )
    handle = SandboxSync.connect(sandbox_id, connection_config=config)
    try:
        handle.pause()
    finally:
        handle.close()
    second = make(conversation_id=conversation, ready_timeout_seconds=1.0, retry_seconds=1.0)
    assert second.get_file_system().read_text("before-pause.txt") == "kept"
    assert second.sandbox_id == sandbox_id
    record = _record(store, second)
    assert record is not None
    assert record.sandbox_id == sandbox_id


def test_the_api_key_never_appears_in_logs_or_errors(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    runtime = make(conversation_id=_conversation())
    fs = runtime.get_file_system()
    with pytest.raises(RuntimeFileNotFoundError) as missing:
        fs.read_text("missing.txt")
    with pytest.raises(SkillRuntimeError) as refused:
        make(api_key="wrong-key-0123456789", conversation_id=_conversation()).execute(
            SkillExecutionRequest(command="true")
        )
    texts = [caplog.text, str(missing.value), str(refused.value)]
    for secret in (opensandbox_double.api_key, "wrong-key-0123456789"):
        assert not any(secret in text for text in texts)


def test_a_private_sandbox_killed_behind_the_back_gets_its_skills_again(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    runtime = make()
    skill = _skill(tmp_path, "private")
    (prepared,) = _prepare(runtime, skill)
    old = runtime.sandbox_id
    assert old is not None
    opensandbox_double.kill_behind_back(old)
    assert _run(runtime, "true").ok
    assert runtime.sandbox_id != old
    (again,) = _prepare(runtime, skill)
    assert again.base_path == prepared.base_path
    assert _run(runtime, f"{again.base_path}/run.sh").stdout == "ran\n"
