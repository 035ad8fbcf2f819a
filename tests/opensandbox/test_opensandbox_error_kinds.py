"""OpenSandbox errors keep the SDK's ``code`` and the core's file-error kind side by side."""

from __future__ import annotations

from skillruntime.core.errors import file_error_code
from skillruntime.opensandbox.errors import OpenSandboxFileError, OpenSandboxFileNotFoundError


def test_sdk_code_does_not_hide_the_file_error_kind() -> None:
    missing = OpenSandboxFileNotFoundError("gone", path="/w/a", code="FILE_NOT_FOUND")
    failed = OpenSandboxFileError("broken", path="/w/a", code="RUNTIME_ERROR")
    assert (missing.code, file_error_code(missing)) == ("FILE_NOT_FOUND", "file_not_found")
    assert (failed.code, file_error_code(failed)) == ("RUNTIME_ERROR", "file_error")
