"""The typed file errors: codes fixed by class, OSErrors mapped by errno."""

from __future__ import annotations

import errno

import pytest

from skillruntime.core.errors import (
    FileTooLargeError,
    InvalidPathError,
    NotADirectoryFileError,
    NotRegularFileError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    RuntimeIsADirectoryError,
    RuntimePermissionError,
    SkillRuntimeError,
    WorkspaceEscapeError,
    file_error_code,
    file_error_from_os_error,
)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (RuntimeFileNotFoundError("x"), "file_not_found"),
        (RuntimeIsADirectoryError("x"), "is_directory"),
        (NotRegularFileError("x"), "invalid_path"),
        (NotADirectoryFileError("x"), "invalid_path"),
        (RuntimePermissionError("x"), "permission_denied"),
        (InvalidPathError("x"), "invalid_path"),
        (FileTooLargeError("x"), "file_too_large"),
        (RuntimeFileError("x"), "file_error"),
        (WorkspaceEscapeError("x"), "invalid_path"),
        (SkillRuntimeError("x"), None),
        (OSError("x"), None),
    ],
)
def test_code_follows_the_type(error: BaseException, code: str | None) -> None:
    assert file_error_code(error) == code


def test_not_found_kinds_stay_not_found_for_existing_callers() -> None:
    assert isinstance(RuntimeIsADirectoryError("x"), RuntimeFileNotFoundError)
    assert isinstance(NotRegularFileError("x"), RuntimeFileNotFoundError)
    assert isinstance(RuntimeIsADirectoryError("x"), IsADirectoryError)
    assert isinstance(RuntimePermissionError("x"), PermissionError)


@pytest.mark.parametrize(
    ("number", "cls"),
    [
        (errno.ENOENT, RuntimeFileNotFoundError),
        (errno.EISDIR, RuntimeIsADirectoryError),
        (errno.ENOTDIR, NotADirectoryFileError),
        (errno.EACCES, RuntimePermissionError),
        (errno.EPERM, RuntimePermissionError),
        (errno.EROFS, RuntimePermissionError),
        (errno.ELOOP, InvalidPathError),
        (errno.ENAMETOOLONG, InvalidPathError),
        (errno.EIO, RuntimeFileError),
    ],
)
def test_os_errors_map_by_errno(number: int, cls: type[RuntimeFileError]) -> None:
    mapped = file_error_from_os_error(OSError(number, "reason"), "/w/a.txt", operation="read")
    assert type(mapped) is cls
    assert mapped.path == "/w/a.txt"
    assert str(mapped) == "Cannot read /w/a.txt: reason"
