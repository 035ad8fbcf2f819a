"""The Docker sweep reaps warm-pool members that no record names once they are older than the
pool's TTL, with their volumes, and never a member a record names (a claimed one): what a node
that died with members ready, or a claimer that died before recording, leaves behind
(docs/docker-runtime.md, "Warm pools")."""

from __future__ import annotations

import pytest

import docker_fixtures
from docker_fixtures import IMAGE, ROOT, labelled, suite_labels
from doubles._polling import wait_until
from skillruntime.core.conversations import ConversationRecord
from skillruntime.docker.engine import DockerEngine, engine_service_key
from skillruntime.docker.pool import LABEL_POOL, DockerPoolDriver, member_labels
from skillruntime.docker.security import ContainerSecurity
from skillruntime.docker.sweeping import VOLUME_PREFIX, DockerReaper

docker_run = docker_fixtures.docker_run

pytestmark = pytest.mark.slow  # real containers


def test_the_sweep_reaps_unrecorded_members_past_the_ttl_and_never_a_recorded_one(
    docker_run: str,
) -> None:
    engine = DockerEngine()
    driver = DockerPoolDriver(
        engine, image=IMAGE, security=ContainerSecurity(), environment={}, conversations_root=ROOT
    )
    tags = {**member_labels(suite_labels(docker_run)), LABEL_POOL: "k" * 32}
    left = driver.create_member(tags)  # a dead node's member: nobody will remove it
    kept = driver.create_member(tags)  # claimed: a record names it and its volume
    assert left.storage is not None
    assert kept.storage is not None
    record = ConversationRecord.new(
        service_key=engine_service_key(engine.address),
        conversation_id="claimed",
        runtime="docker",
        workspace_root=ROOT,
        sandbox_id=kept.sandbox_id,
        sandbox_storage=kept.storage,
    )
    patient = DockerReaper(labels=suite_labels(docker_run), pool_ttl_seconds=3600)
    eager = DockerReaper(labels=suite_labels(docker_run), pool_ttl_seconds=1.0)
    try:
        young = {orphan.sandbox_id for orphan in patient.orphans([record])}
        assert left.sandbox_id not in young, "a member younger than the TTL is left alone"
        assert VOLUME_PREFIX + left.storage not in young

        def reaped_ids() -> set[str]:
            return {orphan.sandbox_id for orphan in eager.orphans([record])}

        assert wait_until(lambda: left.sandbox_id in reaped_ids(), timeout=15, interval=0.2)
        orphans = eager.orphans([record])
        ids = {orphan.sandbox_id for orphan in orphans}
        assert ids == {left.sandbox_id, VOLUME_PREFIX + left.storage}
        for orphan in orphans:
            eager.destroy_orphan(orphan)
        containers, volumes = labelled(docker_run)
        assert containers == [kept.sandbox_id]
        assert volumes == [kept.storage]
        # Without the record, the claimed member is an orphan too (its claimer died unrecorded),
        # once it is past the TTL as well (it was created after the first).
        unrecorded = {kept.sandbox_id, VOLUME_PREFIX + kept.storage}
        assert wait_until(
            lambda: {orphan.sandbox_id for orphan in eager.orphans([])} == unrecorded,
            timeout=15,
            interval=0.2,
        )
    finally:
        driver.remove_member(kept)
        driver.remove_member(left)
        patient.close()
        eager.close()
        engine.close()
    assert labelled(docker_run) == ([], [])
