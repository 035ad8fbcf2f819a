"""``skillruntime conversations sweep --snapshot-store`` on OpenSandbox conversations (protocol
double): the sweep snapshots an idle conversation's workspace through a runtime attached to its
recorded sandbox (options from the ``SKILLRUNTIME_OPENSANDBOX_*`` environment, as a user sets
them), then kills the sandbox; a new runtime with durability restores the files byte for byte.
A conversation whose sandbox is gone lost its workspace with it: the sweep creates no sandbox,
snapshots nothing and destroys the record (docs/durability.md, "Before a sweep")."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import update

from doubles.opensandbox import OpenSandboxDouble
from doubles.opensandbox.fixtures import opensandbox_double_fixture
from doubles.opensandbox.harness import SCALED_TAIL_DELAY
from skillruntime.core.cli import build_cli
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.durability import Durability
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.snapshots import LocalSnapshotStore
from skillruntime.opensandbox import OpenSandboxSkillRuntime

# A double of its own: the sweep lists and kills sandboxes, other modules move the shared
# double's clock.
opensandbox_double = opensandbox_double_fixture(scope="module", tail_delay=SCALED_TAIL_DELAY)

pytestmark = pytest.mark.slow  # a double of its own, sandboxes made and swept

BLOB = bytes(range(256)) * 33 + b"\x00\xff tail"


def _deployment() -> dict[str, str]:
    return {"skillruntime-test-sweep-snapshots": uuid.uuid4().hex[:12]}


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'conversations.db'}"


def _environment(
    monkeypatch: pytest.MonkeyPatch, double: OpenSandboxDouble, metadata: dict[str, str]
) -> None:
    """The runtime options as a user of the CLI sets them."""
    monkeypatch.setenv("SKILLRUNTIME_OPENSANDBOX_DOMAIN", double.domain)
    monkeypatch.setenv("SKILLRUNTIME_OPENSANDBOX_API_KEY", double.api_key)
    monkeypatch.setenv("SKILLRUNTIME_OPENSANDBOX_METADATA", json.dumps(metadata))


def _runtime(
    double: OpenSandboxDouble, metadata: dict[str, str], conversation: str, **options: Any
) -> OpenSandboxSkillRuntime:
    return OpenSandboxSkillRuntime(
        domain=double.domain,
        api_key=double.api_key,
        metadata=metadata,
        conversation_id=conversation,
        **options,
    )


def _idle_conversation(
    url: str, double: OpenSandboxDouble, metadata: dict[str, str], conversation: str
) -> tuple[str, dict[str, bytes]]:
    """An OpenSandbox conversation recorded at ``url`` whose workspace holds a few files, its
    record backdated by two days; returns its sandbox id and the files by relative path."""
    store = SqlConversationStore(url, create_schema=True)
    try:
        with _runtime(double, metadata, conversation, conversation_store=store) as runtime:
            made = runtime.execute(
                SkillExecutionRequest(
                    command="mkdir -p src/deep && printf 'print(1)\\n' > src/main.py "
                    "&& printf 'notes' > src/deep/notes.txt"
                )
            )
            assert made.ok, made.stderr
            runtime.get_file_system().write_bytes(
                f"{runtime.default_working_directory}/blob.bin", BLOB
            )
            sandbox_id = runtime.sandbox_id
            assert sandbox_id is not None
            record = store.list_records()[0]
        with store._engine.begin() as connection:
            connection.execute(
                update(store._table)
                .where(store._table.c.storage_key == record.storage_key)
                .values(updated_at=datetime.now(UTC) - timedelta(days=2))
            )
    finally:
        store.close()
    files = {"src/main.py": b"print(1)\n", "src/deep/notes.txt": b"notes", "blob.bin": BLOB}
    return sandbox_id, files


def _snapshots(directory: Path, conversation: str) -> list[Any]:
    """The snapshots of ``conversation`` in the snapshot store at ``directory`` (none when the
    sweep never opened it)."""
    if not directory.exists():
        return []
    return list(LocalSnapshotStore(directory).list_snapshots(conversation))


def _sweep(url: str, *args: str) -> Any:
    return CliRunner().invoke(
        build_cli(),
        ["conversations", "sweep", "--idle", "1d", "--url", url, "--runtime", "opensandbox", *args],
        env=dict(os.environ),
    )


def _live(double: OpenSandboxDouble, metadata: dict[str, str]) -> list[str]:
    """Live sandboxes of the deployment ``metadata`` names."""
    return [
        item["id"]
        for item in double.sandboxes()
        if all((item.get("metadata") or {}).get(k) == v for k, v in metadata.items())
    ]


def test_the_sweep_snapshots_an_opensandbox_workspace_the_next_runtime_restores(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, snapshots, metadata = _url(tmp_path), tmp_path / "snapshots", _deployment()
    sandbox_id, expected = _idle_conversation(url, opensandbox_double, metadata, "swept-os-1")
    _environment(monkeypatch, opensandbox_double, metadata)
    creates = opensandbox_double.stats()["creates"]
    result = _sweep(url, "--snapshot-store", str(snapshots), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["destroyed"], report["failed"], report["kept"]) == (1, 0, 0)
    assert opensandbox_double.stats()["creates"] == creates, "the sweep created a sandbox"
    assert _live(opensandbox_double, metadata) == [], "the sweep left a sandbox"
    assert sandbox_id not in opensandbox_double.stats()["live_sandbox_ids"]
    store = LocalSnapshotStore(snapshots)
    assert len(store.list_snapshots("swept-os-1")) == 1
    with _runtime(
        opensandbox_double,
        metadata,
        "swept-os-1",
        conversation_store=InMemoryConversationStore(),
        durability=Durability(store),
    ) as runtime:
        assert runtime.execute(SkillExecutionRequest(command="true")).ok
        files = runtime.get_file_system()
        for path, content in expected.items():
            assert files.read_bytes(f"{runtime.default_working_directory}/{path}") == content
        runtime.destroy_conversation()
    assert _live(opensandbox_double, metadata) == []


def test_a_gone_sandbox_is_not_replaced_and_its_record_is_swept(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, snapshots, metadata = _url(tmp_path), tmp_path / "snapshots", _deployment()
    sandbox_id, _ = _idle_conversation(url, opensandbox_double, metadata, "swept-os-2")
    assert opensandbox_double.kill_behind_back(sandbox_id)
    _environment(monkeypatch, opensandbox_double, metadata)
    creates = opensandbox_double.stats()["creates"]
    result = _sweep(url, "--snapshot-store", str(snapshots), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["destroyed"] == 1
    assert opensandbox_double.stats()["creates"] == creates, "the sweep created a sandbox"
    assert _live(opensandbox_double, metadata) == []
    assert _snapshots(snapshots, "swept-os-2") == []
    with SqlConversationStore(url) as store:
        assert store.list_records() == []


def test_a_sandbox_of_another_deployment_is_not_snapshotted(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record naming a sandbox without the sweep's deployment metadata: no runtime attaches
    to it and nothing of it is read into the snapshot store."""
    url, snapshots, metadata = _url(tmp_path), tmp_path / "snapshots", _deployment()
    _idle_conversation(url, opensandbox_double, metadata, "swept-os-3")
    _environment(monkeypatch, opensandbox_double, _deployment())
    result = _sweep(url, "--snapshot-store", str(snapshots), "--json", "--orphans", "ignore")
    assert result.exit_code == 0, result.output
    assert _snapshots(snapshots, "swept-os-3") == []
    # The reaper's destroy kills what the record names (it does not check metadata): the
    # conversation is gone either way, and nothing is left.
    assert _live(opensandbox_double, metadata) == []
