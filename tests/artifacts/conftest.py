"""Fixtures for the artifact store tests: both stores, over memory, local files and moto S3."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from skillruntime.core.artifacts import (
    ObjectSkillArtifactStore,
    SkillArtifactStore,
    ZipSkillArtifactStore,
)

# The test modules and the subprocess workers import ``artifact_helpers`` from this folder.
HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from moto_s3 import s3_options  # noqa: E402


@pytest.fixture
def s3_bucket(moto_endpoint: str) -> str:
    bucket = f"skills-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=bucket)
    return bucket


def make_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> SkillArtifactStore:
    cache = tmp_path / "cache"
    if kind == "zip":
        return ZipSkillArtifactStore(tmp_path / "store")
    if kind == "memory":
        return ObjectSkillArtifactStore(
            f"memory://skills-{uuid.uuid4().hex}/prefix", cache_dir=cache
        )
    if kind == "file":
        return ObjectSkillArtifactStore(f"file://{tmp_path / 'objects'}/prefix", cache_dir=cache)
    if kind == "s3":
        endpoint = request.getfixturevalue("moto_endpoint")
        bucket = request.getfixturevalue("s3_bucket")
        return ObjectSkillArtifactStore(
            f"s3://{bucket}/team/skills", cache_dir=cache, storage_options=s3_options(endpoint)
        )
    raise AssertionError(kind)


STORE_KINDS = ["zip", "memory", "file", "s3"]


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SkillArtifactStore]:
    with make_store(request.param, tmp_path, request) as built:
        yield built


@pytest.fixture(params=["zip", "memory"])
def cheap_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SkillArtifactStore]:
    """Both stores, over the fastest backends (for the many refusal tests)."""
    with make_store(request.param, tmp_path, request) as built:
        yield built


@pytest.fixture
def builtin_stores() -> Iterator[None]:
    """The core store plugin, registered for the test when its entry point is not installed yet."""
    from skillruntime.core.artifacts import plugin
    from skillruntime.core.plugins import registry as plugins

    manager = plugins.get_plugin_manager()
    if manager.is_registered(plugin):
        yield
        return
    with plugins.registered_plugin(plugin, name="builtin_stores"):
        yield
