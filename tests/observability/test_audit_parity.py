"""Every runtime, sync and native async, emits exactly the event kinds that apply to it.

One fixed scenario runs on each runtime (local, OpenSandbox, AIO over ``/v1/bash`` and over
``/v1/shell``; each as the sync class and as the native async class): a skill materialized from
an artifact store, a first ``execute``, ``prepare`` with a bootstrap command, one call of every
file operation and, where the runtime has a sandbox lifecycle, attach, replace and destroy. The
set of emitted kinds must equal the row of the runtime × kind table in ``docs/observability.md``,
so a missing event (or an unexpected one) fails. Spans and log records must match the events one
to one.
"""

from __future__ import annotations

import asyncio
import io
import re
import uuid
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from audit_capture import AuditCapture

from doubles.aio import AioDouble
from doubles.opensandbox import OpenSandboxDouble
from doubles.viking import VikingDouble
from doubles.viking.samples import DEMO_ROOT, demo_files
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.aio.async_runtime import AsyncAioSkillRuntime
from skillruntime.core.artifacts import SkillArtifact, SkillPackage, ZipSkillArtifactStore
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.models import (
    BootstrapCommand,
    Skill,
    SkillExecutionRequest,
    SkillPreparationRequest,
    SkillRuntimeConfig,
)
from skillruntime.core.observability.audit import EVENT_KINDS
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime
from skillruntime.opensandbox import OpenSandboxSkillRuntime
from skillruntime.opensandbox.async_runtime import AsyncOpenSandboxSkillRuntime
from skillruntime.viking import VikingSkillStore

DOCS = Path(__file__).resolve().parents[2] / "docs" / "observability.md"

CONFIG = SkillRuntimeConfig(bootstrap=[BootstrapCommand(command="true")])
FIRST = SkillExecutionRequest(command="true")
FAILING = SkillExecutionRequest(command="exit 4")


@dataclass(frozen=True)
class Case:
    """One runtime of the matrix: its documented column name and how it is driven."""

    column: str
    call_path: str  # "sync" or "async"
    command_api: str | None = None  # AIO only: "bash" or "shell"


CASES = [
    Case("local", "sync"),
    Case("local", "async"),
    Case("opensandbox", "sync"),
    Case("opensandbox", "async"),
    Case("aio", "sync", "bash"),
    Case("aio", "async", "bash"),
    Case("aio", "sync", "shell"),
    Case("aio", "async", "shell"),
]


def documented_matrix() -> dict[str, set[str]]:
    """The runtime × kind table of the documentation: column -> kinds marked ``yes``."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## Which runtime emits which kind", 1)[1].split("\n#", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    columns = header[1:]
    matrix: dict[str, set[str]] = {column: set() for column in columns}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        kind = re.fullmatch(r"`([a-z.]+)`", cells[0])
        assert kind is not None, line
        for column, cell in zip(columns, cells[1:], strict=True):
            assert cell.startswith(("yes", "no")), (kind.group(1), column, cell)
            if cell.startswith("yes"):
                matrix[column].add(kind.group(1))
    return matrix


def test_the_documented_matrix_covers_every_kind_and_runtime() -> None:
    matrix = documented_matrix()
    assert set(matrix) == {"local", "opensandbox", "aio"}
    section = DOCS.read_text(encoding="utf-8").split("## Which runtime emits which kind", 1)[1]
    listed = re.findall(r"^\| `([a-z.]+)` \|", section.split("\n#", 1)[0], flags=re.MULTILINE)
    assert listed == list(EVENT_KINDS)
    for kinds in matrix.values():
        assert {"prepare", "bootstrap", "execute", "file.read", "file.write"} <= kinds


@pytest.fixture(scope="module")
def opensandbox_double() -> Iterator[OpenSandboxDouble]:
    with OpenSandboxDouble() as double:
        yield double


@pytest.fixture(scope="module")
def viking_double() -> Iterator[VikingDouble]:
    with VikingDouble() as double:
        double.add_skill(DEMO_ROOT, demo_files(), description="A demo skill")
        yield double


@pytest.fixture(scope="module")
def aio_bash() -> Iterator[AioDouble]:
    with AioDouble(bash_api=True) as double:
        yield double


@pytest.fixture(scope="module")
def aio_shell() -> Iterator[AioDouble]:
    with AioDouble(bash_api=False) as double:
        yield double


def _zip(name: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("SKILL.md", f"---\nname: {name}\ndescription: d\n---\nbody\n")
        archive.writestr("scripts/run.sh", "echo run\n")
    return buffer.getvalue()


def _materialized_skills(tmp: Path, viking: VikingSkillStore) -> list[Skill]:
    """The scenario's skills: one from a ZIP artifact store (``artifact.materialize``), one from
    a Viking server (``viking.materialize``)."""
    store = ZipSkillArtifactStore(tmp / "store")
    installed = store.install(
        SkillArtifact(name="parity", version="1"), SkillPackage.from_bytes(_zip("parity"))
    )
    directory = store.materialize(installed)
    demo = viking.materialize(DEMO_ROOT)
    return [
        Skill(
            name="parity", description="d", base_path=str(directory), frontmatter={"name": "parity"}
        ),
        Skill(name="demo", description="d", base_path=str(demo), frontmatter={"name": "demo"}),
    ]


def _upload_source(tmp: Path) -> Path:
    source = tmp / "upload.txt"
    source.write_text("uploaded")
    return source


def _sync_scenario(
    runtime_factory: Callable[[], Any], tmp: Path, lifecycle: Any, skills: list[Skill]
) -> None:
    source = _upload_source(tmp)
    runtime = runtime_factory()
    with runtime:
        assert runtime.execute(FIRST).exit_code == 0
        assert runtime.execute(FAILING).exit_code == 4
        request = SkillPreparationRequest(skills=skills, configs={"parity": CONFIG})
        runtime.prepare(request)
        fs = runtime.get_file_system()
        fs.make_directory("d")
        fs.write_text("d/a.txt", "content")
        assert fs.read_text("d/a.txt") == "content"
        assert fs.stat("d/a.txt") is not None
        assert [entry.name for entry in fs.list_directory("d")] == ["a.txt"]
        fs.upload_files([(source, "d/b.txt", False)])
        fs.delete("d")
        if callable(lifecycle):
            lifecycle(runtime)


async def _async_scenario(
    runtime_factory: Callable[[], Any], tmp: Path, lifecycle: Any, skills: list[Skill]
) -> None:
    source = _upload_source(tmp)
    runtime = runtime_factory()
    async with runtime:
        assert (await runtime.execute(FIRST)).exit_code == 0
        assert (await runtime.execute(FAILING)).exit_code == 4
        request = SkillPreparationRequest(skills=skills, configs={"parity": CONFIG})
        await runtime.prepare(request)
        fs = await runtime.get_file_system()
        await fs.make_directory("d")
        await fs.write_text("d/a.txt", "content")
        assert await fs.read_text("d/a.txt") == "content"
        assert await fs.stat("d/a.txt") is not None
        assert [entry.name for entry in await fs.list_directory("d")] == ["a.txt"]
        await fs.upload_files([(source, "d/b.txt", False)])
        await fs.delete("d")
        if callable(lifecycle):
            await lifecycle(runtime)


def _opensandbox_lifecycle_sync(
    double: OpenSandboxDouble, make: Callable[[], OpenSandboxSkillRuntime]
) -> Callable[[OpenSandboxSkillRuntime], None]:
    """After the scenario: a second object attaches, a third replaces the vanished sandbox and
    destroys it."""

    def lifecycle(first: OpenSandboxSkillRuntime) -> None:
        created = first.sandbox_id
        assert created is not None
        with make() as second:
            assert second.execute(FIRST).exit_code == 0  # sandbox.attach
            assert second.sandbox_id == created
        assert double.kill_behind_back(created)
        with make() as third:
            assert third.execute(FIRST).exit_code == 0  # sandbox.replace
            assert third.sandbox_id not in (None, created)
            third.destroy_conversation_sandbox()  # sandbox.destroy

    return lifecycle


def _opensandbox_lifecycle_async(
    double: OpenSandboxDouble, make: Callable[[], AsyncOpenSandboxSkillRuntime]
) -> Callable[[AsyncOpenSandboxSkillRuntime], object]:
    async def lifecycle(first: AsyncOpenSandboxSkillRuntime) -> None:
        created = first.sandbox_id
        assert created is not None
        async with make() as second:
            assert (await second.execute(FIRST)).exit_code == 0
            assert second.sandbox_id == created
        assert double.kill_behind_back(created)
        async with make() as third:
            assert (await third.execute(FIRST)).exit_code == 0
            assert third.sandbox_id not in (None, created)
            await third.destroy_conversation_sandbox()

    return lifecycle


def _run_case(case: Case, request: pytest.FixtureRequest, tmp: Path, skills: list[Skill]) -> str:
    """Run the scenario of ``case``; returns the runtime name its events must carry."""
    conversation = f"parity-{uuid.uuid4().hex[:10]}"
    asynchronous = case.call_path == "async"
    factory: Callable[[], Any]
    lifecycle: Any = None
    if case.column == "local":
        local_class = AsyncLocalSkillRuntime if asynchronous else LocalSkillRuntime
        root = tmp / "conversations"

        def factory() -> object:
            return local_class(conversation_id=conversation, conversations_root=root)

    elif case.column == "opensandbox":
        double: OpenSandboxDouble = request.getfixturevalue("opensandbox_double")
        store = InMemoryConversationStore()
        os_class = AsyncOpenSandboxSkillRuntime if asynchronous else OpenSandboxSkillRuntime

        def factory() -> object:
            return os_class(
                domain=double.domain,
                api_key=double.api_key,
                conversation_id=conversation,
                conversation_store=store,
            )

        make = factory
        if asynchronous:
            lifecycle = _opensandbox_lifecycle_async(double, make)
        else:
            lifecycle = _opensandbox_lifecycle_sync(double, make)
    else:
        aio: AioDouble = request.getfixturevalue(f"aio_{case.command_api}")
        aio_class = AsyncAioSkillRuntime if asynchronous else AioSandboxSkillRuntime

        def factory() -> object:
            return aio_class(
                base_url=aio.url,
                token=aio.token,
                conversation_id=conversation,
                command_api="auto",
            )

        expected_api = case.command_api

        def check_api(runtime: Any) -> Any:
            if asynchronous:

                async def check() -> None:
                    assert await runtime.command_api() == expected_api

                return check()
            assert runtime.command_api == expected_api
            return None

        lifecycle = check_api
    if asynchronous:
        asyncio.run(_async_scenario(factory, tmp, lifecycle, skills))
    else:
        _sync_scenario(factory, tmp, lifecycle, skills)
    return case.column


@pytest.mark.parametrize(
    "case",
    CASES,
    ids=["-".join(filter(None, (c.column, c.call_path, c.command_api))) for c in CASES],
)
def test_each_runtime_emits_exactly_its_documented_kinds(
    case: Case, request: pytest.FixtureRequest, tmp_path: Path, capture: AuditCapture
) -> None:
    expected = documented_matrix()[case.column]
    viking: VikingDouble = request.getfixturevalue("viking_double")
    with VikingSkillStore(server_url=viking.url, cache_dir=tmp_path / "cache") as store:
        skills = _materialized_skills(tmp_path, store)
        runtime_name = _run_case(case, request, tmp_path, skills)

    events = capture.events
    assert capture.kinds() == expected, (
        f"missing {sorted(expected - capture.kinds())}, "
        f"unexpected {sorted(capture.kinds() - expected)}"
    )
    for event in events:
        if event.kind.endswith(".materialize"):
            assert event.runtime == {"artifact": "zip", "viking": "viking"}[event.kind[:-12]]
        else:
            assert event.runtime == runtime_name, event
            assert (event.conversation_id or "").startswith("parity-"), event
        if event.kind == "sandbox.attach" and event.outcome == "error":
            # OpenSandbox: attaching to the sandbox killed behind its back, before the replace.
            assert (case.column, event.error_type) == ("opensandbox", "SandboxGoneError"), event
        else:
            assert event.outcome == "ok", event
    executes = capture.of("execute")
    assert sorted(e.exit_code for e in executes if e.exit_code != 0) == [4]
    assert all(e.timed_out is False for e in executes)
    assert [e.skill_name for e in capture.of("bootstrap")] == ["parity"]
    assert sorted(e.skill_name for e in capture.of("prepare")) == ["demo", "parity"]
    attached = [e.outcome for e in capture.of("sandbox.attach")]
    assert (
        sorted(attached)
        == {"local": [], "opensandbox": ["error", "ok"], "aio": ["ok"]}[case.column]
    )
    if case.column == "opensandbox":
        created = [e.sandbox_id for e in capture.of("sandbox.create")]
        assert len(created) == 2  # the first sandbox and the replacement (inside the replace)
        assert [e.sandbox_id for e in capture.of("sandbox.replace")] == created[1:]
        assert [e.sandbox_id for e in capture.of("sandbox.destroy")] == created[1:]
        assert all(e.sandbox_id for e in events if e.kind.startswith("sandbox."))
    # One span and one log record per event, of the same kinds.
    span_kinds = sorted(span.name.removeprefix("skillruntime.") for span in capture.spans())
    assert span_kinds == sorted(e.kind for e in events)
    assert sorted(r.audit["kind"] for r in capture.records) == sorted(e.kind for e in events)
