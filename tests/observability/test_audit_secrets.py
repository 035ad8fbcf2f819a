"""No secret in any audit event or span: the tool suite over every runtime with seeded secrets.

Environment values (a runtime's base environment, a skill config's, a request's), the service
credentials given as runtime options, a marker in a skill file and in written file content, and a
marker that only a command's output contains are seeded; the whole ``SkillTools`` scenario then
runs (skill with bootstrap, bash, write, read, edit, ls, glob, grep, direct execute and file-system
calls) and every hook event, audit log record and finished span (its full JSON) is searched.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from audit_capture import AuditCapture

from doubles.aio import AioDouble
from doubles.opensandbox import OpenSandboxDouble
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.aio.async_runtime import AsyncAioSkillRuntime
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.models import (
    BootstrapCommand,
    Skill,
    SkillExecutionRequest,
    SkillRuntimeConfig,
)
from skillruntime.core.observability.audit import EVENT_KINDS
from skillruntime.core.runtime.bridge import to_sync
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.tools import SkillTools
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime
from skillruntime.opensandbox import OpenSandboxSkillRuntime
from skillruntime.opensandbox.async_runtime import AsyncOpenSandboxSkillRuntime


def _token(label: str) -> str:
    return f"{label}{secrets.token_hex(12)}"


BASE_SECRET = _token("basesecret")
SKILL_SECRET = _token("skillsecret")
REQUEST_SECRET = _token("requestsecret")
SKILL_FILE_MARKER = _token("skillfilemarker")
CONTENT_MARKER = _token("contentmarker")
EDITED_MARKER = _token("editedmarker")
OUTPUT_SEED = secrets.token_hex(10)
OUTPUT_MARKER = f"outmarker-{OUTPUT_SEED}"  # only the command's output holds it
BOOT_MARKER = f"bootmarker-{OUTPUT_SEED}"
ENVIRONMENT = {"BASE_TOKEN": BASE_SECRET}


@pytest.fixture(scope="module")
def opensandbox_double() -> Iterator[OpenSandboxDouble]:
    with OpenSandboxDouble(api_key=_token("apikey")) as double:
        yield double


@pytest.fixture(scope="module")
def aio_double() -> Iterator[AioDouble]:
    with AioDouble(bash_api=True, token=_token("bearer")) as double:
        yield double


@pytest.fixture(scope="module")
def aio_shell_double() -> Iterator[AioDouble]:
    """An older image: no ``/v1/bash``, commands through ``/v1/shell``."""
    with AioDouble(bash_api=False, token=_token("bearer")) as double:
        yield double


def _conversation() -> str:
    return f"audit-{uuid.uuid4().hex[:12]}"


Factory = Callable[[pytest.FixtureRequest, Path], tuple[SkillRuntime, list[str]]]


def _local(request: pytest.FixtureRequest, tmp: Path) -> tuple[SkillRuntime, list[str]]:
    return LocalSkillRuntime(work_root=tmp / "work", base_environment=ENVIRONMENT), []


def _local_conversation(
    request: pytest.FixtureRequest, tmp: Path
) -> tuple[SkillRuntime, list[str]]:
    runtime = LocalSkillRuntime(
        conversation_id=_conversation(),
        conversations_root=tmp / "conversations",
        base_environment=ENVIRONMENT,
    )
    return runtime, []


def _local_async(request: pytest.FixtureRequest, tmp: Path) -> tuple[SkillRuntime, list[str]]:
    runtime = AsyncLocalSkillRuntime(
        conversation_id=_conversation(),
        conversations_root=tmp / "conversations",
        base_environment=ENVIRONMENT,
    )
    return to_sync(runtime), []


def _opensandbox(request: pytest.FixtureRequest, tmp: Path) -> tuple[SkillRuntime, list[str]]:
    double: OpenSandboxDouble = request.getfixturevalue("opensandbox_double")
    runtime = OpenSandboxSkillRuntime(
        domain=double.domain,
        api_key=double.api_key,
        conversation_id=_conversation(),
        conversation_store=InMemoryConversationStore(),
        base_environment=ENVIRONMENT,
    )
    request.addfinalizer(runtime.destroy_conversation_sandbox)
    return runtime, [double.api_key]


def _opensandbox_async(request: pytest.FixtureRequest, tmp: Path) -> tuple[SkillRuntime, list[str]]:
    double: OpenSandboxDouble = request.getfixturevalue("opensandbox_double")
    runtime = AsyncOpenSandboxSkillRuntime(
        domain=double.domain,
        api_key=double.api_key,
        conversation_id=_conversation(),
        conversation_store=InMemoryConversationStore(),
        base_environment=ENVIRONMENT,
    )
    synced = to_sync(runtime)
    request.addfinalizer(lambda: asyncio.run(runtime.destroy_conversation_sandbox()))
    return synced, [double.api_key]


def _aio_factory(fixture: str, native_async: bool) -> Factory:
    def factory(request: pytest.FixtureRequest, tmp: Path) -> tuple[SkillRuntime, list[str]]:
        double: AioDouble = request.getfixturevalue(fixture)
        assert double.token
        options: dict[str, Any] = {
            "base_url": double.url,
            "token": double.token,
            "conversation_id": _conversation(),
            "base_environment": ENVIRONMENT,
        }
        if native_async:
            return to_sync(AsyncAioSkillRuntime(**options)), [double.token]
        return AioSandboxSkillRuntime(**options), [double.token]

    return factory


FACTORIES: dict[str, Factory] = {
    "local-work-root": _local,
    "local-conversation": _local_conversation,
    "local-async-conversation": _local_async,
    "opensandbox": _opensandbox,
    "opensandbox-async": _opensandbox_async,
    "aio": _aio_factory("aio_double", native_async=False),
    "aio-async": _aio_factory("aio_double", native_async=True),
    "aio-shell": _aio_factory("aio_shell_double", native_async=False),
    "aio-async-shell": _aio_factory("aio_shell_double", native_async=True),
}


def _skill(root: Path) -> Skill:
    skill_dir = root / "audited"
    (skill_dir / "scripts").mkdir(parents=True)
    (skill_dir / "SKILL.md").write_text(
        "---\nname: audited\ndescription: An audited skill.\n---\nUse it.\n"
    )
    (skill_dir / "scripts" / "tool.sh").write_text(f"echo {SKILL_FILE_MARKER}\n")
    return Skill(
        name="audited",
        description="An audited skill.",
        base_path=str(skill_dir),
        frontmatter={"name": "audited", "description": "An audited skill."},
        body="Use it.\n",
    )


def _run_scenario(tools: SkillTools, runtime: SkillRuntime, call: Callable[..., str]) -> None:
    assert call("skill", {"command": "audited"}).startswith("Runtime:")
    shell = call(
        "bash",
        {"command": f"echo $SKILL_TOKEN $BASE_TOKEN; printf 'outmarker-%s\\n' {OUTPUT_SEED}"},
    )
    for expected in (SKILL_SECRET, BASE_SECRET, OUTPUT_MARKER):
        assert expected in shell, shell
    assert "notes.txt" in call("write", {"file_path": "notes.txt", "content": CONTENT_MARKER})
    assert CONTENT_MARKER in call("read", {"file_path": "notes.txt"})
    edited = call(
        "edit",
        {"file_path": "notes.txt", "old_string": CONTENT_MARKER, "new_string": EDITED_MARKER},
    )
    assert not edited.startswith("Error"), edited
    assert "notes.txt" in call("ls", {})
    assert "notes.txt" in call("glob", {"pattern": "*.txt"})
    assert "notes.txt" in call("grep", {"pattern": "editedmarker"})
    result = runtime.execute(
        SkillExecutionRequest(
            command="echo $REQUEST_TOKEN", environment={"REQUEST_TOKEN": REQUEST_SECRET}
        )
    )
    assert REQUEST_SECRET in result.stdout
    fs = runtime.get_file_system()
    fs.make_directory("sub")
    fs.write_text("sub/more.txt", CONTENT_MARKER)
    with contextlib.closing(fs.read_stream("sub/more.txt")) as stream:
        assert CONTENT_MARKER.encode() in b"".join(stream)
    assert fs.exists("sub/more.txt")
    fs.delete("sub")
    with pytest.raises(Exception):  # noqa: B017,PT011 - any refusal; the event is what matters
        fs.read_text("/etc/" + CONTENT_MARKER)


@pytest.mark.parametrize("call_path", ["sync", "async"])
@pytest.mark.parametrize("kind", sorted(FACTORIES))
def test_no_secret_reaches_an_event_or_a_span(
    kind: str,
    call_path: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capture: AuditCapture,
) -> None:
    runtime, credentials = FACTORIES[kind](request, tmp_path / "runtime")
    config = SkillRuntimeConfig(
        environment={"SKILL_TOKEN": SKILL_SECRET},
        bootstrap=[
            BootstrapCommand(command=f"echo $SKILL_TOKEN; printf 'bootmarker-%s' {OUTPUT_SEED}")
        ],
    )
    with runtime:
        tools = SkillTools(runtime, [_skill(tmp_path / "skills")], configs={"audited": config})

        def call(name: str, arguments: dict[str, Any]) -> str:
            if call_path == "async":
                return asyncio.run(tools.adispatch(name, arguments))
            return tools.dispatch(name, arguments)

        _run_scenario(tools, runtime, call)

    events = capture.events
    seen = capture.kinds()
    expected = {"prepare", "bootstrap", "execute", "file.read", "file.write", "file.stat"}
    expected |= {"file.list", "file.delete", "file.mkdir"}
    assert expected <= seen, seen
    assert seen <= set(EVENT_KINDS)
    if kind.startswith("opensandbox"):
        assert "sandbox.create" in seen
    if kind.startswith("aio"):
        assert "sandbox.attach" in seen
    # One log record and one span per event, with the same kinds.
    assert sorted(r.audit["kind"] for r in capture.records) == sorted(e.kind for e in events)
    span_kinds = sorted(span.name.removeprefix("skillruntime.") for span in capture.spans())
    assert span_kinds == sorted(e.kind for e in events)
    assert all(e.runtime == runtime.name for e in events if not e.kind.startswith("sandbox."))
    assert any(e.kind == "file.read" and e.outcome == "error" for e in events)
    executes = capture.of("execute")
    assert all(e.exit_code == 0 and e.timed_out is False for e in executes)
    prepare = capture.of("prepare")
    assert prepare
    assert all(e.skill_name == "audited" and e.skill_digest for e in prepare)

    text = capture.text()
    seeded = [
        BASE_SECRET,
        SKILL_SECRET,
        REQUEST_SECRET,
        SKILL_FILE_MARKER,
        CONTENT_MARKER,
        EDITED_MARKER,
        OUTPUT_SEED,
        OUTPUT_MARKER,
        BOOT_MARKER,
        *credentials,
    ]
    for secret in seeded:
        for event in events:
            assert secret not in repr(event), (event.kind, secret)
        assert secret not in text, secret
