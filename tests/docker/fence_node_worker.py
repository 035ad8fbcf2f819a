"""Subprocess node for the Docker fencing test.

Usage: python fence_node_worker.py STORE_URL CONVERSATION LABEL TTL. Opens an exclusive
:class:`~skillruntime.docker.DockerSkillRuntime` of CONVERSATION (test image, the suite's label
LABEL) on the SQL store at STORE_URL, prints ``holding <token>`` from inside a session and runs
a command that writes its pid to ``/tmp/orphan.pid`` and appends ``tick`` to ``/tmp/ticks``
every 0.1 s until it is killed (the test SIGKILLs this process, leaving the exec running).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, as pytest's pythonpath

from docker_fixtures import IMAGE, suite_labels
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.docker import DockerSkillRuntime

TICK = "echo $$ > /tmp/orphan.pid; while :; do echo tick >> /tmp/ticks; sleep 0.1; done"


def main() -> None:
    url, conversation, label, ttl = sys.argv[1:5]
    with (
        SqlConversationStore(url) as store,
        DockerSkillRuntime(
            image=IMAGE,
            labels=suite_labels(label),
            conversation_id=conversation,
            conversation_store=store,
            exclusive=True,
            lease_ttl_seconds=float(ttl),
        ) as runtime,
        runtime.exclusive_session() as lease,
    ):
        assert lease is not None
        print(f"holding {lease.token}", flush=True)
        runtime.execute(SkillExecutionRequest(command=TICK, timeout_seconds=300))


if __name__ == "__main__":
    main()
