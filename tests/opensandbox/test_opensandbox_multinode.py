"""Several processes sharing one conversation through a SQL store (PostgreSQL, MariaDB)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import preloaded_python
from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import service_key_for_url, storage_key_for
from skillruntime.core.conversations.sql import SqlConversationStore
from sql_databases import temporary_database

NODES = 8
NODES_TIMEOUT_SECONDS = 120.0
"""Bound on one group of nodes, from launch to exit (imports included). A group takes a few
seconds on an idle machine and well under a minute on a 2-core host loaded far beyond a test
run; the test runs two groups, so a hung node is reported with its log before the suite's
300 s per-test timeout would kill the test without it."""
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


class Node:
    """One worker process with its own diagnostic log file."""

    def __init__(self, name: str, arguments: dict[str, Any], log_dir: Path) -> None:
        self.name = name
        self.log_file = log_dir / f"{name}.log"
        self.ready_file = log_dir / f"{name}.ready"
        self.process = preloaded_python.Popen(
            [
                sys.executable,
                str(WORKER),
                json.dumps(
                    {
                        **arguments,
                        "log_file": str(self.log_file),
                        "ready_file": str(self.ready_file),
                        "start_timeout": NODES_TIMEOUT_SECONDS,
                    }
                ),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def finish(self, deadline: float) -> tuple[dict[str, Any] | None, str | None]:
        """Wait for the node until ``deadline`` (monotonic): its JSON result, or ``None`` and a
        description of the failure (a node still running at the deadline is killed)."""
        try:
            out, err = self.process.communicate(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
            stage = "racing" if self.ready_file.exists() else "starting up (never ready)"
            return (
                None,
                f"{self.name} was still {stage} after {NODES_TIMEOUT_SECONDS} s; stderr:\n{err}",
            )
        if self.process.returncode != 0:
            return None, f"{self.name} exited with {self.process.returncode}; stderr:\n{err}"
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result, None

    def log(self) -> str:
        """The node's diagnostic log (runtime, SDK and store records, and any traceback)."""
        try:
            return self.log_file.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"


def _start_together(nodes: list[Node], start: Path, deadline: float) -> None:
    """Touch ``start`` once every node is up (polling until ``deadline`` at most), so the nodes
    race for the conversation for real instead of being spread out by their start-up."""
    while not all(node.ready_file.exists() or node.process.poll() is not None for node in nodes):
        if time.monotonic() > deadline:
            break  # _results reports the nodes that never came up
        time.sleep(0.01)
    start.touch()


def _results(nodes: list[Node], deadline: float) -> list[dict[str, Any]]:
    """Every node's result; if any failed, fail with each failure and every node's log."""
    outcomes = [node.finish(deadline) for node in nodes]
    failures = [failure for _, failure in outcomes if failure is not None]
    if failures:
        logs = "\n".join(f"--- log of {node.name} ---\n{node.log()}" for node in nodes)
        pytest.fail("\n\n".join(failures) + "\n\n" + logs, pytrace=False)
    return [result for result, _ in outcomes if result is not None]


@pytest.fixture
def destroy_new_sandboxes(opensandbox_double: OpenSandboxDouble) -> Iterator[None]:
    """Destroy, after the test, every sandbox it left alive on the worker's double: the
    conversation's sandbox outlives the nodes by design (a conversation sandbox is never killed
    at close), and later tests on this double must not find it."""
    before = set(opensandbox_double.stats()["live_sandbox_ids"])
    yield
    for sandbox_id in set(opensandbox_double.stats()["live_sandbox_ids"]) - before:
        opensandbox_double.kill_behind_back(sandbox_id)


@pytest.mark.usefixtures("destroy_new_sandboxes")
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
    logs = tmp_path / "logs"
    logs.mkdir()
    deadline = time.monotonic() + NODES_TIMEOUT_SECONDS
    nodes = [
        Node(
            f"node-{index}",
            {
                **common,
                "skills": [skills[index]],
                "write": {f"node-{index}.txt": f"written by node {index}"},
            },
            logs,
        )
        for index in range(NODES)
    ]
    _start_together(nodes, start, deadline)
    results = _results(nodes, deadline)

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
    deadline = time.monotonic() + NODES_TIMEOUT_SECONDS
    fresh = Node("resumed", {**common, "skills": skills, "read": ["node-3.txt"]}, logs)
    (resumed,) = _results([fresh], deadline)
    assert resumed["sandbox_id"] == winner
    assert resumed["read"] == {"node-3.txt": "written by node 3"}
    assert sorted(resumed["base_paths"]) == sorted(expected)
    assert opensandbox_double.stats()["upload_requests"] == uploads, "the resume uploaded files"
