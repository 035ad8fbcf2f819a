"""Several processes sharing one conversation through a SQL store (PostgreSQL, MariaDB)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import service_key_for_url, storage_key_for
from skillruntime.core.sql import SqlConversationStore
from sql_databases import temporary_database

NODES = 8
WORKER = Path(__file__).with_name("opensandbox_node.py")


@pytest.fixture(params=["postgresql", "mariadb"])
def database_url(request: pytest.FixtureRequest) -> Iterator[str]:
    with temporary_database(request.param) as url:
        store = SqlConversationStore(url, create_schema=True)
        store.close()
        yield url


def _skill(root: Path, name: str) -> str:
    directory = root / name
    (directory / "scripts").mkdir(parents=True)
    (directory / "SKILL.md").write_text(f"---\nname: {name}\ndescription: d\n---\n{name}\n")
    (directory / "scripts" / "run.sh").write_text(f"#!/bin/sh\necho {name}\n")
    (directory / "scripts" / "run.sh").chmod(0o755)
    return str(directory)


def _launch(arguments: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), json.dumps(arguments)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0, err[-2000:]
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def test_eight_processes_share_one_sandbox_and_keep_every_skill(
    opensandbox_double: OpenSandboxDouble, database_url: str, tmp_path: Path
) -> None:
    conversation = f"multi-{uuid.uuid4().hex[:10]}"
    start = tmp_path / "start"
    common = {
        "domain": opensandbox_double.domain,
        "api_key": opensandbox_double.api_key,
        "conversation_id": conversation,
        "store_url": database_url,
        "start_file": str(start),
    }
    skills = [(f"skill-{index}", _skill(tmp_path, f"skill-{index}")) for index in range(NODES)]
    before = opensandbox_double.stats()
    processes = [
        _launch(
            {
                **common,
                "skills": [skills[index]],
                "write": {f"node-{index}.txt": f"written by node {index}"},
            }
        )
        for index in range(NODES)
    ]
    start.touch()
    results = [_result(process) for process in processes]

    sandbox_ids = {result["sandbox_id"] for result in results}
    assert len(sandbox_ids) == 1, f"nodes used several sandboxes: {sandbox_ids}"
    (winner,) = sandbox_ids
    after = opensandbox_double.stats()
    created = after["creates"] - before["creates"]
    killed = after["deletes"] - before["deletes"]
    assert created >= 1
    print(f"{NODES} nodes: {created} sandboxes created, {killed} losing candidates killed")
    assert killed == created - 1, "a losing candidate sandbox was left running"
    assert winner in after["live_sandbox_ids"]

    store = SqlConversationStore(database_url)
    try:
        key = storage_key_for(
            service_key_for_url(f"http://{opensandbox_double.domain}/v1"), conversation
        )
        record = store.get(key)
    finally:
        store.close()
    assert record is not None
    assert record.sandbox_id == winner
    expected = {result["base_paths"][0] for result in results}
    assert set(record.prepared_skills.values()) == expected
    assert len(record.prepared_skills) == NODES

    uploads = opensandbox_double.stats()["upload_requests"]
    fresh = _launch({**common, "skills": skills, "read": ["node-3.txt"]})
    resumed = _result(fresh)
    assert resumed["sandbox_id"] == winner
    assert resumed["read"] == {"node-3.txt": "written by node 3"}
    assert sorted(resumed["base_paths"]) == sorted(expected)
    assert opensandbox_double.stats()["upload_requests"] == uploads, "the resume uploaded files"
