"""The AIO runtime against the AIO Sandbox double: request counts, resume, auth, errors, retries."""

from __future__ import annotations

import os
import posixpath
import shlex
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import pytest

from doubles.aio import AioDouble
from skillruntime.aio import (
    AioAuthenticationError,
    AioNotFoundError,
    AioOperationError,
    AioRequestError,
    AioSandboxSkillRuntime,
    AioServerError,
)
from skillruntime.aio.archive import build_skill_archive
from skillruntime.core.errors import (
    ExecutionTransportError,
    RuntimeClosedError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    SkillRuntimeError,
)
from skillruntime.core.models import (
    BootstrapCommand,
    Skill,
    SkillExecutionRequest,
    SkillPreparationRequest,
    SkillRuntimeConfig,
)
from skillruntime.core.runtime.bridge import CANCEL_MARKER_VARIABLE
from skillruntime.core.skills.files import SkillFile
from skillruntime.core.testing.execute_contracts import process_is_dead_command
from skillruntime.core.testing.search_contracts import odd_files, odd_names, write_tree

ROOT = "/home/gem/workspace/conversations"


def _requests(double: AioDouble, route: str) -> int:
    counts: dict[str, int] = double.stats()["requests"]
    return counts.get(route, 0)


def _total(double: AioDouble) -> int:
    return sum(double.stats()["requests"].values())


def _runtime(double: AioDouble, conversation: str | None = None, **kwargs: Any) -> Any:
    return AioSandboxSkillRuntime(
        base_url=double.url,
        token=double.token,
        conversation_id=conversation or f"c-{uuid.uuid4().hex[:10]}",
        conversations_root=ROOT,
        **kwargs,
    )


def _run(runtime: AioSandboxSkillRuntime, command: str, **fields: Any) -> Any:
    return runtime.execute(SkillExecutionRequest(command=command, **fields))


def _big_skill(root: Path, files: int) -> Skill:
    skill_dir = root / f"big-{uuid.uuid4().hex[:6]}"
    (skill_dir / "scripts").mkdir(parents=True)
    (skill_dir / "SKILL.md").write_text("---\nname: big\ndescription: many files\n---\nbody\n")
    run = skill_dir / "scripts" / "run.sh"
    run.write_text("#!/bin/sh\necho big-ran\n")
    run.chmod(0o755)
    for index in range(files - 2):
        sub = skill_dir / "data" / f"d{index % 20:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{index:04d}.txt").write_text(f"file {index}\n")
    return Skill(name="big", description="many files", base_path=str(skill_dir))


@pytest.fixture(params=["aio_bash", "aio_shell"])
def double(request: pytest.FixtureRequest) -> AioDouble:
    """Each test runs against a current image and an image without ``/v1/bash``."""
    value: AioDouble = request.getfixturevalue(request.param)
    return value


@pytest.fixture
def runtime(double: AioDouble) -> Iterator[AioSandboxSkillRuntime]:
    with _runtime(double) as rt:
        yield rt


# ------------------------------------------------------------------------- prepare


def test_a_1000_file_skill_is_prepared_with_a_handful_of_requests(
    double: AioDouble, runtime: AioSandboxSkillRuntime, tmp_path: Path
) -> None:
    skill = _big_skill(tmp_path, 1000)
    _run(runtime, "true")  # detection and the workspace are not part of the count
    double.reset_stats()
    (prepared,) = runtime.prepare(SkillPreparationRequest(skills=(skill,)))
    stats = double.stats()["requests"]
    assert stats.get("POST /v1/file/upload", 0) == 1
    assert sum(stats.values()) <= 8, stats
    fs = runtime.get_file_system()
    assert len(fs.list_files(prepared.base_path, limit=5000)) == 1000
    assert fs.read_text(posixpath.join(prepared.base_path, "data/d07/f0507.txt")) == "file 507\n"
    out = _run(runtime, "./scripts/run.sh", working_directory=prepared.base_path)
    assert out.stdout == "big-ran\n"


def test_a_second_runtime_object_on_the_conversation_uploads_nothing(
    double: AioDouble, tmp_path: Path
) -> None:
    skill = _big_skill(tmp_path, 50)
    conversation = f"resume-{uuid.uuid4().hex[:8]}"
    log = posixpath.join(ROOT, conversation, "boot.log")
    config = SkillRuntimeConfig(bootstrap=(BootstrapCommand(command=f"echo run >> '{log}'"),))
    request = SkillPreparationRequest(skills=(skill,), configs={"big": config})
    with _runtime(double, conversation) as first:
        (one,) = first.prepare(request)
    double.reset_stats()
    with _runtime(double, conversation) as second:
        (two,) = second.prepare(request)
        stats = double.stats()["requests"]
        assert two.base_path == one.base_path
        assert stats.get("POST /v1/file/upload", 0) == 0
        assert stats.get("POST /v1/file/write", 0) == 0
        assert double.stats()["bytes_uploaded"] == 0
        # One command creates the workspace, one checks the ready marker.
        commands = stats.get("POST /v1/bash/exec", 0) + stats.get("POST /v1/shell/exec", 0)
        assert commands == 2, stats
        assert second.get_file_system().read_text(log) == "run\n"


def test_shared_remote_root_is_reused_across_runtimes(double: AioDouble, tmp_path: Path) -> None:
    skill = _big_skill(tmp_path, 10)
    remote_root = f"/home/gem/workspace/shared-{uuid.uuid4().hex[:8]}/skills"
    with AioSandboxSkillRuntime(
        base_url=double.url, token=double.token, remote_root=remote_root
    ) as first:
        assert first.default_working_directory == posixpath.dirname(remote_root)
        (one,) = first.prepare(SkillPreparationRequest(skills=(skill,)))
        assert posixpath.dirname(one.base_path) == remote_root
    double.reset_stats()
    with AioSandboxSkillRuntime(
        base_url=double.url, token=double.token, remote_root=remote_root
    ) as second:
        (two,) = second.prepare(SkillPreparationRequest(skills=(skill,)))
    assert two.base_path == one.base_path
    assert _requests(double, "POST /v1/file/upload") == 0


def test_an_archive_that_fails_to_unpack_raises_prepare_error(
    runtime: AioSandboxSkillRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillruntime.aio import runtime as runtime_module
    from skillruntime.core.errors import SkillPrepareError

    def broken(archive: str, target: str) -> str:
        return f"rm -f '{archive}'; echo 'the skill archive is unreadable' >&2; exit 1"

    monkeypatch.setattr(runtime_module, "unpack_command", broken)
    with pytest.raises(SkillPrepareError, match="unreadable") as caught:
        runtime.prepare(SkillPreparationRequest(skills=(_big_skill(tmp_path, 3),)))
    assert caught.value.skill_name == "big"


# ------------------------------------------------------------------------- commands


def test_command_api_is_detected_once(double: AioDouble) -> None:
    double.reset_stats()
    with _runtime(double) as rt:
        for _ in range(3):
            assert _run(rt, "echo hi").stdout == "hi\n"
        expected = "bash" if double.bash_api else "shell"
        assert rt.command_api == expected
    assert _requests(double, "POST /v1/bash/sessions/create") == 1
    if double.bash_api:
        # The three commands, then the removal of the session's stream files by close().
        assert _requests(double, "POST /v1/bash/exec") == 4
        assert _requests(double, "POST /v1/shell/exec") == 0
    else:
        assert _requests(double, "POST /v1/shell/sessions/create") == 1
        assert _requests(double, "POST /v1/shell/exec") >= 3


def test_top_level_exit_neither_ends_nor_poisons_the_session(
    runtime: AioSandboxSkillRuntime,
) -> None:
    assert _run(runtime, "exit 3").exit_code == 3
    assert _run(runtime, "cd /; export KIT_X=1; echo once").stdout == "once\n"
    after = _run(runtime, 'pwd; printf "%s" "${KIT_X-unset}"')
    assert after.stdout == f"{runtime.default_working_directory}\nunset"


@pytest.mark.parametrize("with_conversation", [True, False])
def test_a_temp_root_that_does_not_exist_yet_is_created(
    double: AioDouble, with_conversation: bool
) -> None:
    """The first command carries an environment (staged as a file on the shell API) and the
    first write stages its content, both below ``temp_root``; neither may need it to exist."""
    temp_root = f"/tmp/kit-missing-{uuid.uuid4().hex[:8]}/deeper"
    assert not double.host_path(temp_root).exists()
    options: dict[str, Any] = {"temp_root": temp_root, "base_environment": {"KIT_BASE": "b"}}
    if with_conversation:
        runtime = _runtime(double, **options)
    else:
        remote_root = f"/home/gem/kit-{uuid.uuid4().hex[:8]}/skills"
        runtime = AioSandboxSkillRuntime(
            base_url=double.url, token=double.token, remote_root=remote_root, **options
        )
    with runtime:
        result = _run(runtime, 'printf %s "$KIT_BASE"', environment={"KIT_REQ": "r"})
        assert (result.exit_code, result.stdout) == (0, "b")
        assert double.host_path(temp_root).is_dir()
    with (
        AioSandboxSkillRuntime(
            base_url=double.url, token=double.token, temp_root=temp_root + "-write-first"
        ) as fresh,
    ):
        fresh.get_file_system().write_text("/home/gem/kit-write-first.txt", "staged\n")
        assert fresh.get_file_system().read_text("/home/gem/kit-write-first.txt") == "staged\n"


def test_missing_working_directory_is_a_transport_error(runtime: AioSandboxSkillRuntime) -> None:
    with pytest.raises(ExecutionTransportError, match="does not exist"):
        _run(runtime, "true", working_directory="no/such/dir")


def test_environment_values_stay_out_of_the_command_text(
    double: AioDouble, runtime: AioSandboxSkillRuntime
) -> None:
    secret = "kit-secret-" + uuid.uuid4().hex
    assert _run(runtime, 'printf "%s" "$KIT_S"', environment={"KIT_S": secret}).stdout == secret
    if double.bash_api:
        listing = runtime.client.call("GET", "/v1/bash/sessions")
        assert secret not in repr(listing)
    else:
        sessions = runtime.client.call("GET", "/v1/shell/sessions")
        for session_id in sessions["sessions"]:
            view = runtime.client.call("POST", "/v1/shell/view", json={"id": session_id})
            assert secret not in repr(view)
    # The environment file the shell path writes is gone.
    leftovers = [p for p in Path("/tmp").glob(".skillruntime-aio-*.env")]
    assert not any(secret in p.read_text() for p in leftovers if p.exists())


def test_environment_variables_of_any_name_reach_the_command(
    runtime: AioSandboxSkillRuntime,
) -> None:
    names = ["C", "D", "P", "W", "B", "F", "R", "K", "G", "L", "RC", "TO", "NO", "NE", "T"]
    command = "".join(f'printf "%s;" "${name}";' for name in names)
    result = _run(runtime, command, environment={name: f"v-{name}" for name in names})
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == "".join(f"v-{name};" for name in names)


def _run_files(double: AioDouble) -> set[Path]:
    base = double.tmp / ".skillruntime-aio"
    return {path for path in base.rglob("*") if path.is_file()} if base.exists() else set()


def test_runs_leave_only_the_last_shell_result_behind(
    double: AioDouble, runtime: AioSandboxSkillRuntime
) -> None:
    _run(runtime, "true")  # the runtime's first command creates the workspace
    before = _run_files(double)
    assert _run(runtime, "echo out; echo err >&2").stdout == "out\n"
    assert _run(runtime, "exit 3", environment={"KIT_E": "x"}).exit_code == 3
    assert _run(runtime, "true").exit_code == 0
    left = _run_files(double) - before
    if double.bash_api:
        # A session's stream files and its process group record, reused by each command and
        # left empty (the record blank).
        assert {path.suffix for path in left} <= {".e", ".o", ".p"}
        assert all(path.read_text().strip() == "" for path in _run_files(double))
    else:
        # One session ran them in turn: only its last result and started marker remain.
        assert sorted(path.suffix for path in left) == [".r", ".s"]
        assert len({path.parent for path in left}) == 1


def test_a_terminated_shell_session_is_replaced_once(aio_shell: AioDouble) -> None:
    with _runtime(aio_shell) as rt:
        assert _run(rt, "echo one").stdout == "one\n"
        sessions = list(rt.client.call("GET", "/v1/shell/sessions")["sessions"])
        ours = [s for s in sessions if s.startswith("skillruntime-")]
        for session_id in ours:
            aio_shell.terminate_shell_session(session_id)
        aio_shell.reset_stats()
        assert _run(rt, "echo two").stdout == "two\n"
        assert _requests(aio_shell, "POST /v1/shell/sessions/create") == 1


def test_an_evicted_shell_session_is_recreated(aio_shell: AioDouble) -> None:
    with _runtime(aio_shell) as rt:
        _run(rt, "true")
        for session_id in rt.client.call("GET", "/v1/shell/sessions")["sessions"]:
            if session_id.startswith("skillruntime-"):
                aio_shell.evict_shell_session(session_id)
        assert _run(rt, "echo back").stdout == "back\n"


def test_close_releases_only_its_own_sessions(double: AioDouble) -> None:
    rt = _runtime(double)
    _run(rt, "true")
    double.reset_stats()
    rt.close()
    rt.close()
    requests = double.stats()["requests"]
    assert requests.get("DELETE /v1/shell/sessions", 0) == 0
    if double.bash_api:
        assert requests.get("POST /v1/bash/sessions/{session_id}/close", 0) == 1
    else:
        assert requests.get("DELETE /v1/shell/sessions/{session_id}", 0) == 1
    with _runtime(double) as other:
        assert _run(other, "echo alive").stdout == "alive\n"


_TREE = "sh -c 'sleep 60 & echo $! > {pid}; wait' & sleep 60"


def test_close_kills_the_commands_other_threads_are_running(double: AioDouble) -> None:
    """As the async runtime does: close() sweeps the whole tree of a command still running in
    another thread (closing its session alone leaves a ``/v1/bash`` command's process group
    alive), and that execute() raises ``RuntimeClosedError``."""
    conversation = f"close-{uuid.uuid4().hex[:8]}"
    pid_file = posixpath.join(ROOT, conversation, "closed.pid")
    rt = _runtime(double, conversation)
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(_run(rt, _TREE.format(pid=pid_file), timeout_seconds=120))
        except Exception as exc:  # the test inspects what execute() raised
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    fs = rt.get_file_system()
    deadline = time.monotonic() + 30
    while not fs.exists(pid_file):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    rt.close()
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert len(outcome) == 1
    assert isinstance(outcome[0], RuntimeClosedError)
    with _runtime(double, conversation) as other:
        state = _run(other, process_is_dead_command(pid_file, 2.0)).stdout.strip()
        _run(other, f"kill -9 $(cat {pid_file}) 2>/dev/null; true")
    assert state == "dead"


def test_every_command_carries_a_marker_and_keeps_the_callers(
    runtime: AioSandboxSkillRuntime,
) -> None:
    """The marker close() sweeps for is fresh per command unless the caller set one (the
    thread bridge of ``to_async`` marks each command and sweeps for its own token)."""
    show = f'printf %s "${CANCEL_MARKER_VARIABLE}"'
    first, second = _run(runtime, show).stdout, _run(runtime, show).stdout
    assert len(first) == 32
    assert first != second
    assert _run(runtime, show, environment={CANCEL_MARKER_VARIABLE: "mine"}).stdout == "mine"
    replaced = _run(runtime, show, environment={CANCEL_MARKER_VARIABLE: "it's"}).stdout
    assert len(replaced) == 32


def test_the_skill_archive_is_closed_when_staging_fails(
    runtime: AioSandboxSkillRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A staging path the service cannot give (its command failed) leaks no spooled archive."""
    from skillruntime.aio import runtime as runtime_module

    built: list[IO[bytes]] = []

    def tracked(files: Sequence[SkillFile]) -> tuple[IO[bytes], int]:
        archive, size = build_skill_archive(files)
        built.append(archive)
        return archive, size

    def refused(suffix: str = "") -> str:
        raise ExecutionTransportError("the staging directory could not be created")

    monkeypatch.setattr(runtime_module, "build_skill_archive", tracked)
    monkeypatch.setattr(runtime._runner, "staging_path", refused)
    with pytest.raises(SkillRuntimeError, match="staging directory"):
        runtime.prepare(SkillPreparationRequest(skills=(_big_skill(tmp_path, 3),)))
    assert len(built) == 1
    assert built[0].closed


# ---------------------------------------------------------------------------- auth


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_bad_or_missing_token_names_the_option(aio_bash: AioDouble, token: str | None) -> None:
    with AioSandboxSkillRuntime(
        base_url=aio_bash.url, token=token, conversation_id="auth-check", conversations_root=ROOT
    ) as rt:
        with pytest.raises(SkillRuntimeError) as caught:
            _run(rt, "true")
        message = str(caught.value)
        assert "401" in message
        assert "SKILLRUNTIME_AIO_TOKEN" in message
        assert "api_key" in message
        if token:
            assert token not in message
        with pytest.raises(RuntimeFileError, match="SKILLRUNTIME_AIO_TOKEN"):
            rt.get_file_system()
    assert isinstance(caught.value.__cause__, AioAuthenticationError)


def test_api_key_mode_uses_the_api_key_header() -> None:
    with AioDouble(auth="api_key") as double:
        key = double.api_key
        assert key
        with AioSandboxSkillRuntime(
            base_url=double.url, api_key=key, conversation_id="k", conversations_root=ROOT
        ) as rt:
            assert _run(rt, "echo keyed").stdout == "keyed\n"
        with AioSandboxSkillRuntime(
            base_url=double.url, api_key="nope", conversation_id="k", conversations_root=ROOT
        ) as bad:
            with pytest.raises(ExecutionTransportError, match="SKILLRUNTIME_AIO_API_KEY") as err:
                _run(bad, "true")
            assert "nope" not in str(err.value)


# --------------------------------------------------------------- errors and retries


def test_envelope_and_status_errors_are_mapped(aio_bash: AioDouble) -> None:
    with _runtime(aio_bash) as rt:
        client = rt.client
        with pytest.raises(AioRequestError, match="422") as invalid:
            client.call("POST", "/v1/shell/exec", json={"not_command": "x"})
        assert "command" in str(invalid.value)
        with pytest.raises(AioNotFoundError, match="404"):
            client.call("GET", "/v1/no-such-endpoint")
        with pytest.raises(AioOperationError) as failed:
            client.call("POST", "/v1/file/read", json={"file": "/home/gem/missing-file"})
        assert failed.value.error_type == "not_found"
        aio_bash.inject_fault("GET /v1/sandbox", 200, body={"success": False, "message": "boom"})
        with pytest.raises(AioOperationError, match="boom"):
            client.call("GET", "/v1/sandbox")
        aio_bash.inject_fault("GET /v1/sandbox", 500)
        aio_bash.reset_stats()
        with pytest.raises(AioServerError, match="500"):
            client.call("GET", "/v1/sandbox", idempotent=True)
        assert _requests(aio_bash, "GET /v1/sandbox") == 1  # 500 is not retried


def test_idempotent_reads_are_retried_on_gateway_errors(aio_bash: AioDouble) -> None:
    with _runtime(aio_bash) as rt:
        fs = rt.get_file_system()
        fs.write_bytes("blob.bin", bytes(range(256)))
        aio_bash.reset_stats()
        aio_bash.inject_fault("GET /v1/file/download", 503, count=2)
        assert fs.read_bytes("blob.bin") == bytes(range(256))
        assert _requests(aio_bash, "GET /v1/file/download") == 3
        aio_bash.inject_fault("GET /v1/file/download", 0, count=1)  # dropped connection
        assert fs.read_bytes("blob.bin") == bytes(range(256))
        aio_bash.inject_fault("/v1/file/upload", 502, count=1)
        fs.write_text("again.txt", "uploaded after a retry")
        assert fs.read_text("again.txt") == "uploaded after a retry"


def test_commands_are_never_retried(aio_bash: AioDouble) -> None:
    with _runtime(aio_bash) as rt:
        _run(rt, "true")
        aio_bash.reset_stats()
        aio_bash.inject_fault("POST /v1/bash/exec", 503, count=1)
        with pytest.raises(ExecutionTransportError, match="503"):
            _run(rt, "echo x >> attempts.txt")
        assert _requests(aio_bash, "POST /v1/bash/exec") == 1
        assert rt.get_file_system().stat("attempts.txt") is None


def test_missing_file_and_directory_reads_are_not_found(runtime: AioSandboxSkillRuntime) -> None:
    fs = runtime.get_file_system()
    fs.make_directory("adir")
    for path in ("missing.txt", "adir"):
        with pytest.raises(RuntimeFileNotFoundError):
            fs.read_bytes(path)


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_odd_names_are_listed_whole_and_addressed_exactly(runtime: AioSandboxSkillRuntime) -> None:
    """A newline split a listing (a truncated name listed, a ghost entry made up), undecodable
    bytes came back replaced, and a path holding them raised ``UnicodeEncodeError`` before any
    request. Names are listed as the local runtime gives them (``surrogateescape``) and every
    command-backed operation reaches their exact bytes; the download endpoint, which takes
    UTF-8 paths only, refuses such a name with a typed error."""
    write_tree(runtime, "odd-list", odd_files())
    fs = runtime.get_file_system()
    listed = fs.list_directory("odd-list/odd")
    assert sorted(posixpath.basename(info.path) for info in listed) == sorted(odd_names())
    for index, name in enumerate(odd_names()):
        path = f"odd-list/odd/{name}"
        info = fs.stat(path)
        assert info is not None
        assert info.size == len(f"odd {index} needle\n")
        assert [entry.path for entry in fs.list_directory(path)] == [info.path]
    undecodable = [name for name in odd_names() if not _utf8(name)]
    assert undecodable
    for name in undecodable:
        path = f"odd-list/odd/{name}"
        with pytest.raises(RuntimeFileError, match="UTF-8 paths only"):
            fs.read_bytes(path)
        fs.write_text(path, "rewritten")
        assert _run(runtime, f"cat -- {shlex.quote(path)}").stdout == "rewritten"
        fs.delete(path)
        assert fs.stat(path) is None
    remaining = [posixpath.basename(info.path) for info in fs.list_directory("odd-list/odd")]
    assert sorted(remaining) == sorted(name for name in odd_names() if _utf8(name))


def test_unreachable_service_is_a_clear_transport_error() -> None:
    with (
        AioSandboxSkillRuntime(
            base_url="http://127.0.0.1:9",
            conversation_id="x",
            conversations_root=ROOT,
            connect_timeout=1,
            retry_attempts=1,
        ) as rt,
        pytest.raises(ExecutionTransportError, match="Cannot reach"),
    ):
        _run(rt, "true")


def test_host_sees_what_the_runtime_wrote(double: AioDouble) -> None:
    conversation = f"host-{uuid.uuid4().hex[:8]}"
    with _runtime(double, conversation) as rt:
        rt.get_file_system().write_bytes("bin/tool", b"#!/bin/sh\necho t\n", executable=True)
    host = double.host_path(posixpath.join(ROOT, conversation, "bin/tool"))
    assert host.read_bytes() == b"#!/bin/sh\necho t\n"
    assert os.stat(host).st_mode & 0o777 == 0o755


def test_long_shell_commands_are_followed_with_wait_and_view(
    aio_shell: AioDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillruntime.aio import command_plans as commands

    # A soft timeout well below the command's duration: the rule does not depend on durations.
    monkeypatch.setattr(commands, "_SOFT_TIMEOUT", 0.3)
    with _runtime(aio_shell) as rt:
        _run(rt, "true")
        aio_shell.reset_stats()
        result = _run(rt, "sleep 1.2; echo late; echo err >&2; exit 4", timeout_seconds=30)
        assert (result.exit_code, result.stdout, result.stderr) == (4, "late\n", "err\n")
        assert _requests(aio_shell, "POST /v1/shell/wait") >= 1
        assert _requests(aio_shell, "POST /v1/shell/view") >= 1
        timed = _run(rt, "echo partial; sleep 30", timeout_seconds=1.0)
        assert timed.timed_out
        assert timed.stdout == "partial\n"


def test_an_older_image_with_legacy_file_errors() -> None:
    with AioDouble(bash_api=False, file_errors="legacy") as double, _runtime(double) as rt:
        fs = rt.get_file_system()
        fs.write_bytes("data/raw.bin", b"\xff\xfe\x00binary")
        assert fs.read_bytes("data/raw.bin") == b"\xff\xfe\x00binary"
        with pytest.raises(RuntimeFileNotFoundError):
            fs.read_text("data/missing.txt")
        with pytest.raises(RuntimeFileError, match="not valid utf-8"):
            fs.read_text("data/raw.bin")
        assert [e.name for e in fs.list_directory("data")] == ["raw.bin"]
        assert _run(rt, "cat data/raw.bin | wc -c").stdout.strip() == "9"


def test_a_failed_shell_command_leaves_no_environment_value_behind(aio_shell: AioDouble) -> None:
    secret = "kit-secret-" + uuid.uuid4().hex
    with _runtime(aio_shell) as rt:
        _run(rt, "true")
        aio_shell.inject_fault("POST /v1/shell/exec", 503, count=1)
        with pytest.raises(ExecutionTransportError, match="503"):
            _run(rt, "echo never", environment={"KIT_S": secret})
        assert _run(rt, 'printf "%s" "${KIT_S-unset}"').stdout == "unset"
    for leftover in Path("/tmp").glob(".skillruntime-aio-*.env"):
        assert secret not in leftover.read_text(errors="replace")


def test_a_bash_command_killed_at_its_deadline_reports_its_partial_output(
    aio_bash: AioDouble,
) -> None:
    """The service's hard timeout kills the wrapper with the command; one more request reports
    the cut streams the run left (head and tail) and empties its files."""
    with _runtime(aio_bash) as rt:
        _run(rt, "true")
        aio_bash.reset_stats()
        command = "echo partial; echo oops >&2; head -c 5000 /dev/zero | tr '\\0' x; sleep 30"
        timed = _run(rt, command, timeout_seconds=1.5, max_output_bytes=1024)
        assert (timed.timed_out, timed.exit_code) == (True, -1)
        assert timed.stdout.startswith("partial\nxxx")
        assert "[3984 bytes truncated]" in timed.stdout
        assert timed.stdout_truncated
        assert (timed.stderr, timed.stderr_truncated) == ("oops\n", False)
        assert _requests(aio_bash, "POST /v1/bash/exec") == 2
        files = _run_files(aio_bash)
        assert files
        assert all(path.read_text().strip() == "" for path in files)
        assert _run(rt, "echo again").stdout == "again\n"


def test_close_removes_the_bash_sessions_stream_files(aio_bash: AioDouble) -> None:
    before = _run_files(aio_bash)
    with _runtime(aio_bash) as rt:
        assert _run(rt, "echo one").stdout == "one\n"
        assert _run_files(aio_bash) - before
    assert _run_files(aio_bash) - before == set()
