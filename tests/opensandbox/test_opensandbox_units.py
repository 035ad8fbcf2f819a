"""Unit tests of the OpenSandbox runtime pieces that need no server."""

from __future__ import annotations

import socket

import pytest
from opensandbox.exceptions import (
    SandboxApiException,
    SandboxConnectionException,
    SandboxError,
    SandboxRateLimitException,
    SandboxReadyTimeoutException,
    SandboxTimeoutException,
)

from skillruntime.core.conversations import ConversationRecord, InMemoryConversationStore
from skillruntime.core.conversations.binding import ConversationBinding
from skillruntime.core.errors import (
    ExecutionTransportError,
    RuntimeFileNotFoundError,
    file_error_code,
)
from skillruntime.core.plugins.registry import available_runtimes, create_runtime
from skillruntime.opensandbox import OpenSandboxRuntimeOptions, OpenSandboxSkillRuntime
from skillruntime.opensandbox.errors import (
    OpenSandboxFileError,
    OpenSandboxFileNotFoundError,
    OpenSandboxIsADirectoryError,
    OpenSandboxNotADirectoryError,
    OpenSandboxPermissionError,
    execution_error,
    file_error,
    is_transient,
)
from skillruntime.opensandbox.files import IterableReader, entry_to_file_info
from skillruntime.opensandbox.retry import call_idempotent
from skillruntime.opensandbox.sandbox import clip_metadata


def test_iterable_reader_hands_out_sized_reads_and_counts() -> None:
    reader = IterableReader([b"abc", b"", b"defgh"])
    assert reader.read(2) == b"ab"
    assert reader.read(10) == b"c"
    assert reader.read(10) == b"defgh"
    assert reader.read(10) == b""
    assert reader.count == 8


def test_decimal_digit_modes_map_to_the_executable_flag() -> None:
    from datetime import UTC, datetime

    from opensandbox.models.filesystem import EntryInfo

    now = datetime.now(UTC)
    common = {"owner": "root", "group": "root", "modified_at": now, "created_at": now}
    script = EntryInfo(path="/w/a.sh", type="file", mode=755, size=3, **common)
    plain = EntryInfo(path="/w/a.txt", type="file", mode=644, size=3, **common)
    folder = EntryInfo(path="/w/d", type="directory", mode=755, size=4096, **common)
    assert entry_to_file_info("/w/a.sh", script).is_executable
    assert not entry_to_file_info("/w/a.txt", plain).is_executable
    info = entry_to_file_info("/w/d", folder)
    assert info.is_directory
    assert info.size == 0


def _api_error(status: int, code: str = "X") -> SandboxApiException:
    return SandboxApiException(
        "boom", status_code=status, error=SandboxError(code, "m"), request_id="req-7"
    )


def test_transient_failures_are_classified() -> None:
    assert is_transient(SandboxConnectionException("reset"))
    assert is_transient(SandboxRateLimitException("slow down"))
    assert is_transient(_api_error(502))
    assert is_transient(_api_error(503))
    assert is_transient(SandboxTimeoutException("one request timed out"))
    assert not is_transient(SandboxReadyTimeoutException("the sandbox never became ready"))
    assert not is_transient(_api_error(404))
    assert not is_transient(_api_error(400))
    assert not is_transient(ValueError("x"))


def test_errors_carry_code_status_and_request_id() -> None:
    missing = file_error("reading", "/w/x", _api_error(404, "FILE_NOT_FOUND"))
    assert isinstance(missing, RuntimeFileNotFoundError)
    assert missing.path == "/w/x"
    failed = execution_error("running a command", _api_error(500, "RUNTIME_ERROR"))
    assert isinstance(failed, ExecutionTransportError)
    assert failed.code == "RUNTIME_ERROR"
    assert failed.status_code == 500
    assert failed.request_id == "req-7"
    assert "req-7" in str(failed)


def test_idempotent_calls_retry_transient_failures_only() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise _api_error(503)
        return "ok"

    assert call_idempotent(flaky, budget_seconds=5, initial_wait=0.001, max_wait=0.01) == "ok"
    assert len(calls) == 3

    calls.clear()

    def missing() -> str:
        calls.append(1)
        raise _api_error(404)

    with pytest.raises(SandboxApiException):
        call_idempotent(missing, budget_seconds=5, initial_wait=0.001)
    assert len(calls) == 1


def test_retries_stop_when_the_time_budget_is_spent() -> None:
    calls: list[int] = []

    def down() -> None:
        calls.append(1)
        raise SandboxConnectionException("refused")

    with pytest.raises(SandboxConnectionException):
        call_idempotent(down, budget_seconds=0.2, initial_wait=0.01, max_wait=0.02)
    assert 2 <= len(calls) < 100


def test_metadata_values_are_clipped_to_63_characters() -> None:
    clipped = clip_metadata({"k": "x" * 200, "short": "v"})
    assert clipped == {"k": "x" * 63, "short": "v"}


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_building_and_closing_the_runtime_contacts_nothing() -> None:
    port = _unused_port()
    listener = socket.socket()
    listener.bind(("127.0.0.1", port))
    listener.listen(1)
    listener.settimeout(0.2)
    try:
        runtime = OpenSandboxSkillRuntime(domain=f"127.0.0.1:{port}", conversation_id="conv-1")
        assert runtime.default_working_directory == "/workspace/conversations/conv-1"
        assert runtime.sandbox_id is None
        runtime.close()
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()


def test_without_a_conversation_skills_go_to_the_remote_root() -> None:
    runtime = OpenSandboxSkillRuntime(domain="127.0.0.1:9", remote_root="/opt/skills/")
    assert runtime.default_working_directory == "/opt/skills"
    runtime.close()


def test_invalid_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="conversation"):
        OpenSandboxSkillRuntime(domain="x:1", conversation_id="../x")
    with pytest.raises(ValueError, match="remote_root"):
        OpenSandboxSkillRuntime(domain="x:1", remote_root="/")
    with pytest.raises(ValueError, match="gid"):
        OpenSandboxSkillRuntime(domain="x:1", gid=5)
    with pytest.raises(ValueError, match="conversation_store"):
        OpenSandboxSkillRuntime(domain="x:1", conversation_store=InMemoryConversationStore())


def test_the_provider_is_registered_with_env_backed_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = available_runtimes()["opensandbox"]
    assert provider.options_model is OpenSandboxRuntimeOptions
    monkeypatch.setenv("SKILLRUNTIME_OPENSANDBOX_DOMAIN", "127.0.0.1:9")
    monkeypatch.setenv("SKILLRUNTIME_OPENSANDBOX_CONVERSATION_ID", "from-env")
    monkeypatch.setenv("SKILLRUNTIME_OPENSANDBOX_API_KEY", "secret-key-value")
    options = OpenSandboxRuntimeOptions()
    assert options.domain == "127.0.0.1:9"
    assert "secret-key-value" not in repr(options)
    runtime = create_runtime("opensandbox")
    try:
        assert runtime.default_working_directory == "/workspace/conversations/from-env"
    finally:
        runtime.close()


def test_options_validate_network_policy_and_user() -> None:
    options = OpenSandboxRuntimeOptions(
        domain="x:1",
        network_policy={
            "default_action": "deny",
            "egress": [{"action": "allow", "target": "pypi.org"}],
        },
        uid=1000,
        gid=1000,
    )
    assert options.network_policy is not None
    assert options.network_policy.egress[0].target == "pypi.org"
    with pytest.raises(ValueError, match="sandbox_timeout_seconds"):
        OpenSandboxRuntimeOptions(domain="x:1", sandbox_timeout_seconds=10)


def _binding(store: InMemoryConversationStore) -> ConversationBinding:
    return ConversationBinding(
        store,
        service_key="http://sandbox.example",
        conversation_id="conv",
        runtime_name="opensandbox",
        workspace_root="/workspace/conversations",
    )


def test_binding_create_is_won_once_and_prepared_skills_merge() -> None:
    store = InMemoryConversationStore()
    one, two = _binding(store), _binding(store)
    assert one.create("sb-1")
    assert not two.create("sb-2")
    one.add_prepared("sb-1", "d1", "/p/one")
    two.add_prepared("sb-1", "d2", "/p/two")
    record = one.load()
    assert record is not None
    assert dict(record.prepared_skills) == {"d1": "/p/one", "d2": "/p/two"}
    assert two.add_prepared("sb-other", "d3", "/p/three") is not None
    assert "d3" not in (one.load() or record).prepared_skills


def test_binding_replacement_is_decided_once() -> None:
    store = InMemoryConversationStore()
    one, two = _binding(store), _binding(store)
    one.create("sb-dead")
    one.add_prepared("sb-dead", "d1", "/p/one")
    first = one.replace_sandbox("sb-dead", "sb-new-1")
    second = two.replace_sandbox("sb-dead", "sb-new-2")
    assert first is not None
    assert first.sandbox_id == "sb-new-1"
    assert first.prepared_skills == {}
    assert second is not None
    assert second.sandbox_id == "sb-new-1"


def test_binding_refuses_a_record_with_another_workspace_root() -> None:
    store = InMemoryConversationStore()
    binding = _binding(store)
    store.create(
        ConversationRecord.new(
            service_key="http://sandbox.example",
            conversation_id="conv",
            runtime="opensandbox",
            workspace_root="/elsewhere",
            sandbox_id="sb",
        )
    )
    with pytest.raises(Exception, match="conversations_root"):
        binding.load()


@pytest.mark.parametrize(
    ("status", "code", "message", "kind", "error_code"),
    [
        (
            404,
            "FILE_NOT_FOUND",
            "file not found. open /w/x: no such file",
            OpenSandboxFileNotFoundError,
            "file_not_found",
        ),
        (
            500,
            "RUNTIME_ERROR",
            "error opening destination file /w/x. open /w/x: permission denied",
            OpenSandboxPermissionError,
            "permission_denied",
        ),
        (
            500,
            "RUNTIME_ERROR",
            "error removing file /w/x. remove /w/x: operation not permitted",
            OpenSandboxPermissionError,
            "permission_denied",
        ),
        (
            500,
            "RUNTIME_ERROR",
            "error creating target directory /w. mkdir /w: read-only file system",
            OpenSandboxPermissionError,
            "permission_denied",
        ),
        (
            500,
            "RUNTIME_ERROR",
            "error creating target directory /w/f. mkdir /w/f: not a directory",
            OpenSandboxNotADirectoryError,
            "invalid_path",
        ),
        (400, "INVALID_FILE", "/w/d is a directory", OpenSandboxIsADirectoryError, "is_directory"),
        (
            500,
            "RUNTIME_ERROR",
            "error copying file /w/x. write /w/x: no space left on device",
            OpenSandboxFileError,
            "file_error",
        ),
    ],
)
def test_file_errors_are_typed_from_execds_answer(
    status: int, code: str, message: str, kind: type[Exception], error_code: str
) -> None:
    error = file_error(
        "writing",
        "/w/x",
        SandboxApiException(
            message, status_code=status, error=SandboxError(code, message), request_id="req-9"
        ),
    )
    assert type(error) is kind
    assert error.kind == file_error_code(error) == error_code
    assert isinstance(error, OpenSandboxFileError)
    assert (error.code, error.status_code, error.request_id) == (code, status, "req-9")
    assert error.path == "/w/x"
