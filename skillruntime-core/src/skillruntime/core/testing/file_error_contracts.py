"""Typed file errors: each failure kind is its own class with a stable ``code``.

A model-facing adapter maps errors from the type alone (:func:`~skillruntime.core.errors.
file_error_code`), so every runtime must raise the same class for the same failure, whatever its
server answers: a directory where a file is needed, a regular file where a directory is needed,
a missing path, and (where the suite can produce one) a directory its user cannot write.
"""

from __future__ import annotations

import contextlib
import io
import posixpath
from collections.abc import Callable

import pytest

from ..errors import (
    NotADirectoryFileError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    RuntimeIsADirectoryError,
    RuntimePermissionError,
    file_error_code,
)
from .base import ConformanceBase
from .context import ConformanceContext

__all__ = ["FileErrorContracts"]


def _raised(operation: Callable[[], object]) -> RuntimeFileError:
    """The :class:`RuntimeFileError` ``operation`` raised (a failure when it raised none)."""
    with pytest.raises(RuntimeFileError) as caught:
        operation()
    return caught.value


def _assert_kind(error: RuntimeFileError, kind: type[RuntimeFileError], code: str) -> None:
    assert isinstance(error, kind), f"expected {kind.__name__}, got {type(error).__name__}: {error}"
    assert error.kind == code
    assert file_error_code(error) == code


class FileErrorContracts(ConformanceBase):
    """Failures of the file system are typed and carry the derived code."""

    def test_missing_paths_raise_file_not_found_with_its_code(
        self, conformance: ConformanceContext
    ) -> None:
        fs = conformance.runtime().get_file_system()
        error = _raised(lambda: fs.read_bytes("kit-missing.txt"))
        _assert_kind(error, RuntimeFileNotFoundError, "file_not_found")
        assert error.path == posixpath.join(conformance.workspace(), "kit-missing.txt")
        for operation in (
            lambda: fs.read_text("kit-missing/deeper.txt"),
            lambda: fs.list_directory("kit-missing-dir"),
            lambda: fs.download("kit-missing.txt", io.BytesIO()),
        ):
            _assert_kind(_raised(operation), RuntimeFileNotFoundError, "file_not_found")

    def test_reading_a_directory_is_an_is_a_directory_error(
        self, conformance: ConformanceContext
    ) -> None:
        fs = conformance.runtime().get_file_system()
        fs.write_text("kit-dir/inside.txt", "x")
        target = conformance.tmp_path / "kit-downloads" / "dir.bin"
        sink = io.BytesIO()
        for operation in (
            lambda: fs.read_text("kit-dir"),
            lambda: fs.read_bytes("kit-dir"),
            lambda: b"".join(fs.read_stream("kit-dir")),
            lambda: fs.download("kit-dir", target),
            lambda: fs.download("kit-dir", sink),
        ):
            error = _raised(operation)
            _assert_kind(error, RuntimeIsADirectoryError, "is_directory")
            assert isinstance(error, RuntimeFileNotFoundError), "is-a-directory is a not-found"
        assert not target.exists()
        assert not any(target.parent.iterdir()), "a failed download left a file behind"
        assert sink.getvalue() == b""

    def test_a_path_through_a_regular_file_is_not_a_directory(
        self, conformance: ConformanceContext
    ) -> None:
        fs = conformance.runtime().get_file_system()
        fs.write_text("kit-plain.txt", "plain\n")
        for operation in (
            lambda: fs.list_directory("kit-plain.txt/below"),
            lambda: fs.write_text("kit-plain.txt/inner.txt", "x"),
            lambda: fs.write_text("kit-plain.txt/deeper/inner.txt", "x"),
        ):
            _assert_kind(_raised(operation), NotADirectoryFileError, "invalid_path")
        assert fs.read_text("kit-plain.txt") == "plain\n"
        assert fs.stat("kit-plain.txt/inner.txt") is None

    def test_writes_into_an_unwritable_directory_are_permission_denied(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = conformance.runtime()
        fs = runtime.get_file_system()
        fs.write_text("kit-locked/existing.txt", "kept\n")
        locked = posixpath.join(conformance.workspace(), "kit-locked")
        undo = self.make_directory_unwritable(runtime, locked)
        conformance.add_cleanup(undo)
        try:
            for operation in (
                lambda: fs.write_text("kit-locked/new.txt", "x"),
                lambda: fs.write_bytes("kit-locked/new.bin", b"\x00\x01", executable=True),
                lambda: fs.make_directory("kit-locked/sub"),
                lambda: fs.delete("kit-locked/existing.txt"),
            ):
                _assert_kind(_raised(operation), RuntimePermissionError, "permission_denied")
            assert fs.read_text("kit-locked/existing.txt") == "kept\n"
            assert fs.stat("kit-locked/new.txt") is None
            assert fs.stat("kit-locked/sub") is None
        finally:
            with contextlib.suppress(Exception):
                undo()
