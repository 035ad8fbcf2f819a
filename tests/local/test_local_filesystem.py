"""LocalFileSystem: round trips, atomic writes, stat/list decisions, delete, download."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillruntime.core.errors import FileTooLargeError, RuntimeFileError, RuntimeFileNotFoundError
from skillruntime.local import LocalFileSystem


@pytest.fixture
def fs(tmp_path: Path) -> LocalFileSystem:
    return LocalFileSystem(str(tmp_path))


def test_binary_round_trip_and_relative_paths(fs: LocalFileSystem, tmp_path: Path) -> None:
    data = bytes(range(256)) * 3
    assert fs.write_bytes("dir/sub/data.bin", data) == len(data)
    assert (tmp_path / "dir" / "sub" / "data.bin").read_bytes() == data
    assert fs.read_bytes(str(tmp_path / "dir/sub/data.bin")) == data
    assert fs.read_text("dir/../dir/sub/data.bin", errors="replace")


def test_write_sets_exact_modes(fs: LocalFileSystem, tmp_path: Path) -> None:
    fs.write_text("plain.txt", "x")
    fs.write_bytes("tool.sh", b"#!/bin/sh\n", executable=True)
    assert stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "tool.sh").stat().st_mode) == 0o755
    info = fs.stat("tool.sh")
    assert info is not None
    assert info.is_executable
    assert fs.stat("plain.txt") is not None
    assert not fs.stat("plain.txt").is_executable  # type: ignore[union-attr]


def test_failed_stream_write_keeps_old_content_and_leaves_no_temp(
    fs: LocalFileSystem, tmp_path: Path
) -> None:
    fs.write_text("keep.txt", "old")

    def chunks() -> Iterator[bytes]:
        yield b"new partial"
        raise RuntimeError("source broke")

    with pytest.raises(RuntimeError, match="source broke"):
        fs.write_stream("keep.txt", chunks())
    assert (tmp_path / "keep.txt").read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["keep.txt"]


def test_streaming_read_in_chunks(fs: LocalFileSystem) -> None:
    fs.write_bytes("big.bin", b"a" * 10_000)
    chunks = list(fs.read_stream("big.bin", chunk_size=4096))
    assert [len(c) for c in chunks] == [4096, 4096, 1808]


def test_read_limit_and_missing_and_directory(fs: LocalFileSystem) -> None:
    fs.write_bytes("f.bin", b"x" * 100)
    with pytest.raises(FileTooLargeError):
        fs.read_bytes("f.bin", max_bytes=10)
    with pytest.raises(RuntimeFileNotFoundError):
        fs.read_bytes("nope")
    fs.make_directory("d")
    with pytest.raises(RuntimeFileNotFoundError):
        fs.read_bytes("d")


def test_stat_follows_links_but_reports_dangling_link(fs: LocalFileSystem, tmp_path: Path) -> None:
    fs.write_text("target.txt", "12345")
    (tmp_path / "link").symlink_to(tmp_path / "target.txt")
    (tmp_path / "dangling").symlink_to(tmp_path / "absent")
    linked = fs.stat("link")
    assert linked is not None
    assert linked.size == 5
    dangling = fs.stat("dangling")
    assert dangling is not None
    assert not dangling.is_directory
    assert fs.stat("absent") is None
    assert fs.stat("target.txt/below") is None
    fs.make_directory("dir")
    directory = fs.stat("dir")
    assert directory is not None
    assert directory.is_directory
    assert directory.size == 0
    assert directory.modified_time is not None


def test_list_directory_sorted_depth_limit_and_links(fs: LocalFileSystem, tmp_path: Path) -> None:
    for name in ("b/x.txt", "a/y.txt", "a/deep/z.txt", "a-c.txt"):
        fs.write_text(name, name)
    (tmp_path / "a" / "to-b").symlink_to(tmp_path / "b")
    root = str(tmp_path)
    names = [info.path[len(root) + 1 :] for info in fs.list_directory(root, depth=1)]
    assert names == ["a", "a-c.txt", "b"]
    deep = [info.path[len(root) + 1 :] for info in fs.list_directory(root, depth=3)]
    assert deep == [
        "a",
        "a-c.txt",
        "a/deep",
        "a/deep/z.txt",
        "a/to-b",
        "a/y.txt",
        "b",
        "b/x.txt",
    ]
    link = next(info for info in fs.list_directory("a") if info.name == "to-b")
    assert not link.is_directory
    limited = [info.path[len(root) + 1 :] for info in fs.list_directory(root, depth=3, limit=3)]
    assert limited == deep[:3]
    single = fs.list_directory("a-c.txt")
    assert [info.name for info in single] == ["a-c.txt"]
    with pytest.raises(RuntimeFileNotFoundError):
        fs.list_directory("missing")


def test_list_files_walks_only_files(fs: LocalFileSystem) -> None:
    for name in ("one.txt", "d/two.txt", "d/e/three.txt"):
        fs.write_text(name, "x")
    assert sorted(info.name for info in fs.list_files(".")) == ["one.txt", "three.txt", "two.txt"]


def test_delete_tree_file_link_and_missing(fs: LocalFileSystem, tmp_path: Path) -> None:
    fs.write_text("tree/a/b.txt", "x")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (tmp_path / "tree" / "link").symlink_to(outside)
    fs.delete("tree/link")
    assert outside.exists()
    fs.delete("tree")
    assert not (tmp_path / "tree").exists()
    fs.delete("tree")  # missing is fine
    fs.delete("outside.txt")
    assert not outside.exists()


def test_make_directory_is_idempotent_and_refuses_files(fs: LocalFileSystem) -> None:
    fs.make_directory("x/y/z")
    fs.make_directory("x/y/z")
    assert fs.stat("x/y/z") is not None
    fs.write_text("file", "x")
    with pytest.raises(RuntimeFileError):
        fs.make_directory("file")


def test_upload_keeps_executable_bit_and_replaces(fs: LocalFileSystem, tmp_path: Path) -> None:
    source = tmp_path / "src.sh"
    source.write_text("#!/bin/sh\n")
    source.chmod(0o700)
    assert fs.upload(source, "dest/run.sh") == len("#!/bin/sh\n")
    assert stat.S_IMODE((tmp_path / "dest" / "run.sh").stat().st_mode) == 0o755
    count = fs.upload_files([(source, "dest/copy.sh", False)])
    assert count == 1
    assert stat.S_IMODE((tmp_path / "dest" / "copy.sh").stat().st_mode) == 0o644
    source.write_text("#!/bin/sh\necho replaced\n")
    fs.upload(source, "dest/copy.sh")
    assert (tmp_path / "dest" / "copy.sh").read_text() == "#!/bin/sh\necho replaced\n"
    assert stat.S_IMODE((tmp_path / "dest" / "copy.sh").stat().st_mode) == 0o755
    with pytest.raises(RuntimeFileNotFoundError):
        fs.upload(tmp_path / "absent", "dest/x")
    assert sorted(os.listdir(tmp_path / "dest")) == ["copy.sh", "run.sh"]


def test_download_is_atomic(fs: LocalFileSystem, tmp_path: Path) -> None:
    fs.write_bytes("remote.bin", bytes([0, 1, 2, 3, 127, 255]))
    local = tmp_path / "out" / "local.bin"
    assert fs.download("remote.bin", local) == local
    assert local.read_bytes() == bytes([0, 1, 2, 3, 127, 255])
    local.write_bytes(b"previous")
    with pytest.raises(RuntimeFileNotFoundError):
        fs.download("missing.bin", local)
    assert local.read_bytes() == b"previous"
    assert sorted(os.listdir(local.parent)) == ["local.bin"]
