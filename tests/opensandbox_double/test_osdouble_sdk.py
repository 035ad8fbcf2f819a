"""The real OpenSandbox SDK (``opensandbox`` 1.1.1, sync client) against the double."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import timedelta

import pytest
from opensandbox.config import ConnectionConfigSync
from opensandbox.exceptions import SandboxApiException, SandboxException
from opensandbox.models.execd import OutputMessage, RunCommandOpts
from opensandbox.models.execd_sync import ExecutionHandlersSync
from opensandbox.models.filesystem import WriteEntry
from opensandbox.transport import RetryPolicy

from doubles.opensandbox import OpenSandboxDouble
from opensandbox import SandboxSync


def _config(double: OpenSandboxDouble, **extra: object) -> ConnectionConfigSync:
    return ConnectionConfigSync(
        domain=double.domain,
        api_key=double.api_key,
        disable_metrics=True,
        request_timeout=timedelta(seconds=20),
        **extra,
    )


@pytest.fixture
def sdk_sandbox(opensandbox_double: OpenSandboxDouble) -> Iterator[SandboxSync]:
    sandbox = SandboxSync.create(
        "python:3.12",
        connection_config=_config(opensandbox_double),
        timeout=timedelta(minutes=5),
        metadata={"suite": "osdouble"},
    )
    try:
        yield sandbox
    finally:
        with contextlib.suppress(SandboxException):
            sandbox.kill()
        sandbox.close()


def test_create_run_upload_download_kill(
    opensandbox_double: OpenSandboxDouble, sdk_sandbox: SandboxSync
) -> None:
    streamed: list[str] = []
    execution = sdk_sandbox.commands.run(
        "printf 'one\\n\\nthree\\n'; echo oops >&2; exit 2",
        opts=RunCommandOpts(timeout=timedelta(seconds=10), working_directory="/workspace"),
        handlers=ExecutionHandlersSync(on_stdout=lambda m: streamed.append(m.text)),
    )
    assert streamed == ["one", "\n", "three"]
    assert execution.exit_code == 2
    assert execution.error is not None
    assert execution.error.name == "CommandExecError"
    assert [m.text for m in execution.logs.stderr] == ["oops"]
    assert execution.id

    data = bytes(range(256)) * 1000
    sdk_sandbox.files.write_files(
        [
            WriteEntry(path="/workspace/in/blob.bin", data=data, mode=644),
            WriteEntry(path="/workspace/in/note.txt", data="héllo", mode=600),
        ]
    )
    assert sdk_sandbox.files.read_bytes("/workspace/in/blob.bin") == data
    assert sdk_sandbox.files.read_file("/workspace/in/note.txt") == "héllo"
    info = sdk_sandbox.files.get_file_info(["/workspace/in/note.txt"])["/workspace/in/note.txt"]
    assert info.mode == 600
    listed = sdk_sandbox.commands.run("md5sum < /workspace/in/blob.bin | cut -c1-8")
    assert listed.exit_code == 0
    with pytest.raises(SandboxApiException) as missing:
        sdk_sandbox.files.read_bytes("/workspace/in/none")
    assert missing.value.status_code == 404
    assert missing.value.error.code == "FILE_NOT_FOUND"

    assert sdk_sandbox.get_info().status.state == "Running"
    sdk_sandbox.kill()
    assert sdk_sandbox.id not in opensandbox_double.stats()["live_sandbox_ids"]
    with pytest.raises(SandboxApiException) as gone:
        sdk_sandbox.get_info()
    assert gone.value.status_code == 404


def test_timeout_gives_minus_one(sdk_sandbox: SandboxSync) -> None:
    execution = sdk_sandbox.commands.run(
        "echo before; sleep 30", opts=RunCommandOpts(timeout=timedelta(milliseconds=300))
    )
    assert execution.exit_code == -1
    assert [m.text for m in execution.logs.stdout] == ["before"]


def test_server_proxy_mode(opensandbox_double: OpenSandboxDouble) -> None:
    config = _config(opensandbox_double, use_server_proxy=True)
    sandbox = SandboxSync.create("python:3.12", connection_config=config)
    try:
        sandbox.files.write_file("/workspace/p.txt", "via proxy", mode=644)
        execution = sandbox.commands.run("cat /workspace/p.txt")
        assert [m.text for m in execution.logs.stdout] == ["via proxy"]
        routes = opensandbox_double.stats()["requests"]
        assert "GET /sandboxes/{id}/endpoints/44772" in routes
    finally:
        sandbox.kill()
        sandbox.close()


def test_connect_by_id_and_renew(
    opensandbox_double: OpenSandboxDouble, sdk_sandbox: SandboxSync
) -> None:
    again = SandboxSync.connect(sdk_sandbox.id, connection_config=_config(opensandbox_double))
    try:
        assert again.commands.run("echo hi").logs.stdout[0].text == "hi"
        renewed = again.renew(timedelta(minutes=2))
        assert renewed.expires_at == again.get_info().expires_at
    finally:
        again.close()


def test_faults_seen_through_the_sdk(
    opensandbox_double: OpenSandboxDouble, sdk_sandbox: SandboxSync
) -> None:
    # Retryable statuses on idempotent calls are absorbed by the SDK's retry policy.
    opensandbox_double.set_fault("status", status=503, count=2, plane="lifecycle")
    fired = opensandbox_double.stats()["faults_fired"]
    assert sdk_sandbox.get_info().id == sdk_sandbox.id
    assert opensandbox_double.stats()["faults_fired"] == fired + 2

    # A stream cut after the terminal event: output and exit code arrive, then the SDK raises.
    seen: list[OutputMessage] = []
    opensandbox_double.set_fault("drop_after_terminal")
    with pytest.raises(SandboxException):
        sdk_sandbox.commands.run(
            "echo kept; exit 5",
            handlers=ExecutionHandlersSync(on_stdout=seen.append),
        )
    assert [m.text for m in seen] == ["kept"]

    # A stream without a terminal event: no exception, exit code unknown.
    opensandbox_double.set_fault("no_terminal")
    execution = sdk_sandbox.commands.run("echo partial")
    assert execution.exit_code is None
    assert [m.text for m in execution.logs.stdout] == ["partial"]


def test_status_fault_without_retries_surfaces(opensandbox_double: OpenSandboxDouble) -> None:
    config = _config(opensandbox_double, retry_policy=RetryPolicy.disabled())
    sandbox = SandboxSync.create("python:3.12", connection_config=config)
    try:
        opensandbox_double.set_fault(
            "status", status=429, count=1, plane="lifecycle", retry_after=2
        )
        with pytest.raises(SandboxApiException) as limited:
            sandbox.get_info()
        assert limited.value.status_code == 429
        assert sandbox.get_info().id == sandbox.id
    finally:
        sandbox.kill()
        sandbox.close()


def test_several_client_processes_share_one_double(opensandbox_double: OpenSandboxDouble) -> None:
    before = opensandbox_double.stats()
    script = textwrap.dedent(
        """
        import sys
        from datetime import timedelta
        from opensandbox import SandboxSync
        from opensandbox.config import ConnectionConfigSync
        cfg = ConnectionConfigSync(domain=sys.argv[1], api_key=sys.argv[2], disable_metrics=True)
        sb = SandboxSync.create("python:3.12", connection_config=cfg)
        sb.files.write_file("/workspace/who", sys.argv[3], mode=644)
        out = sb.commands.run("cat /workspace/who").logs.stdout[0].text
        sb.kill()
        print(out)
        """
    )
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                script,
                opensandbox_double.domain,
                opensandbox_double.api_key,
                f"w{i}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(4)
    ]
    outputs = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err.decode()[-2000:]
        outputs.append(out.decode().strip())
    assert outputs == ["w0", "w1", "w2", "w3"]
    after = opensandbox_double.stats()
    assert after["creates"] - before["creates"] == 4
    assert after["deletes"] - before["deletes"] == 4
    assert after["uploaded_files"] - before["uploaded_files"] == 4
