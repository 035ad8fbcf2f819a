"""Every file operation of the AIO runtime on names that break naive code: newlines, tabs,
undecodable bytes (:func:`odd_names`), shell metacharacters (:func:`hostile_names`) and names
outside Latin-1. The double used to drop the connection on a download of ``ファイル.txt`` (its
``Content-Disposition`` could not be encoded), so no such file had ever been downloaded here."""

from __future__ import annotations

import asyncio
import posixpath
import uuid
from pathlib import Path

import pytest

from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime, AsyncAioSkillRuntime
from skillruntime.core.errors import RuntimeFileError
from skillruntime.core.files.search import GlobQuery, GrepQuery
from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.core.testing.search_contracts import hostile_names, odd_names

ROOT = "/home/gem/workspace/conversations"

NON_LATIN1_NAMES = (
    "ファイル.txt",
    "文件 名.md",
    "😀 emoji.txt",
    "Ωμέγα.txt",
    "cafe\u0301 decomposed.txt",  # NFD: "e" and a combining accent, kept as sent
    "café.txt",  # in Latin-1, but not ASCII
    "ファイル\n改行.txt",
)
NAMES = NON_LATIN1_NAMES + odd_names() + hostile_names()


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _body(name: str) -> bytes:
    """Text naming the file (UTF-8: grep skips undecodable files)."""
    return b"needle in " + name.encode("utf-8", "backslashreplace") + b"\n"


@pytest.fixture(params=["aio_bash", "aio_shell"])
def double(request: pytest.FixtureRequest) -> AioDouble:
    """A current image and one without ``/v1/bash`` (commands over ``/v1/shell``)."""
    value: AioDouble = request.getfixturevalue(request.param)
    return value


def _every_operation(fs: SkillRuntimeFileSystem, name: str, tmp_path: Path) -> None:
    base = f"names-{uuid.uuid4().hex[:8]}"
    fs.make_directory(base)
    path = f"{base}/{name}"
    data = _body(name)

    assert fs.write_bytes(path, data) == len(data)  # write
    info = fs.stat(path)  # stat
    assert info is not None
    assert not info.is_directory
    assert info.size == len(data)
    assert posixpath.basename(info.path) == name
    assert [entry.path for entry in fs.list_directory(base)] == [info.path]  # list
    root = fs.stat(base)
    assert root is not None
    globbed = fs.glob(root, GlobQuery("**/*"))  # glob
    assert [entry.path for entry in globbed.entries] == [info.path]
    assert fs.grep(root, GrepQuery("needle")).entries == [info.path]  # grep

    local = tmp_path / name
    local.write_bytes(b"uploaded " + data)
    directory = f"{base}/dir/{name}"
    fs.make_directory(directory)  # mkdir
    made = fs.stat(directory)
    assert made is not None
    assert made.is_directory
    uploaded = f"{directory}/{name}"
    fs.upload(local, uploaded)  # upload
    assert fs.stat(uploaded) is not None
    assert [entry.path for entry in fs.list_directory(directory)] == [fs.join(made.path, name)]

    target = tmp_path / "downloads" / name
    if _utf8(name):
        assert fs.read_bytes(path) == data  # read
        assert fs.read_bytes(uploaded) == b"uploaded " + data
        assert fs.download(path, target) == target.absolute()  # download
        assert target.read_bytes() == data
    else:  # the download endpoint takes UTF-8 paths only: refused before a request
        for reach in (lambda: fs.read_bytes(path), lambda: fs.download(path, target)):
            with pytest.raises(RuntimeFileError, match="UTF-8 paths only"):
                reach()
        assert not target.exists()

    fs.delete(path)  # delete
    assert fs.stat(path) is None
    fs.delete(directory)
    assert fs.stat(directory) is None
    assert fs.stat(uploaded) is None
    assert [posixpath.basename(entry.path) for entry in fs.list_directory(base)] == ["dir"]


@pytest.mark.parametrize("name", NAMES, ids=[ascii(name) for name in NAMES])
def test_every_file_operation_reaches_the_exact_name(
    double: AioDouble, name: str, tmp_path: Path
) -> None:
    with AioSandboxSkillRuntime(
        base_url=double.url,
        token=double.token,
        conversation_id=f"names-{uuid.uuid4().hex[:10]}",
        conversations_root=ROOT,
        retry_attempts=1,  # a dropped download is not hidden by a retry
    ) as runtime:
        _every_operation(runtime.get_file_system(), name, tmp_path)


def test_the_async_runtime_downloads_names_outside_latin_1(
    aio_bash: AioDouble, tmp_path: Path
) -> None:
    async def main() -> None:
        async with AsyncAioSkillRuntime(
            base_url=aio_bash.url,
            token=aio_bash.token,
            conversation_id=f"names-{uuid.uuid4().hex[:10]}",
            conversations_root=ROOT,
            retry_attempts=1,
        ) as runtime:
            fs = await runtime.get_file_system()
            for index, name in enumerate(NON_LATIN1_NAMES):
                data = _body(name)
                await fs.write_bytes(f"u/{name}", data)
                assert await fs.read_bytes(f"u/{name}") == data
                target = tmp_path / str(index) / name
                await fs.download(f"u/{name}", target)
                assert target.read_bytes() == data
            listed = await fs.list_directory("u")
            assert sorted(posixpath.basename(info.path) for info in listed) == sorted(
                NON_LATIN1_NAMES
            )

    asyncio.run(main())
