"""Orphan kills never trust the lifecycle server's metadata filter.

Against a server that ignores the filter of ``GET /sandboxes`` (every sandbox listed), attaching
a conversation and sweeping orphans kill only the sandboxes that carry every asked tag at
exactly its value and that no record of the store names: never another conversation's recorded
sandbox or candidate, an untagged sandbox, or a sandbox of another deployment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from doubles.opensandbox import OpenSandboxDouble
from doubles.opensandbox.fixtures import opensandbox_double_fixture
from doubles.opensandbox.rawclient import create_raw
from skillruntime.core.conversations import ConversationStore, InMemoryConversationStore
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.conversations.sweeps import sweep_conversations
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.opensandbox import OpenSandboxSkillRuntime
from skillruntime.opensandbox.sweeping import OpenSandboxReaper

hostile_double = opensandbox_double_fixture(scope="module")
"""A double of this module's own: its listing ignores the metadata filter."""

TRUE = SkillExecutionRequest(command="true")
SWEEP = (
    "import sys; from skillruntime.core.cli import main; "
    "main(['conversations', 'sweep', *sys.argv[1:]])"
)
"""``skillruntime conversations sweep ARGS`` in a child process, as the console script runs it."""


@pytest.fixture
def double(hostile_double: OpenSandboxDouble) -> Iterator[OpenSandboxDouble]:
    hostile_double.set_ignore_metadata_filter(True)
    yield hostile_double
    hostile_double.set_ignore_metadata_filter(False)
    with requests.Session() as http:
        for item in hostile_double.sandboxes():
            http.delete(
                f"{hostile_double.url}/v1/sandboxes/{item['id']}",
                headers={"OPEN-SANDBOX-API-KEY": hostile_double.api_key},
                timeout=30,
            )


def _runtime(
    double: OpenSandboxDouble, store: ConversationStore, conversation: str, **options: Any
) -> OpenSandboxSkillRuntime:
    return OpenSandboxSkillRuntime(
        domain=double.domain,
        api_key=double.api_key,
        conversation_id=conversation,
        conversation_store=store,
        orphan_grace_seconds=0,
        **options,
    )


def _live(double: OpenSandboxDouble) -> set[str]:
    return {item["id"] for item in double.sandboxes()}


def _tag(double: OpenSandboxDouble, sandbox_id: str, metadata: dict[str, str]) -> None:
    response = requests.patch(
        f"{double.url}/v1/sandboxes/{sandbox_id}/metadata",
        json=metadata,
        headers={"OPEN-SANDBOX-API-KEY": double.api_key},
        timeout=30,
    )
    assert response.status_code == 200, response.text


def _metadata_of(double: OpenSandboxDouble, sandbox_id: str) -> dict[str, str]:
    (item,) = [item for item in double.sandboxes() if item["id"] == sandbox_id]
    return dict(item["metadata"])


def test_attaching_kills_only_its_own_orphans_whatever_the_server_lists(
    double: OpenSandboxDouble,
) -> None:
    store = InMemoryConversationStore()
    suffix = uuid.uuid4().hex[:8]
    with requests.Session() as http:
        untagged = create_raw(double, http).id
    with _runtime(double, store, f"other-{suffix}") as other:
        assert other.execute(TRUE).ok
        other_recorded = other.sandbox_id
        assert other_recorded is not None
    with _runtime(double, store, f"mine-{suffix}") as mine:
        assert mine.execute(TRUE).ok
        mine_recorded = mine.sandbox_id
        assert mine_recorded is not None
    candidate_tags = {**_metadata_of(double, mine_recorded), "skillruntime-role": "candidate"}
    with requests.Session() as http:
        # Another conversation's candidate, and a real orphan of this conversation.
        other_tags = {**_metadata_of(double, other_recorded), "skillruntime-role": "candidate"}
        other_candidate = create_raw(double, http, metadata=other_tags).id
        orphan = create_raw(double, http, metadata=candidate_tags).id
    # A sandbox another conversation's record names, carrying this conversation's tags.
    _tag(double, other_recorded, candidate_tags)
    with _runtime(double, store, f"mine-{suffix}") as again:
        assert again.execute(TRUE).ok
        assert again.sandbox_id == mine_recorded
    live = _live(double)
    assert orphan not in live
    assert {untagged, other_recorded, other_candidate, mine_recorded} <= live


def test_a_sweep_destroys_no_sandbox_of_another_deployment_or_conversation(
    double: OpenSandboxDouble,
) -> None:
    store = InMemoryConversationStore()
    suffix = uuid.uuid4().hex[:8]
    with _runtime(
        double, InMemoryConversationStore(), f"b-{suffix}", metadata={"tenant": "b"}
    ) as b:
        assert b.execute(TRUE).ok  # recorded in tenant b's own store
        tenant_b = b.sandbox_id
    with _runtime(double, store, f"kept-{suffix}", metadata={"tenant": "a"}) as kept:
        assert kept.execute(TRUE).ok
        recorded = kept.sandbox_id
    with _runtime(double, store, f"gone-{suffix}", metadata={"tenant": "a"}) as gone:
        assert gone.execute(TRUE).ok
        orphan = gone.sandbox_id
        key = gone.conversation_record_key
    assert key is not None
    assert store.delete(key) is not None  # its record is lost: an orphan
    assert recorded is not None
    assert tenant_b is not None
    assert orphan is not None
    # The recorded sandbox carries the lost conversation's key: the store still names it.
    _tag(
        double,
        recorded,
        {
            "skillruntime-conversation-key": _metadata_of(double, orphan)[
                "skillruntime-conversation-key"
            ]
        },
    )
    with requests.Session() as http:
        untagged = create_raw(double, http).id
    reaper = OpenSandboxReaper(
        domain=double.domain,
        api_key=double.api_key,
        orphan_grace_seconds=0,
        metadata={"tenant": "a"},
    )
    try:
        report = sweep_conversations(store, 3600, [reaper], orphans="destroy")
    finally:
        reaper.close()
    assert [item.sandbox_id for item in report.orphans] == [orphan]
    live = _live(double)
    assert orphan not in live
    assert {tenant_b, recorded, untagged} <= live


def test_the_sweep_command_destroys_no_sandbox_of_another_deployment(
    double: OpenSandboxDouble, tmp_path: Any
) -> None:
    """``skillruntime conversations sweep --orphans destroy`` for tenant a, on a server whose
    listing ignores the filter: tenant b's sandbox survives, tenant a's orphan does not."""
    url = f"sqlite:///{tmp_path / 'tenant-a.db'}"
    suffix = uuid.uuid4().hex[:8]
    double.advance_clock(-400)  # what is created now looks older than the sweep's 300 s grace
    try:
        with SqlConversationStore(url, create_schema=True) as store:
            other_store = InMemoryConversationStore()
            with _runtime(double, other_store, f"b-{suffix}", metadata={"tenant": "b"}) as b:
                assert b.execute(TRUE).ok
                tenant_b = b.sandbox_id
            with _runtime(double, store, f"kept-{suffix}", metadata={"tenant": "a"}) as kept:
                assert kept.execute(TRUE).ok
                recorded = kept.sandbox_id
            with _runtime(double, store, f"gone-{suffix}", metadata={"tenant": "a"}) as gone:
                assert gone.execute(TRUE).ok
                orphan = gone.sandbox_id
                key = gone.conversation_record_key
            assert key is not None
            assert store.delete(key) is not None
        environment = {
            **os.environ,
            "SKILLRUNTIME_CONVERSATION_STORE": url,
            "SKILLRUNTIME_OPENSANDBOX_DOMAIN": double.domain,
            "SKILLRUNTIME_OPENSANDBOX_API_KEY": double.api_key,
            "SKILLRUNTIME_OPENSANDBOX_METADATA": '{"tenant": "a"}',
        }
        done = subprocess.run(
            [sys.executable, "-c", SWEEP, "--idle", "7d", "--orphans", "destroy"],
            env=environment,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    finally:
        double.advance_clock(400)
    assert done.returncode == 0, done.stdout + done.stderr
    live = _live(double)
    assert orphan not in live
    assert {tenant_b, recorded} <= live
