"""Contract 5 (``docs/architecture.md``): the runtime file system."""

from __future__ import annotations

import contextlib
import hashlib
import io
import posixpath
from collections.abc import Iterator, Sequence

import pytest

from ..errors import FileTooLargeError, RuntimeFileError, RuntimeFileNotFoundError
from ..models import FileInfo
from .base import ConformanceBase
from .context import ConformanceContext

__all__ = ["FileSystemContracts"]

ALL_BYTE_VALUES = bytes(range(256)) * 16 + bytes(reversed(range(256)))
TEXT = "line one\nligne deux — ✓\n\tindented 🎉\r\nno final newline"


def _blocks(total: int, block: int = 1024 * 1024) -> Iterator[bytes]:
    """Deterministic, non-repeating-per-block content of ``total`` bytes."""
    produced = 0
    index = 0
    while produced < total:
        seed = hashlib.sha256(index.to_bytes(8, "big")).digest()
        chunk = (seed * (block // len(seed) + 1))[: min(block, total - produced)]
        yield chunk
        produced += len(chunk)
        index += 1


class FileSystemContracts(ConformanceBase):
    """read/write/stream/download/upload/stat/list/delete on the runtime file system."""

    def test_text_round_trip(self, conformance: ConformanceContext) -> None:
        fs = conformance.runtime().get_file_system()
        written = fs.write_text("docs/text.txt", TEXT)
        assert written == len(TEXT.encode("utf-8"))
        assert fs.read_text("docs/text.txt") == TEXT

    def test_binary_round_trip_of_all_byte_values(self, conformance: ConformanceContext) -> None:
        runtime = conformance.runtime()
        fs = runtime.get_file_system()
        fs.write_bytes("bin/all.bin", ALL_BYTE_VALUES)
        assert fs.read_bytes("bin/all.bin") == ALL_BYTE_VALUES
        assert b"".join(fs.read_stream("bin/all.bin")) == ALL_BYTE_VALUES
        size = conformance.check_output(runtime, "wc -c < bin/all.bin").strip()
        assert int(size) == len(ALL_BYTE_VALUES), "the shell sees a different file"

    def test_write_replaces_content(self, conformance: ConformanceContext) -> None:
        fs = conformance.runtime().get_file_system()
        fs.write_text("replace.txt", "a much longer first version\n")
        fs.write_text("replace.txt", "short\n")
        assert fs.read_text("replace.txt") == "short\n"

    def test_write_creates_parent_directories(self, conformance: ConformanceContext) -> None:
        fs = conformance.runtime().get_file_system()
        fs.write_text("deep/er/and/deeper/file.txt", "x")
        info = fs.stat("deep/er/and")
        assert info is not None
        assert info.is_directory
        assert fs.read_text("deep/er/and/deeper/file.txt") == "x"

    def test_read_over_the_limit_raises_file_too_large(
        self, conformance: ConformanceContext
    ) -> None:
        fs = conformance.runtime().get_file_system()
        fs.write_bytes("limited.bin", b"a" * 5000)
        assert fs.read_bytes("limited.bin", max_bytes=5000) == b"a" * 5000
        with pytest.raises(FileTooLargeError) as caught:
            fs.read_bytes("limited.bin", max_bytes=4999)
        assert caught.value.limit == 4999
        with pytest.raises(FileTooLargeError):
            fs.read_text("limited.bin", max_bytes=100)

    def test_read_text_of_invalid_utf8_raises_runtime_file_error(
        self, conformance: ConformanceContext
    ) -> None:
        fs = conformance.runtime().get_file_system()
        fs.write_bytes("latin.txt", "café".encode("latin-1"))
        with pytest.raises(RuntimeFileError, match=r"latin\.txt"):
            fs.read_text("latin.txt")
        assert fs.read_text("latin.txt", encoding="latin-1") == "café"

    def test_read_of_a_missing_file_raises_file_not_found(
        self, conformance: ConformanceContext
    ) -> None:
        fs = conformance.runtime().get_file_system()
        with pytest.raises(RuntimeFileNotFoundError):
            fs.read_text("missing.txt")
        with pytest.raises(RuntimeFileNotFoundError):
            fs.read_bytes("missing/deeper.bin")
        with pytest.raises(RuntimeFileNotFoundError):
            b"".join(fs.read_stream("missing.bin"))
        fs.make_directory("a-directory")
        with pytest.raises(RuntimeFileNotFoundError):
            fs.read_bytes("a-directory")

    def test_large_file_streams_in_bounded_chunks(self, conformance: ConformanceContext) -> None:
        runtime = conformance.runtime()
        fs = runtime.get_file_system()
        size = self.large_file_bytes
        expected = hashlib.sha256()
        for block in _blocks(size):
            expected.update(block)
        assert fs.write_stream("large/blob.bin", _blocks(size)) == size
        info = fs.stat("large/blob.bin")
        assert info is not None
        assert info.size == size
        actual = hashlib.sha256()
        chunks = 0
        largest = 0
        with contextlib.closing(fs.read_stream("large/blob.bin", 64 * 1024)) as stream:
            for chunk in stream:
                actual.update(chunk)
                chunks += 1
                largest = max(largest, len(chunk))
        assert actual.hexdigest() == expected.hexdigest()
        assert chunks > 1
        assert largest <= 1024 * 1024, f"a chunk of {largest} bytes is not bounded"

    def test_download_to_a_path_and_to_a_stream(self, conformance: ConformanceContext) -> None:
        fs = conformance.runtime().get_file_system()
        fs.write_bytes("out/result.bin", ALL_BYTE_VALUES)
        destination = conformance.tmp_path / "downloads" / "result.bin"
        returned = fs.download("out/result.bin", destination)
        assert returned is not None
        assert returned.resolve() == destination.resolve()
        assert destination.read_bytes() == ALL_BYTE_VALUES
        sink = io.BytesIO()
        assert fs.download("out/result.bin", sink) is None
        assert sink.getvalue() == ALL_BYTE_VALUES
        assert not sink.closed
        leftovers = [p.name for p in destination.parent.iterdir() if p.name != "result.bin"]
        assert leftovers == []

    def test_failed_download_leaves_no_partial_file(self, conformance: ConformanceContext) -> None:
        fs = conformance.runtime().get_file_system()
        target_dir = conformance.tmp_path / "failed-downloads"
        target_dir.mkdir()
        fresh = target_dir / "fresh.bin"
        with pytest.raises(RuntimeFileNotFoundError):
            fs.download("no-such-file.bin", fresh)
        existing = target_dir / "existing.bin"
        existing.write_bytes(b"previous content")
        with pytest.raises(RuntimeFileNotFoundError):
            fs.download("no-such-file.bin", existing)
        assert sorted(p.name for p in target_dir.iterdir()) == ["existing.bin"]
        assert existing.read_bytes() == b"previous content"

    def test_stat_of_missing_file_and_directory(self, conformance: ConformanceContext) -> None:
        fs = conformance.runtime().get_file_system()
        assert fs.stat("nothing-here") is None
        assert not fs.exists("nothing-here")
        fs.write_bytes("stat/file.bin", b"12345")
        info = fs.stat("stat/file.bin")
        assert info is not None
        assert not info.is_directory
        assert info.size == 5
        assert info.path == posixpath.join(conformance.workspace(), "stat/file.bin")
        assert info.name == "file.bin"
        directory = fs.stat("stat")
        assert directory is not None
        assert directory.is_directory
        assert fs.exists("stat/file.bin")

    def test_list_directory_honours_depth_and_limit(self, conformance: ConformanceContext) -> None:
        fs = conformance.runtime().get_file_system()
        for path in ("tree/a.txt", "tree/b/b1.txt", "tree/b/c/c1.txt", "tree/d.txt"):
            fs.write_text(path, path)
        ws = conformance.workspace()

        def names(entries: Sequence[FileInfo]) -> list[str]:
            return [e.path[len(ws) + len("/tree/") :] for e in entries]

        level_one = fs.list_directory("tree", depth=1)
        assert names(level_one) == ["a.txt", "b", "d.txt"]
        assert [e.is_directory for e in level_one] == [False, True, False]
        level_two = fs.list_directory("tree", depth=2)
        assert set(names(level_two)) == {"a.txt", "b", "b/b1.txt", "b/c", "d.txt"}
        everything = fs.list_directory("tree", depth=5)
        assert set(names(everything)) == {"a.txt", "b", "b/b1.txt", "b/c", "b/c/c1.txt", "d.txt"}
        assert len(fs.list_directory("tree", depth=5, limit=2)) == 2
        single = fs.list_directory("tree/a.txt")
        assert [e.path for e in single] == [posixpath.join(ws, "tree/a.txt")]
        with pytest.raises(RuntimeFileNotFoundError):
            fs.list_directory("no-such-dir")

    def test_list_files_returns_regular_files_only(self, conformance: ConformanceContext) -> None:
        fs = conformance.runtime().get_file_system()
        for path in ("lf/x.txt", "lf/sub/y.txt", "lf/sub/deeper/z.txt"):
            fs.write_text(path, "content")
        fs.make_directory("lf/empty")
        found = fs.list_files("lf")
        ws = conformance.workspace()
        assert {e.path for e in found} == {
            posixpath.join(ws, p) for p in ("lf/x.txt", "lf/sub/y.txt", "lf/sub/deeper/z.txt")
        }
        assert not any(e.is_directory for e in found)
        assert len(fs.list_files("lf", limit=1)) == 1

    def test_delete_of_a_missing_path_succeeds_and_tree_is_removed(
        self, conformance: ConformanceContext
    ) -> None:
        fs = conformance.runtime().get_file_system()
        fs.delete("never-existed")
        fs.delete("never/existed/either.txt")
        fs.write_text("doomed/a/b.txt", "x")
        fs.write_text("doomed/c.txt", "y")
        fs.delete("doomed")
        assert fs.stat("doomed") is None
        fs.write_text("single.txt", "z")
        fs.delete("single.txt")
        assert fs.stat("single.txt") is None

    def test_make_directory_is_idempotent(self, conformance: ConformanceContext) -> None:
        fs = conformance.runtime().get_file_system()
        fs.make_directory("made/here")
        fs.make_directory("made/here")
        info = fs.stat("made/here")
        assert info is not None
        assert info.is_directory

    def test_upload_keeps_the_executable_bit(self, conformance: ConformanceContext) -> None:
        runtime = conformance.runtime()
        fs = runtime.get_file_system()
        script = conformance.tmp_path / "tool.sh"
        script.write_text("#!/bin/sh\necho uploaded-tool-ran\n")
        script.chmod(0o755)
        plain = conformance.tmp_path / "plain.sh"
        plain.write_text("#!/bin/sh\necho should-not-run\n")
        plain.chmod(0o644)
        fs.upload(script, "bin/tool.sh")
        fs.upload(plain, "bin/plain.sh")
        assert conformance.check_output(runtime, "./bin/tool.sh") == "uploaded-tool-ran\n"
        assert conformance.run(runtime, "./bin/plain.sh").exit_code != 0
        fs.write_bytes("bin/explicit.sh", b"#!/bin/sh\necho explicit\n", executable=True)
        assert conformance.check_output(runtime, "./bin/explicit.sh") == "explicit\n"
