"""`skillruntime files ls|get|put|rm` against the local runtime."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillruntime.core.cli import cli


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


def files(runner: CliRunner, work: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, ["files", args[0], "-o", f"work_root={work}", *args[1:]])
    return result.exit_code, result.stdout, result.stderr


def test_put_then_ls_shows_the_file_under_the_working_directory(
    runner: CliRunner, work: Path, tmp_path: Path
) -> None:
    local = tmp_path / "tool.sh"
    local.write_text("#!/bin/sh\necho hi\n")
    local.chmod(0o755)

    code, _, err = files(runner, work, "put", str(local), "bin/tool.sh")
    assert code == 0, err
    code, out, _ = files(runner, work, "ls", "--depth", "2")

    assert code == 0
    assert (work / "bin" / "tool.sh").read_text() == "#!/bin/sh\necho hi\n"
    assert (work / "bin" / "tool.sh").stat().st_mode & 0o111
    assert f"d {0:>12} {work}/bin/" in out
    assert f"x {18:>12} {work}/bin/tool.sh" in out


def test_ls_json(runner: CliRunner, work: Path) -> None:
    (work / "a.txt").write_text("abc")

    code, out, _ = files(runner, work, "ls", "--json")

    assert code == 0
    [entry] = json.loads(out)
    assert entry["path"] == f"{work}/a.txt"
    assert entry["size"] == 3
    assert entry["is_directory"] is False


def test_get_downloads_to_a_file_and_to_stdout(
    runner: CliRunner, work: Path, tmp_path: Path
) -> None:
    (work / "data.bin").write_bytes(b"\x00\xffbinary\n")
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "copy.bin"

    code, _, err = files(runner, work, "get", "data.bin", str(target))
    assert code == 0, err
    result = runner.invoke(cli, ["files", "get", "-o", f"work_root={work}", "data.bin", "-"])

    assert target.read_bytes() == b"\x00\xffbinary\n"
    assert result.stdout_bytes == b"\x00\xffbinary\n"


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    """Set the process umask for the test; the previous one is restored."""
    previous = os.umask(0o022)
    os.umask(previous)

    def set_umask(value: int) -> None:
        os.umask(value)

    yield set_umask
    os.umask(previous)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
@pytest.mark.parametrize("progress", ["--no-progress", "--progress"])
def test_get_creates_the_file_with_the_mode_cp_gives(
    runner: CliRunner,
    work: Path,
    tmp_path: Path,
    umask: Callable[[int], None],
    mask: int,
    progress: str,
) -> None:
    (work / "data.txt").write_text("data\n")
    (work / "data.txt").chmod(0o600)  # the source's mode does not matter, as with cp
    umask(mask)
    target = tmp_path / "copy.txt"

    code, _, err = files(runner, work, "get", progress, "data.txt", str(target))

    assert code == 0, err
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    assert sorted(path.name for path in tmp_path.iterdir()) == ["copy.txt", "work"]


def test_the_library_download_respects_the_umask(
    work: Path, tmp_path: Path, umask: Callable[[int], None]
) -> None:
    import asyncio

    from skillruntime.core.plugins.registry import create_async_runtime, create_runtime

    (work / "data.txt").write_text("data\n")
    umask(0o022)
    with create_runtime("local", work_root=str(work)) as runtime:
        runtime.get_file_system().download("data.txt", tmp_path / "sync" / "copy.txt")

    async def download() -> None:
        async with create_async_runtime("local", work_root=str(work)) as runtime:
            await (await runtime.get_file_system()).download(
                "data.txt", tmp_path / "async" / "copy.txt"
            )

    asyncio.run(download())
    for name in ("sync", "async"):
        assert stat.S_IMODE((tmp_path / name / "copy.txt").stat().st_mode) == 0o644


@pytest.mark.parametrize("progress", ["--no-progress", "--progress"])
def test_get_refuses_a_missing_directory_as_cp_does(
    runner: CliRunner, work: Path, tmp_path: Path, progress: str
) -> None:
    (work / "data.txt").write_text("data\n")
    target = tmp_path / "missing" / "copy.txt"

    code, out, err = files(runner, work, "get", progress, "data.txt", str(target))

    assert code == 1
    assert err.splitlines() == [
        f"Error: cannot write {target}: the directory {target.parent} does not exist"
    ]
    assert out == ""
    assert not target.parent.exists()


def test_get_of_a_missing_file_fails_cleanly(runner: CliRunner, work: Path, tmp_path: Path) -> None:
    code, _, err = files(runner, work, "get", "absent.txt", str(tmp_path / "x"))

    assert code == 1
    assert err.startswith("Error: ")
    assert "Traceback" not in err
    assert not (tmp_path / "x").exists()


def test_rm_deletes_trees_and_ignores_missing_paths(runner: CliRunner, work: Path) -> None:
    (work / "d" / "e").mkdir(parents=True)
    (work / "d" / "e" / "f.txt").write_text("x")
    (work / "keep.txt").write_text("x")

    code, _, err = files(runner, work, "rm", "d", "never-existed")

    assert code == 0, err
    assert not (work / "d").exists()
    assert (work / "keep.txt").exists()


def test_conversation_scopes_paths_and_rejects_escapes(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "conversations"
    base = ["-o", f"conversations_root={root}", "--conversation", "conv-1"]
    local = tmp_path / "note.txt"
    local.write_text("note")

    put = runner.invoke(cli, ["files", "put", *base, str(local), "note.txt"])
    escape = runner.invoke(cli, ["files", "rm", *base, "../../outside"])

    assert put.exit_code == 0, put.output
    assert (root / "conv-1" / "note.txt").read_text() == "note"
    assert escape.exit_code == 1
    assert escape.stderr.startswith("Error: ")


# ------------------------------------------------- files get decides like cp (issue 45, 13)


@pytest.fixture
def remote(work: Path) -> Path:
    """``data.txt`` in the runtime, executable (whose mode a download must not copy)."""
    path = work / "data.txt"
    path.write_text("new content\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("progress", ["--no-progress", "--progress"])
@pytest.mark.parametrize("slash", ["", "/"])
def test_get_into_a_directory_writes_the_file_under_its_name(
    runner: CliRunner, work: Path, tmp_path: Path, remote: Path, progress: str, slash: str
) -> None:
    shots = tmp_path / "shots"
    shots.mkdir()

    code, _, err = files(runner, work, "get", progress, "data.txt", f"{shots}{slash}")

    # this exited 2 ("is a directory") where cp writes into the directory
    assert code == 0, err
    assert (shots / "data.txt").read_text() == "new content\n"
    assert [path.name for path in shots.iterdir()] == ["data.txt"]


def test_get_into_a_link_to_a_directory_writes_into_that_directory(
    runner: CliRunner, work: Path, tmp_path: Path, remote: Path
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")

    code, _, err = files(runner, work, "get", "sub/../data.txt", str(tmp_path / "link"))

    assert code == 0, err
    assert (tmp_path / "real" / "data.txt").read_text() == "new content\n"


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_get_to_a_slash_that_is_no_directory_fails_as_cp_does(
    runner: CliRunner, work: Path, tmp_path: Path, remote: Path, kind: str
) -> None:
    target = tmp_path / "target"
    if kind == "file":
        target.write_text("kept\n")

    code, out, err = files(runner, work, "get", "data.txt", f"{target}/")

    assert code == 1
    what = "is not a directory" if kind == "file" else "does not exist"
    assert err.splitlines() == [f"Error: cannot write into {target}/: it {what}"]
    assert out == ""
    assert (target.read_text() == "kept\n") if kind == "file" else not target.exists()


@pytest.mark.parametrize("progress", ["--no-progress", "--progress"])
def test_get_over_an_existing_file_writes_it_in_place(
    runner: CliRunner, work: Path, tmp_path: Path, remote: Path, progress: str
) -> None:
    target = tmp_path / "copy.txt"
    target.write_text("old content that is longer than the new one\n")
    target.chmod(0o640)
    hard_link = tmp_path / "hard.txt"
    os.link(target, hard_link)
    inode = target.stat().st_ino

    code, _, err = files(runner, work, "get", progress, "data.txt", str(target))

    # the .part file used to be renamed over it: mode 0644 (umask), a new inode, the link cut
    assert code == 0, err
    assert target.read_text() == "new content\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert target.stat().st_ino == inode
    assert hard_link.read_text() == "new content\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["copy.txt", "hard.txt", "work"]


@pytest.mark.parametrize("progress", ["--no-progress", "--progress"])
def test_get_writes_through_a_link_to_a_file_and_keeps_the_link(
    runner: CliRunner, work: Path, tmp_path: Path, remote: Path, progress: str
) -> None:
    real = tmp_path / "real.txt"
    real.write_text("old\n")
    real.chmod(0o600)
    link = tmp_path / "link.txt"
    link.symlink_to(real)

    code, _, err = files(runner, work, "get", progress, "data.txt", str(link))

    assert code == 0, err
    assert link.is_symlink()
    assert os.readlink(link) == str(real)
    assert real.read_text() == "new content\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o600


def test_get_refuses_a_dangling_link_as_cp_does(
    runner: CliRunner, work: Path, tmp_path: Path, remote: Path
) -> None:
    link = tmp_path / "link.txt"
    link.symlink_to(tmp_path / "nowhere.txt")

    code, _, err = files(runner, work, "get", "data.txt", str(link))

    assert code == 1
    assert err.splitlines() == [f"Error: not writing through the dangling link {link} (as cp)"]
    assert link.is_symlink()
    assert not (tmp_path / "nowhere.txt").exists()


def test_a_failed_get_leaves_an_existing_file_as_it_was(
    runner: CliRunner, work: Path, tmp_path: Path
) -> None:
    target = tmp_path / "copy.txt"
    target.write_text("precious\n")

    code, _, err = files(runner, work, "get", "absent.txt", str(target))

    assert code == 1
    assert err.startswith("Error: ")
    assert target.read_text() == "precious\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["copy.txt", "work"]


def test_get_of_a_file_onto_itself_keeps_its_content(
    runner: CliRunner, work: Path, remote: Path
) -> None:
    # with the local runtime, REMOTE and LOCAL can be one file: it is read whole first
    code, _, err = files(runner, work, "get", "data.txt", str(remote))

    assert code == 0, err
    assert remote.read_text() == "new content\n"
    assert stat.S_IMODE(remote.stat().st_mode) == 0o755


@contextlib.contextmanager
def _unwritable(path: Path) -> Iterator[str]:
    """``path`` made unwritable for this process; yields the error text a write then gets.
    Root ignores modes, so for root the file is made immutable (``chattr +i``, ext4 and the
    like), which root obeys too."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        yield "Permission denied"
        return
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield "Operation not permitted"
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_get_over_a_file_this_user_may_not_write_fails_before_downloading(
    runner: CliRunner, work: Path, tmp_path: Path, remote: Path
) -> None:
    target = tmp_path / "copy.txt"
    target.write_text("read only\n")

    with _unwritable(target) as reason:
        code, _, err = files(runner, work, "get", "data.txt", str(target))

    assert code == 1
    assert reason in err
    assert target.read_text() == "read only\n"


def test_get_to_a_pipe_writes_to_it_and_leaves_it_a_pipe(
    runner: CliRunner, work: Path, tmp_path: Path, remote: Path
) -> None:
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()

    code, _, err = files(runner, work, "get", "data.txt", str(fifo))
    reader.join(10)

    # the .part file used to be renamed over it (as over /dev/null, when run as root)
    assert code == 0, err
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert received == [b"new content\n"]


def test_get_needs_a_file_name_to_write_into_a_directory(
    runner: CliRunner, work: Path, tmp_path: Path
) -> None:
    code, _, err = files(runner, work, "get", ".", str(tmp_path))

    assert code == 2
    assert err.startswith("Error: '.' names no file to copy into ")


def test_get_does_not_replace_a_directory_of_the_file_s_name(
    runner: CliRunner, work: Path, tmp_path: Path, remote: Path
) -> None:
    (tmp_path / "out" / "data.txt").mkdir(parents=True)

    code, _, err = files(runner, work, "get", "data.txt", str(tmp_path / "out"))

    assert code == 1
    assert err.splitlines() == [
        f"Error: cannot overwrite the directory {tmp_path / 'out' / 'data.txt'} with a file"
    ]
