"""What the AIO client says when the service's answer breaks: a connection it accepted and then
dropped, or an answer that is not parseable HTTP, is a protocol error; only a connection that
could not be made says the service cannot be reached."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from doubles.aio import AioDouble
from skillruntime.aio import AioProtocolError, AioSandboxSkillRuntime, AioTransportError
from skillruntime.core.errors import ExecutionTransportError, RuntimeFileError
from skillruntime.core.models import SkillExecutionRequest

ROOT = "/home/gem/workspace/conversations"

_CUT_DOWNLOAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
    b"Content-Length: 1000\r\n\r\nonly ten b"
)
_GARBLED = {
    "not HTTP": b"this is not an HTTP answer\r\n\r\n",
    "a broken header line": b"HTTP/1.1 200 OK\r\nno colon here\r\nContent-Length: 0\r\n\r\n",
    "a cut status line": b"HTTP/1.1 2",
}


def _runtime(double: AioDouble, **kwargs: Any) -> AioSandboxSkillRuntime:
    return AioSandboxSkillRuntime(
        base_url=double.url,
        token=double.token,
        conversation_id=f"proto-{uuid.uuid4().hex[:10]}",
        conversations_root=ROOT,
        **kwargs,
    )


def _protocol_error(error: BaseException) -> AioProtocolError:
    cause = error.__cause__
    assert isinstance(cause, AioProtocolError), repr(cause)
    assert "Cannot reach" not in str(error)
    assert "protocol error" in str(error)
    return cause


def test_a_connection_dropped_before_the_answer_is_a_protocol_error(aio_bash: AioDouble) -> None:
    with _runtime(aio_bash) as rt:
        rt.execute(SkillExecutionRequest(command="true"))
        aio_bash.inject_fault("POST /v1/bash/exec", 0, count=1)
        with pytest.raises(ExecutionTransportError) as caught:
            rt.execute(SkillExecutionRequest(command="true"))
    cause = _protocol_error(caught.value)
    assert cause.endpoint == "/v1/bash/exec"
    assert cause.status is None
    assert aio_bash.url in str(cause)


@pytest.mark.parametrize("answer", list(_GARBLED.values()), ids=list(_GARBLED))
def test_an_answer_that_is_not_parseable_http_is_a_protocol_error(
    aio_bash: AioDouble, answer: bytes
) -> None:
    with _runtime(aio_bash) as rt:
        rt.execute(SkillExecutionRequest(command="true"))
        aio_bash.inject_fault("POST /v1/bash/exec", raw=answer)
        with pytest.raises(ExecutionTransportError) as caught:
            rt.execute(SkillExecutionRequest(command="true"))
        _protocol_error(caught.value)
        assert rt.execute(SkillExecutionRequest(command="echo again")).stdout == "again\n"


def test_a_download_broken_off_mid_body_is_a_protocol_error(aio_bash: AioDouble) -> None:
    with _runtime(aio_bash) as rt:
        fs = rt.get_file_system()
        fs.write_bytes("f.bin", b"x" * 1000)
        aio_bash.inject_fault("GET /v1/file/download", raw=_CUT_DOWNLOAD)
        with pytest.raises(RuntimeFileError) as caught:
            fs.read_bytes("f.bin")
        _protocol_error(caught.value)
        assert fs.read_bytes("f.bin") == b"x" * 1000


def test_a_garbled_download_answer_is_a_protocol_error_after_its_retries(
    aio_bash: AioDouble,
) -> None:
    with _runtime(aio_bash, retry_attempts=2) as rt:
        fs = rt.get_file_system()
        fs.write_bytes("g.bin", b"data")
        aio_bash.inject_fault("GET /v1/file/download", raw=_GARBLED["not HTTP"], count=2)
        with pytest.raises(RuntimeFileError) as caught:
            fs.read_bytes("g.bin")
        _protocol_error(caught.value)
        aio_bash.inject_fault("GET /v1/file/download", raw=_GARBLED["not HTTP"], count=1)
        assert fs.read_bytes("g.bin") == b"data"  # an idempotent read is retried once


def test_a_refused_connection_is_cannot_reach_not_a_protocol_error() -> None:
    with (
        AioSandboxSkillRuntime(
            base_url="http://127.0.0.1:9",
            conversation_id="x",
            conversations_root=ROOT,
            connect_timeout=1,
            retry_attempts=1,
        ) as rt,
        pytest.raises(ExecutionTransportError, match="Cannot reach") as caught,
    ):
        rt.execute(SkillExecutionRequest(command="true"))
    cause = caught.value.__cause__
    assert isinstance(cause, AioTransportError)
    assert not isinstance(cause, AioProtocolError)
    assert "protocol error" not in str(caught.value)
