"""The typed file errors: codes fixed by class, OSErrors mapped by errno."""

from __future__ import annotations

import errno

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
    printable,
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


@given(text=st.text())
def test_printable_text_encodes_strictly_and_holds_no_control_character(text: str) -> None:
    rendered = printable(text)
    rendered.encode("utf-8")
    assert rendered.isprintable()
    if text.isprintable() and "\\" not in text:
        assert rendered == text


@given(first=st.text(), second=st.text())
def test_distinct_texts_render_distinctly(first: str, second: str) -> None:
    assert (printable(first) == printable(second)) == (first == second)


def test_printable_writes_undecodable_bytes_controls_and_backslashes_as_escapes() -> None:
    assert printable("a\udcffb\ud800\x1b[1m\n\t\\x\u0085") == (
        "a\\xffb\\ud800\\x1b[1m\\n\\t\\\\x\\u0085"
    )
    assert printable("/w/é ok.txt") == "/w/é ok.txt"


def test_os_errors_keep_a_hostile_path_but_print_it_escaped() -> None:
    path = "/w/\udcff\n"
    mapped = file_error_from_os_error(OSError(errno.ENOENT, "gone"), path, operation="read")
    assert mapped.path == path
    assert str(mapped) == "Cannot read /w/\\xff\\n: gone"
