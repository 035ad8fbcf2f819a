"""Fixtures of the tool suite.

The tools are tested against every runtime in :data:`RUNTIME_FACTORIES`. A factory gets the test's
``request`` and a fresh temporary host directory and returns an open runtime. Runtimes that talk to
a service use a session-scoped protocol double (fetched lazily with ``request.getfixturevalue``, so
deselecting a runtime never starts its double) and isolate tests by a unique conversation id.

A new runtime joins the suite with one entry, e.g.::

    @pytest.fixture(scope="session")
    def tools_example_double() -> Iterator[ExampleDouble]:
        with ExampleDouble() as double:
            yield double

    def _example(request: pytest.FixtureRequest, tmp: Path) -> SkillRuntime:
        double = request.getfixturevalue("tools_example_double")
        return ExampleSkillRuntime(url=double.url, conversation_id=_unique_conversation())

    RUNTIME_FACTORIES["example"] = _example

A factory may register clean-up with ``request.addfinalizer``; it runs after the runtime is
closed (the OpenSandbox factory destroys the conversation's sandbox that way, and the session
double checks at the end that no sandbox outlived its test).

Tests must reach runtime files only through the runtime (its file system and ``execute``), never
through host paths, and name the runtime in expected messages as ``runtime.name``.

Every test runs twice (:func:`call_path`): through ``dispatch``/``invoke``, and through
``adispatch``/``ainvoke`` awaited on an event loop. The tests of the modules in
:data:`NATIVE_MODULES` run a third time (``native``) through
:class:`~skillruntime.core.tools.AsyncSkillTools`: their ``SkillTools`` is replaced by
:class:`NativeToolsFacade`, which serves every call on one event loop of the session.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import pytest
import yaml

from doubles.aio import AioDouble
from doubles.opensandbox import OpenSandboxDouble
from doubles.opensandbox.harness import SCALED_TAIL_DELAY
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.files.async_spi import AsyncSkillRuntimeFileSystem
from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.bridge import ThreadedAsyncFileSystem, to_sync
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.tools import AsyncSkillTool, AsyncSkillTools, SkillTools
from skillruntime.core.tools.base import SkillTool
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime
from skillruntime.opensandbox import OpenSandboxSkillRuntime

T = TypeVar("T")

RuntimeFactory = Callable[[pytest.FixtureRequest, Path], SkillRuntime]
"""Builds an open runtime for one test from its ``request`` and a fresh host directory."""


NATIVE_MODULES = frozenset(
    {
        "test_declared_bootstrap",
        "test_file_tools",
        "test_policy",
        "test_publishing",
        "test_search_tools",
        "test_shell_tool",
        "test_skill_tool",
    }
)
"""Test modules whose tests also run through :class:`AsyncSkillTools` (``native``)."""


class _SessionLoop:
    """One event loop in a daemon thread, shared by the ``native`` runs of the session."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="tools-native", daemon=True).start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()


_SESSION_LOOP: list[_SessionLoop] = []


def _session_loop() -> _SessionLoop:
    if not _SESSION_LOOP:
        _SESSION_LOOP.append(_SessionLoop())
    return _SESSION_LOOP[0]


class _AsyncView(AsyncSkillRuntime):
    """A sync test runtime seen as an async one (each call in a worker thread; not owned)."""

    def __init__(self, inner: SkillRuntime) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def default_working_directory(self) -> str:
        return self.inner.default_working_directory

    async def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        return await asyncio.to_thread(self.inner.prepare, request)

    async def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        return await asyncio.to_thread(self.inner.execute, request)

    async def get_file_system(self) -> AsyncSkillRuntimeFileSystem:
        return ThreadedAsyncFileSystem(self.inner.get_file_system())

    async def close(self) -> None:
        """The test's runtime fixture closes the runtime."""


class NativeToolsFacade:
    """The surface of :class:`SkillTools` the tests use, served by :class:`AsyncSkillTools` over
    the test's runtime: every call is awaited on the session loop."""

    def __init__(self, runtime: SkillRuntime, skills: Any = (), **options: Any) -> None:
        self.runtime = runtime
        self._tools = AsyncSkillTools(_AsyncView(runtime), skills, **options)

    def dispatch(self, name: str, arguments: Any) -> str:
        return _session_loop().run(self._tools.adispatch(name, arguments))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tools, name)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise :func:`call_path`: ``native`` too for the modules of :data:`NATIVE_MODULES`."""
    if "call_path" in metafunc.fixturenames:
        paths = ["sync", "async"]
        if metafunc.module.__name__.rpartition(".")[2] in NATIVE_MODULES:
            paths.append("native")
        metafunc.parametrize("call_path", paths, indirect=True)


@pytest.fixture(autouse=True)
def call_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Route every ``dispatch``/``invoke`` of a test through ``adispatch``/``ainvoke`` in the
    ``async`` run, each awaited on a fresh event loop; in the ``native`` run, through
    :class:`NativeToolsFacade`."""
    if request.param == "native":

        def native_invoke(self: AsyncSkillTool, arguments: Any = None) -> str:
            return _session_loop().run(self.ainvoke(arguments))

        monkeypatch.setattr(request.module, "SkillTools", NativeToolsFacade)
        monkeypatch.setattr(AsyncSkillTool, "invoke", native_invoke)
    if request.param == "async":

        def dispatch(self: SkillTools, name: str, arguments: Any) -> str:
            return asyncio.run(self.adispatch(name, arguments))

        def invoke(self: SkillTool, arguments: Any = None) -> str:
            return asyncio.run(self.ainvoke(arguments))

        monkeypatch.setattr(SkillTools, "dispatch", dispatch)
        monkeypatch.setattr(SkillTool, "invoke", invoke)
    return str(request.param)


def _unique_conversation() -> str:
    return f"tools-{uuid.uuid4().hex[:16]}"


def _local_work_root(request: pytest.FixtureRequest, tmp: Path) -> SkillRuntime:
    return LocalSkillRuntime(work_root=tmp / "work", kill_grace_seconds=0.2, drain_seconds=0.2)


def _local_async(request: pytest.FixtureRequest, tmp: Path) -> SkillRuntime:
    """The native async local runtime, handed to the tools through ``to_sync``."""
    return to_sync(
        AsyncLocalSkillRuntime(
            conversation_id="conv-1",
            conversations_root=tmp / "conversations",
            kill_grace_seconds=0.2,
            drain_seconds=0.2,
        )
    )


def _local_conversation(request: pytest.FixtureRequest, tmp: Path) -> SkillRuntime:
    return LocalSkillRuntime(
        conversation_id="conv-1",
        conversations_root=tmp / "conversations",
        kill_grace_seconds=0.2,
        drain_seconds=0.2,
    )


@pytest.fixture(scope="session")
def tools_aio_bash() -> Iterator[AioDouble]:
    """An AIO Sandbox double of a current image (``/v1/bash``), shared by the whole session."""
    with AioDouble(bash_api=True) as double:
        yield double


@pytest.fixture(scope="session")
def tools_aio_shell() -> Iterator[AioDouble]:
    """An AIO Sandbox double of an older image (``/v1/shell`` only), shared by the session."""
    with AioDouble(bash_api=False) as double:
        yield double


def _aio(
    fixture: str, command_api: Literal["bash", "shell"], *, conversation: bool = True
) -> RuntimeFactory:
    """An AIO runtime on the shared double ``fixture``: in a unique conversation, or (without
    ``conversation``) in the shared-root mode with a unique ``remote_root``."""

    def make(request: pytest.FixtureRequest, tmp: Path) -> SkillRuntime:
        double: AioDouble = request.getfixturevalue(fixture)
        if conversation:
            return AioSandboxSkillRuntime(
                base_url=double.url,
                token=double.token,
                conversation_id=_unique_conversation(),
                command_api=command_api,
            )
        return AioSandboxSkillRuntime(
            base_url=double.url,
            token=double.token,
            remote_root=f"/home/gem/{_unique_conversation()}/skills",
            command_api=command_api,
        )

    return make


@pytest.fixture(scope="session")
def tools_opensandbox() -> Iterator[OpenSandboxDouble]:
    """An OpenSandbox double shared by the session; at the end, every sandbox it created must
    have been deleted (conversation sandboxes by their test's teardown, private ones by
    ``close``)."""
    with OpenSandboxDouble(tail_delay=SCALED_TAIL_DELAY) as double:
        yield double
        stats = double.stats()
        assert stats["live_sandbox_ids"] == [], f"sandboxes outlived their tests: {stats}"
        assert stats["deletes"] == stats["creates"], f"sandboxes not deleted by a client: {stats}"


def _opensandbox(*, conversation: bool = True) -> RuntimeFactory:
    """An OpenSandbox runtime on the shared double: in a unique conversation of a fresh
    in-memory store (its sandbox destroyed after the test), or (without ``conversation``) with
    a private sandbox that ``close`` kills."""

    def make(request: pytest.FixtureRequest, tmp: Path) -> SkillRuntime:
        double: OpenSandboxDouble = request.getfixturevalue("tools_opensandbox")
        if not conversation:
            return OpenSandboxSkillRuntime(domain=double.domain, api_key=double.api_key)
        runtime = OpenSandboxSkillRuntime(
            domain=double.domain,
            api_key=double.api_key,
            conversation_id=_unique_conversation(),
            conversation_store=InMemoryConversationStore(),
        )
        request.addfinalizer(runtime.destroy_conversation_sandbox)
        return runtime

    return make


RUNTIME_FACTORIES: dict[str, RuntimeFactory] = {
    "local-work-root": _local_work_root,
    "local-conversation": _local_conversation,
    "local-async-conversation": _local_async,
    "aio-bash": _aio("tools_aio_bash", "bash"),
    "aio-bash-shared-root": _aio("tools_aio_bash", "bash", conversation=False),
    "aio-shell": _aio("tools_aio_shell", "shell"),
    "opensandbox": _opensandbox(),
    "opensandbox-private": _opensandbox(conversation=False),
}


@pytest.fixture(params=sorted(RUNTIME_FACTORIES))
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SkillRuntime]:
    """An open runtime of each kind in :data:`RUNTIME_FACTORIES`; closed after the test."""
    rt = RUNTIME_FACTORIES[request.param](request, tmp_path / "runtime")
    try:
        yield rt
    finally:
        rt.close()


class CountingRuntime(SkillRuntime):
    """Delegates to ``inner``; counts ``prepare`` calls, can fail the first ``fail_first`` ones
    and records every execution request."""

    def __init__(self, inner: SkillRuntime, *, fail_first: int = 0, delay: float = 0.0) -> None:
        self.inner = inner
        self.prepare_calls = 0
        self.prepare_requests: list[SkillPreparationRequest] = []
        self.executed: list[SkillExecutionRequest] = []
        self.fail_first = fail_first
        self.delay = delay
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def default_working_directory(self) -> str:
        return self.inner.default_working_directory

    def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        with self._lock:
            self.prepare_calls += 1
            self.prepare_requests.append(request)
            call = self.prepare_calls
        if self.delay:
            threading.Event().wait(self.delay)
        if call <= self.fail_first:
            raise RuntimeError(f"prepare failure number {call}")
        return self.inner.prepare(request)

    def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        with self._lock:
            self.executed.append(request)
        return self.inner.execute(request)

    def get_file_system(self) -> SkillRuntimeFileSystem:
        return self.inner.get_file_system()

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def counting() -> type[CountingRuntime]:
    """The :class:`CountingRuntime` wrapper class."""
    return CountingRuntime


SkillFactory = Callable[..., Skill]


@pytest.fixture
def make_skill(tmp_path: Path) -> SkillFactory:
    """Write a skill directory under ``tmp_path/skills`` and return its :class:`Skill`.

    Keyword arguments: ``description``, ``body``, ``files`` (relative path → text) and any extra
    frontmatter keys (``allowed_tools`` is written as ``allowed-tools``).
    """

    def make(
        name: str,
        *,
        description: str = "A test skill.",
        body: str = "Instructions.\n",
        files: Mapping[str, str] | None = None,
        **frontmatter: Any,
    ) -> Skill:
        root = tmp_path / "skills" / name
        root.mkdir(parents=True, exist_ok=True)
        meta: dict[str, Any] = {"name": name, "description": description}
        for key, value in frontmatter.items():
            meta[key.replace("_", "-")] = value
        (root / "SKILL.md").write_text(f"---\n{yaml.safe_dump(meta)}---\n{body}")
        for relative, text in (files or {}).items():
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        return Skill(
            name=name,
            description=description,
            base_path=str(root),
            frontmatter=meta,
            body=body,
        )

    return make
