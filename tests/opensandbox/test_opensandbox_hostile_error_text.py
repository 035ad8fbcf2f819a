"""Error text built from hostile paths is printable UTF-8; the error's ``path`` keeps the name.

A name that is not UTF-8 reaches the runtime as lone surrogates (``surrogateescape``), and a
model may ask for any text. The messages of the OpenSandbox file errors render such text with
``skillruntime.core.errors.printable`` (docs/custom-runtime.md), so ``str(error)`` encodes as
UTF-8 strictly and holds no control character, while ``error.path`` is the name as given.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opensandbox.exceptions import SandboxApiException, SandboxError

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.errors import RuntimeFileError
from skillruntime.core.models import FileInfo
from skillruntime.opensandbox import OpenSandboxSkillRuntime
from skillruntime.opensandbox.errors import OpenSandboxFileError, file_error
from skillruntime.opensandbox.file_rules import directory_read_error, open_local, require_readable

HOSTILE = st.lists(
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
    | st.characters(categories=["Cc", "Cf", "Zl", "Zp"], exclude_characters="\x00/")
    | st.sampled_from(["\\", "x", "é", "\\xff", " "]),
    min_size=1,
    max_size=12,
).map("".join)
"""Names of lone surrogates (a non-UTF-8 byte, or none that stands for a byte), control and
format characters, line separators and backslashes, mixed with ordinary text."""


def host_name(name: str) -> bytes | None:
    """The bytes of ``name`` on the host, or ``None`` for a lone surrogate no byte stands for."""
    try:
        return name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return None


def assert_safe_text(error: BaseException) -> str:
    """``str(error)`` encodes as UTF-8 strictly and every character of it is printable."""
    text = str(error)
    text.encode("utf-8")
    assert text.isprintable(), text
    return text


@given(name=HOSTILE, status=st.sampled_from([404, 403, 500]))
def test_file_errors_from_the_sdk_render_the_path_and_the_server_text(
    name: str, status: int
) -> None:
    path = "/workspace/" + name
    reasons = {404: "no such file", 403: "permission denied", 500: "is a directory"}
    failure = SandboxApiException(
        f"open {path}: {reasons[status]}",
        status_code=status,
        error=SandboxError("RUNTIME" + name, f"open {path}"),
        request_id="req-" + name,
    )
    error = file_error("reading", path, failure)
    assert error.path == path
    assert_safe_text(error)


@given(name=HOSTILE)
def test_the_refusals_before_a_download_render_the_path(name: str) -> None:
    path = "/workspace/" + name
    directory = FileInfo(path=path, is_directory=True, size=0)
    special = FileInfo(path=path, is_directory=False, size=0, is_special=True)
    errors: list[RuntimeFileError] = [directory_read_error(path, OpenSandboxFileError("x"))]
    for info in (None, directory, special):
        with pytest.raises(RuntimeFileError) as refused:
            require_readable(path, info)
        errors.append(refused.value)
    for error in errors:
        assert error.path == path
        assert_safe_text(error)


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=HOSTILE.filter(lambda name: host_name(name) is not None))
def test_a_missing_local_file_renders_its_host_path(name: str, tmp_path: Path) -> None:
    with pytest.raises(RuntimeFileError) as missing:
        open_local(tmp_path / ("gone-" + name), "/workspace/" + name)
    assert missing.value.path == "/workspace/" + name
    text = assert_safe_text(missing.value)
    assert str(tmp_path) in text


def test_a_name_that_is_not_utf8_is_written_as_its_byte() -> None:
    path = "/workspace/a\udcffb\\c\n"
    error = file_error("reading", path, SandboxApiException("gone", status_code=404))
    assert str(error) == "Path does not exist in the sandbox: /workspace/a\\xffb\\\\c\\n"
    assert error.path == path


@pytest.fixture(scope="module")
def runtime(opensandbox_double: OpenSandboxDouble) -> Iterator[OpenSandboxSkillRuntime]:
    with OpenSandboxSkillRuntime(
        domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
    ) as runtime:
        yield runtime


@settings(max_examples=25, deadline=None)
@given(name=HOSTILE)
def test_file_errors_of_the_runtime_for_hostile_names_print(
    runtime: OpenSandboxSkillRuntime, name: str
) -> None:
    """Against the protocol double: reading and listing a missing hostile name raise a file
    error whose text prints and whose ``path`` is the absolute name asked for."""
    fs = runtime.get_file_system()
    path = "/workspace/hostile-" + name
    for operation in (fs.read_text, fs.read_bytes, fs.list_directory):
        with pytest.raises(RuntimeFileError) as failed:
            operation(path)
        assert failed.value.path == path
        assert_safe_text(failed.value)
