"""The OpenSandbox runtime under faults: sandboxes killed mid-prepare or behind the runtime's
back, the server restarting under a running command, a node killed after creating its candidate.

Every test drives the real SDK against the protocol double and checks what ended up where: which
files exist in the sandbox the record names, what the record lists, which sandboxes still live.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles._process import double_env, read_ready_line
from doubles.opensandbox import OpenSandboxDouble
from faults.figures import record_figure
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.errors import RuntimeFileError, RuntimeFileNotFoundError
from skillruntime.core.models import (
    BootstrapCommand,
    Skill,
    SkillExecutionRequest,
    SkillPreparationRequest,
    SkillRuntimeConfig,
)
from skillruntime.opensandbox import OpenSandboxSkillRuntime, SandboxReplacedError
from skillruntime.opensandbox.files import UPLOAD_BATCH_FILES

HERE = Path(__file__).resolve().parent
RuntimeFactory = Callable[..., OpenSandboxSkillRuntime]
SKILL_FILES = 2 * UPLOAD_BATCH_FILES + 51  # three upload batches
BOOTSTRAP = "find . -type f | wc -l > ../bootstrap-count-$(basename $PWD)"


@pytest.fixture(autouse=True)
def _quiet_sdk() -> Iterator[None]:
    """The SDK logs every failed call with a traceback; the faults here are expected."""
    sdk = logging.getLogger("opensandbox")
    level = sdk.level
    sdk.setLevel(logging.CRITICAL)
    yield
    sdk.setLevel(level)


@pytest.fixture
def store() -> InMemoryConversationStore:
    return InMemoryConversationStore()


def _factory(
    double: OpenSandboxDouble, store: InMemoryConversationStore
) -> Iterator[RuntimeFactory]:
    made: list[OpenSandboxSkillRuntime] = []

    def factory(**options: Any) -> OpenSandboxSkillRuntime:
        options.setdefault("domain", double.domain)
        options.setdefault("api_key", double.api_key)
        options.setdefault("retry_seconds", 5.0)
        if options.get("conversation_id") is not None:
            options.setdefault("conversation_store", store)
        runtime = OpenSandboxSkillRuntime(**options)
        made.append(runtime)
        return runtime

    yield factory
    for runtime in made:
        with contextlib.suppress(Exception):
            runtime.close()
        if runtime.workspace is not None:
            with contextlib.suppress(Exception):
                runtime.destroy_conversation_sandbox()


@pytest.fixture
def make(
    opensandbox_double: OpenSandboxDouble, store: InMemoryConversationStore
) -> Iterator[RuntimeFactory]:
    """Runtimes on the session's double; closed and destroyed afterwards."""
    yield from _factory(opensandbox_double, store)


@pytest.fixture
def own_double() -> Iterator[OpenSandboxDouble]:
    """A double of the test's own, for faults that take the whole server down."""
    with OpenSandboxDouble() as double:
        yield double


def _conversation() -> str:
    return f"faults-{uuid.uuid4().hex[:12]}"


def _big_skill(root: Path, name: str) -> Skill:
    directory = root / name
    (directory / "data").mkdir(parents=True)
    (directory / "SKILL.md").write_text(f"---\nname: {name}\ndescription: d\n---\nbody\n")
    for index in range(SKILL_FILES - 1):
        (directory / "data" / f"f{index:04d}.txt").write_text(f"{name} {index}\n")
    return Skill(name=name, description="d", base_path=str(directory))


def _prepare_with_bootstrap(runtime: OpenSandboxSkillRuntime, skill: Skill) -> Skill:
    config = SkillRuntimeConfig(bootstrap=(BootstrapCommand(command=BOOTSTRAP),))
    (prepared,) = runtime.prepare(
        SkillPreparationRequest(skills=(skill,), configs={skill.name: config})
    )
    return prepared


def _host_path(double: OpenSandboxDouble, sandbox_id: str, remote: str) -> Path:
    assert remote.startswith("/workspace/")
    return double.workspace_of(sandbox_id) / remote.removeprefix("/workspace/")


def _assert_complete(double: OpenSandboxDouble, sandbox_id: str, prepared: Skill) -> None:
    """Every file of the skill and the bootstrap's output are in ``sandbox_id``."""
    copy = _host_path(double, sandbox_id, prepared.base_path)
    files = [path for path in copy.rglob("*") if path.is_file()]
    assert len(files) == SKILL_FILES
    count = copy.parent / f"bootstrap-count-{copy.name}"
    assert count.read_text().strip() == str(SKILL_FILES)


# --------------------------------------------------------- a sandbox dying during prepare


@pytest.mark.parametrize("uploads_before_kill", [1, 2, 3])
def test_a_sandbox_dying_between_or_after_upload_batches_never_records_a_partial_skill(
    make: RuntimeFactory,
    opensandbox_double: OpenSandboxDouble,
    store: InMemoryConversationStore,
    tmp_path: Path,
    uploads_before_kill: int,
) -> None:
    runtime = make(conversation_id=_conversation())
    assert runtime.execute(SkillExecutionRequest(command="true")).ok
    first = runtime.sandbox_id
    fired = opensandbox_double.stats()["faults_fired"]
    opensandbox_double.set_fault("kill_after_upload", after_events=uploads_before_kill)
    try:
        prepared = _prepare_with_bootstrap(runtime, _big_skill(tmp_path, "many-files"))
    finally:
        opensandbox_double.clear_faults()
    assert opensandbox_double.stats()["faults_fired"] == fired + 1
    second = runtime.sandbox_id
    assert second is not None
    assert second != first
    key = runtime.conversation_record_key
    assert key is not None
    record = store.get(key)
    assert record is not None
    assert record.sandbox_id == second
    assert list(record.prepared_skills.values()) == [prepared.base_path]
    _assert_complete(opensandbox_double, second, prepared)


def test_a_private_sandbox_dying_between_batches_gets_the_whole_skill_again(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    runtime = make()
    assert runtime.execute(SkillExecutionRequest(command="true")).ok
    first = runtime.sandbox_id
    opensandbox_double.set_fault("kill_after_upload", after_events=1)
    try:
        prepared = _prepare_with_bootstrap(runtime, _big_skill(tmp_path, "private-many"))
    finally:
        opensandbox_double.clear_faults()
    second = runtime.sandbox_id
    assert second is not None
    assert second != first
    _assert_complete(opensandbox_double, second, prepared)


def test_a_skill_prepared_after_a_partial_upload_is_complete_for_a_resuming_node(
    make: RuntimeFactory,
    opensandbox_double: OpenSandboxDouble,
    store: InMemoryConversationStore,
    tmp_path: Path,
) -> None:
    conversation = _conversation()
    first = make(conversation_id=conversation)
    opensandbox_double.set_fault("kill_after_upload", after_events=2)
    try:
        prepared = _prepare_with_bootstrap(first, _big_skill(tmp_path, "resumed"))
    finally:
        opensandbox_double.clear_faults()
    first.close()
    second = make(conversation_id=conversation)
    uploads = opensandbox_double.stats()["upload_requests"]
    # The same content and bootstrap commands: the copy the first node completed is reused.
    again = _prepare_with_bootstrap(second, _big_skill(tmp_path / "b", "resumed"))
    assert again.base_path == prepared.base_path
    assert opensandbox_double.stats()["upload_requests"] == uploads
    assert second.sandbox_id is not None
    _assert_complete(opensandbox_double, second.sandbox_id, prepared)


# ------------------------------------------------- the first calls after a vanished sandbox


def test_the_first_read_after_a_vanished_sandbox_moves_to_the_replacement_at_once(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble
) -> None:
    runtime = make(conversation_id=_conversation(), retry_seconds=20.0)
    files = runtime.get_file_system()
    files.write_text("note.txt", "before")
    old = runtime.sandbox_id
    assert old is not None
    assert opensandbox_double.kill_behind_back(old)
    before = runtime.file_requests
    started = time.monotonic()
    with pytest.raises(RuntimeFileNotFoundError):
        files.read_text("note.txt")  # the replacement does not have it
    record_figure(
        "first read after a vanished sandbox", seconds=time.monotonic() - started, bound=20.0
    )
    assert runtime.sandbox_id not in (None, old)
    # one failed attempt on the dead sandbox and one on the replacement, no retry budget spent
    assert runtime.file_requests - before <= 3
    files.write_text("note.txt", "after")
    assert files.read_text("note.txt") == "after"


def test_the_first_stat_after_a_vanished_sandbox_moves_to_the_replacement_at_once(
    make: RuntimeFactory, opensandbox_double: OpenSandboxDouble
) -> None:
    runtime = make(conversation_id=_conversation(), retry_seconds=20.0)
    files = runtime.get_file_system()
    files.write_text("note.txt", "before")
    old = runtime.sandbox_id
    assert old is not None
    assert opensandbox_double.kill_behind_back(old)
    before = runtime.file_requests
    assert files.stat("note.txt") is None
    assert runtime.sandbox_id not in (None, old)
    assert runtime.file_requests - before <= 3


def test_with_the_server_down_a_read_gives_up_within_its_retry_budget(
    own_double: OpenSandboxDouble, store: InMemoryConversationStore
) -> None:
    make = _factory(own_double, store)
    factory = next(make)
    try:
        runtime = factory(conversation_id=_conversation(), retry_seconds=2.0)
        files = runtime.get_file_system()
        files.write_text("note.txt", "kept")
        own_double.stop()
        started = time.monotonic()
        with pytest.raises(RuntimeFileError) as raised:
            files.read_text("note.txt")
        record_figure("read with the server down", seconds=time.monotonic() - started, bound=2.0)
        assert not isinstance(raised.value, RuntimeFileNotFoundError)
        assert own_double.api_key not in str(raised.value)
    finally:
        with contextlib.suppress(StopIteration):
            next(make)


def test_a_command_killed_by_a_server_restart_says_the_sandbox_was_replaced(
    own_double: OpenSandboxDouble, store: InMemoryConversationStore
) -> None:
    make = _factory(own_double, store)
    factory = next(make)
    try:
        runtime = factory(conversation_id=_conversation())
        assert runtime.execute(SkillExecutionRequest(command="true")).ok
        old = runtime.sandbox_id
        outcome: dict[str, BaseException | object] = {}

        def run() -> None:
            try:
                outcome["result"] = runtime.execute(
                    SkillExecutionRequest(command="echo started; sleep 30", timeout_seconds=60)
                )
            except BaseException as error:  # asserted below
                outcome["error"] = error

        worker = threading.Thread(target=run)
        worker.start()
        _wait_for_command(own_double)
        own_double.restart()
        worker.join(timeout=120)
        assert not worker.is_alive()
        error = outcome.get("error")
        assert isinstance(error, SandboxReplacedError), outcome
        assert error.sandbox_id == old
        after = runtime.execute(SkillExecutionRequest(command="echo fresh"))
        assert after.stdout == "fresh\n"
        assert runtime.sandbox_id not in (None, old)
    finally:
        with contextlib.suppress(StopIteration):
            next(make)


def _wait_for_command(double: OpenSandboxDouble) -> None:
    """Until the double has started one command (bounded polling)."""
    for _ in range(400):
        if double.stats()["commands"] >= 2:
            return
        threading.Event().wait(0.025)
    raise AssertionError("the command never started")


# ------------------------------------------------------------ orphaned candidate sandboxes


def _kill_node_after_its_candidate(
    double: OpenSandboxDouble, conversation: str, store_url: str
) -> str:
    """Run a node that blocks when recording its candidate, SIGKILL it, return the candidate."""
    arguments = {
        "domain": double.domain,
        "api_key": double.api_key,
        "conversation_id": conversation,
        "store_url": store_url,
    }
    process = subprocess.Popen(
        [sys.executable, str(HERE / "dying_node.py"), json.dumps(arguments)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=double_env(),
    )
    try:
        line = (read_ready_line(process, 60.0) or b"").decode().strip()
    finally:
        process.kill()
        process.wait(timeout=30)
    assert line.startswith("CANDIDATE "), line
    return line.removeprefix("CANDIDATE ")


def _conversation_sandboxes(double: OpenSandboxDouble, conversation: str) -> dict[str, str]:
    return {
        s["id"]: s["metadata"].get("skillruntime-role", "")
        for s in double.sandboxes()
        if s["metadata"].get("skillruntime-conversation-id") == conversation
    }


@pytest.mark.parametrize("record_exists", [False, True])
def test_a_candidate_left_by_a_killed_node_is_killed_when_the_conversation_is_next_attached(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path, record_exists: bool
) -> None:
    conversation = _conversation()
    url = f"sqlite:///{tmp_path / 'conversations.db'}"
    with SqlConversationStore(url, create_schema=True) as store:
        options = {
            "domain": opensandbox_double.domain,
            "api_key": opensandbox_double.api_key,
            "conversation_id": conversation,
            "conversation_store": store,
            "orphan_grace_seconds": 0.0,
        }
        if record_exists:  # the node dies while replacing a vanished sandbox
            with OpenSandboxSkillRuntime(**options) as earlier:
                earlier.get_file_system().exists(".")
                assert earlier.sandbox_id is not None
                opensandbox_double.kill_behind_back(earlier.sandbox_id)
        orphan = _kill_node_after_its_candidate(opensandbox_double, conversation, url)
        assert _conversation_sandboxes(opensandbox_double, conversation) == {orphan: "candidate"}
        runtime = OpenSandboxSkillRuntime(**options)
        try:
            assert runtime.execute(SkillExecutionRequest(command="true")).ok
            live = _conversation_sandboxes(opensandbox_double, conversation)
            assert live == {runtime.sandbox_id: "conversation"}
            record = runtime.conversation_record
            assert record is not None
            assert record.sandbox_id == runtime.sandbox_id
        finally:
            runtime.destroy_conversation_sandbox()
            runtime.close()


def test_a_young_candidate_is_left_alone_within_the_grace_period(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    conversation = _conversation()
    url = f"sqlite:///{tmp_path / 'conversations.db'}"
    with SqlConversationStore(url, create_schema=True) as store:
        orphan = _kill_node_after_its_candidate(opensandbox_double, conversation, url)
        runtime = OpenSandboxSkillRuntime(
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            conversation_id=conversation,
            conversation_store=store,
            orphan_grace_seconds=3600.0,
        )
        try:
            assert runtime.execute(SkillExecutionRequest(command="true")).ok
            live = _conversation_sandboxes(opensandbox_double, conversation)
            assert live == {orphan: "candidate", runtime.sandbox_id: "conversation"}
        finally:
            runtime.destroy_conversation_sandbox()
            runtime.close()
            opensandbox_double.kill_behind_back(orphan)
