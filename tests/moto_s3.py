"""A real S3 API for the tests: moto in server mode on 127.0.0.1 with dummy credentials, shared
by the artifact and snapshot suites (a plugin of tests/conftest.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

_S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server, its dummy credentials in the environment while it runs
    (moto imported only by the sessions that use it)."""
    from moto.server import ThreadedMotoServer

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


def s3_options(endpoint: str) -> dict[str, Any]:
    """fsspec ``storage_options`` for the moto server at ``endpoint``."""
    return {
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
        "key": "testing",
        "secret": "testing",
        "skip_instance_cache": True,
    }
