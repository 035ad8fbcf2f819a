"""Fixtures for the snapshot tests: the stores over a directory, fsspec memory and moto S3."""

from __future__ import annotations

import uuid
from pathlib import Path

import boto3
import pytest

from moto_s3 import s3_options
from skillruntime.core.snapshots import LocalSnapshotStore, ObjectSnapshotStore, SnapshotStore


def make_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> SnapshotStore:
    if kind == "local":
        return LocalSnapshotStore(tmp_path / "snapshots")
    if kind == "memory":
        return ObjectSnapshotStore(f"memory://snapshots-{uuid.uuid4().hex}/prefix")
    if kind == "s3":
        endpoint = request.getfixturevalue("moto_endpoint")
        bucket = f"snapshots-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
            Bucket=bucket
        )
        return ObjectSnapshotStore(
            f"s3://{bucket}/team/snapshots",
            storage_options=s3_options(endpoint),
            spool_dir=tmp_path,
            timeout=10,
        )
    raise AssertionError(kind)


@pytest.fixture(params=["local", "memory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SnapshotStore:
    return make_store(request.param, tmp_path, request)


@pytest.fixture(params=["memory", "s3"])
def object_store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectSnapshotStore:
    built = make_store(request.param, tmp_path, request)
    assert isinstance(built, ObjectSnapshotStore)
    return built
