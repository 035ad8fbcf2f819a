"""Fixtures for the snapshot tests: the stores over a directory, fsspec memory and moto S3."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from skillruntime.core.snapshots import LocalSnapshotStore, ObjectSnapshotStore, SnapshotStore

_S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """A real S3 API (moto in server mode) on 127.0.0.1, as the artifact tests use."""
    saved = {key: os.environ.get(key) for key in _S3_ENV}
    os.environ.update(_S3_ENV)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def s3_options(endpoint: str) -> dict[str, object]:
    return {
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
        "key": "testing",
        "secret": "testing",
        "skip_instance_cache": True,
    }


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
