"""FIFOs, sockets and devices are refused by reads, downloads and the tools, never opened.

Before, ``mkfifo p`` followed by a read, a download, the ``read``/``edit`` tools or a ``grep`` over
the directory blocked forever. Every runtime now refuses such an entry with
:class:`NotRegularFileError`, marks it ``is_special`` in ``stat`` and listings, and a write
replaces it with a regular file without opening it.
"""

from __future__ import annotations

import asyncio
import io
import os
import socket
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doubles.aio import AioDouble
from doubles.opensandbox import OpenSandboxDouble
from skillruntime.aio import AioSandboxSkillRuntime, AsyncAioSkillRuntime
from skillruntime.core.errors import NotRegularFileError
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.tools import SkillTools
from skillruntime.local import AsyncLocalSkillRuntime, LocalFileSystem, LocalSkillRuntime
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime

pytestmark = pytest.mark.timeout(120)  # a regression blocks instead of failing

MAKE_FIFO = "mkfifo {name}"
MAKE_SOCKET = (
    "python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' {name}"
)


@pytest.fixture(scope="module")
def aio_double() -> Iterator[AioDouble]:
    with AioDouble(bash_api=True) as double:
        yield double


@pytest.fixture(scope="module")
def opensandbox_double() -> Iterator[OpenSandboxDouble]:
    with OpenSandboxDouble() as double:
        yield double


def _local(request: pytest.FixtureRequest, tmp: Path) -> SkillRuntime:
    return LocalSkillRuntime(conversation_id="special", conversations_root=tmp)


def _local_work_root(request: pytest.FixtureRequest, tmp: Path) -> SkillRuntime:
    return LocalSkillRuntime(work_root=tmp / "work")


def _aio(request: pytest.FixtureRequest, tmp: Path) -> SkillRuntime:
    double: AioDouble = request.getfixturevalue("aio_double")
    return AioSandboxSkillRuntime(
        base_url=double.url, token=double.token, conversation_id=f"special-{uuid.uuid4().hex[:12]}"
    )


def _opensandbox(request: pytest.FixtureRequest, tmp: Path) -> SkillRuntime:
    double: OpenSandboxDouble = request.getfixturevalue("opensandbox_double")
    return OpenSandboxSkillRuntime(domain=double.domain, api_key=double.api_key)


FACTORIES: dict[str, Callable[[pytest.FixtureRequest, Path], SkillRuntime]] = {
    "local": _local,
    "local-work-root": _local_work_root,
    "aio": _aio,
    "opensandbox": _opensandbox,
}


@pytest.fixture(params=sorted(FACTORIES))
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SkillRuntime]:
    rt = FACTORIES[request.param](request, tmp_path)
    try:
        yield rt
    finally:
        rt.close()


def _make(runtime: SkillRuntime, recipe: str, name: str) -> str:
    result = runtime.execute(SkillExecutionRequest(command=recipe.format(name=name)))
    assert result.exit_code == 0, result.stderr
    return f"{runtime.default_working_directory}/{name}"


ASYNC_FACTORIES: dict[str, Callable[[pytest.FixtureRequest, Path], AsyncSkillRuntime]] = {
    "local": lambda request, tmp: AsyncLocalSkillRuntime(
        conversation_id="special", conversations_root=tmp
    ),
    "aio": lambda request, tmp: AsyncAioSkillRuntime(
        base_url=request.getfixturevalue("aio_double").url,
        token=request.getfixturevalue("aio_double").token,
        conversation_id=f"special-{uuid.uuid4().hex[:12]}",
    ),
    "opensandbox": lambda request, tmp: AsyncOpenSandboxSkillRuntime(
        domain=request.getfixturevalue("opensandbox_double").domain,
        api_key=request.getfixturevalue("opensandbox_double").api_key,
    ),
}


@pytest.mark.parametrize("name", sorted(ASYNC_FACTORIES))
@pytest.mark.parametrize("recipe", [MAKE_FIFO, MAKE_SOCKET], ids=["fifo", "socket"])
def test_async_file_api_refuses_special_entries(
    request: pytest.FixtureRequest, name: str, recipe: str, tmp_path: Path
) -> None:
    """The async faces refuse a FIFO or socket as the sync ones do (a download of one blocked)."""
    runtime = ASYNC_FACTORIES[name](request, tmp_path)

    async def main() -> None:
        try:
            result = await runtime.execute(
                SkillExecutionRequest(command=recipe.format(name="special"))
            )
            assert result.exit_code == 0, result.stderr
            path = f"{runtime.default_working_directory}/special"
            fs = await runtime.get_file_system()
            info = await fs.stat(path)
            assert info is not None
            assert info.is_special
            with pytest.raises(NotRegularFileError, match="not a regular file"):
                await fs.read_bytes(path)
            with pytest.raises(NotRegularFileError, match="not a regular file"):
                async for _ in fs.read_stream(path):
                    pass
        finally:
            await runtime.close()

    asyncio.run(asyncio.wait_for(main(), 60))


@pytest.mark.parametrize("recipe", [MAKE_FIFO, MAKE_SOCKET], ids=["fifo", "socket"])
def test_file_api_refuses_special_entries(
    runtime: SkillRuntime, recipe: str, tmp_path: Path
) -> None:
    path = _make(runtime, recipe, "special")
    home = runtime.default_working_directory
    fs = runtime.get_file_system()
    fs.write_text(f"{home}/plain.txt", "needle\n")
    info = fs.stat(path)
    assert info is not None
    assert info.is_special
    assert not info.is_directory
    listed = {entry.name: entry for entry in fs.list_directory(home)}
    assert listed["special"].is_special
    assert not listed["plain.txt"].is_special
    for attempt in (
        lambda: fs.read_text(path),
        lambda: fs.read_bytes(path),
        lambda: b"".join(fs.read_stream(path)),
        lambda: fs.download(path, io.BytesIO()),
        lambda: fs.download(path, tmp_path / "out" / "copy"),
    ):
        with pytest.raises(NotRegularFileError, match="not a regular file"):
            attempt()
    assert list((tmp_path / "out").iterdir()) == []  # no partial download left


def test_tools_refuse_a_fifo_and_grep_skips_it(runtime: SkillRuntime) -> None:
    pipe = _make(runtime, MAKE_FIFO, "pipe")
    home = runtime.default_working_directory
    runtime.get_file_system().write_text(f"{home}/notes.txt", "needle here\n")
    tools = SkillTools(runtime)
    read = tools.dispatch("read", {"file_path": pipe})
    assert read.startswith("Error:")
    assert "not a regular file" in read
    edit = tools.dispatch("edit", {"file_path": pipe, "old_string": "a", "new_string": "b"})
    assert edit.startswith("Error:")
    found = tools.dispatch("grep", {"pattern": "needle", "path": home})
    assert "notes.txt" in found
    assert "pipe" not in found
    assert tools.dispatch("grep", {"pattern": "needle", "path": pipe}).startswith(
        ("Error:", "No matches")
    )


def test_a_write_replaces_a_fifo_without_opening_it(runtime: SkillRuntime) -> None:
    pipe = _make(runtime, MAKE_FIFO, "pipe")
    fs = runtime.get_file_system()
    fs.write_text(pipe, "now a file\n")
    info = fs.stat(pipe)
    assert info is not None
    assert not info.is_special
    assert fs.read_text(pipe) == "now a file\n"


# A path that is only whitespace is refused before any file call (the workspace's "path must not
# be empty" rule), so generated names always hold a visible character.
names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=40
).filter(lambda name: name not in (".", "..") and name.strip() != "")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=names, kind=st.sampled_from(["fifo", "socket"]), nested=st.booleans())
def test_local_file_api_refuses_generated_special_entries(
    name: str, kind: str, nested: bool
) -> None:
    with tempfile.TemporaryDirectory() as base:
        runtime = LocalSkillRuntime(conversation_id="gen", conversations_root=base)
        directory = Path(runtime.default_working_directory) / ("sub" if nested else "")
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / name
        if kind == "fifo":
            os.mkfifo(target)
        else:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.bind(os.fsencode(target) if len(os.fsencode(target)) < 100 else name)
            if not target.exists():  # a long path is bound relative to the working directory
                os.replace(name, target)
        relative = f"sub/{name}" if nested else name
        fs = runtime.get_file_system()
        with pytest.raises(NotRegularFileError):
            fs.read_bytes(relative)
        with pytest.raises(NotRegularFileError):
            fs.download(relative, io.BytesIO())
        info = fs.stat(relative)
        assert info is not None
        assert info.is_special
        assert SkillTools(runtime).dispatch("read", {"file_path": relative}).startswith("Error:")
        runtime.close()


def test_devices_are_refused_by_the_unconfined_local_file_system(tmp_path: Path) -> None:
    fs = LocalFileSystem(str(tmp_path))
    for device in ("/dev/null", "/dev/zero", "/dev/urandom"):
        with pytest.raises(NotRegularFileError):
            fs.read_bytes(device)
        info = fs.stat(device)
        assert info is not None
        assert info.is_special
