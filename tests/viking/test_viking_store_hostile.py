"""A hostile OpenViking server cannot hold the store's memory, time or key.

The double streams an endless manifest, drips a manifest or a download one byte at a time, echoes
the API key in an error message, or refuses connections; the store fails each time with a clear
``VikingStoreError``, within its bounds, and never repeats the key.
"""

from __future__ import annotations

import logging
import socket
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doubles.viking import VikingDouble
from doubles.viking.samples import DEMO_ROOT, leftovers
from skillruntime.viking import (
    SKILL_PACKAGE_TOO_LARGE,
    SKILL_UNAVAILABLE,
    VikingSkillStore,
    VikingStoreError,
)

MiB = 1024 * 1024


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cap=st.integers(1024, 4 * MiB))
def test_an_endless_manifest_is_cut_at_the_json_cap(
    viking: VikingDouble, make_store: Callable[..., VikingSkillStore], cap: int
) -> None:
    viking.faults.endless_manifest = True
    store = make_store(max_json_bytes=cap)
    tracemalloc.start()
    try:
        with pytest.raises(VikingStoreError, match=f"more than {cap} bytes of JSON") as caught:
            store.resolve(DEMO_ROOT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.code == SKILL_PACKAGE_TOO_LARGE
    assert peak < 3 * cap + 4 * MiB, f"held {peak} bytes for a cap of {cap}"


def test_a_dripping_manifest_ends_at_the_operation_deadline(
    viking: VikingDouble, make_store: Callable[..., VikingSkillStore]
) -> None:
    viking.faults.manifest_drip_seconds = 0.05
    store = make_store(operation_timeout=1.0)
    with pytest.raises(VikingStoreError, match="did not finish within 1s") as caught:
        store.resolve(DEMO_ROOT)
    assert caught.value.code == SKILL_UNAVAILABLE


def test_a_dripping_download_is_stopped_below_the_minimum_rate(
    viking: VikingDouble, make_store: Callable[..., VikingSkillStore], cache_dir: Path
) -> None:
    viking.faults.drip_seconds = 0.3
    store = make_store(min_download_bytes_per_second=1024, download_rate_grace_seconds=1.0)
    with pytest.raises(VikingStoreError, match="is too slow") as caught:
        store.materialize(DEMO_ROOT)
    assert caught.value.code == SKILL_UNAVAILABLE
    assert leftovers(cache_dir) == []


def test_a_dripping_download_ends_at_the_operation_deadline(
    viking: VikingDouble, make_store: Callable[..., VikingSkillStore]
) -> None:
    viking.faults.drip_seconds = 0.3
    store = make_store(min_download_bytes_per_second=0, operation_timeout=1.5)
    with pytest.raises(VikingStoreError, match=r"did not finish within 1\.5s") as caught:
        store.materialize(DEMO_ROOT)
    assert caught.value.code == SKILL_UNAVAILABLE


secrets = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="\\\"'"),
    min_size=8,
    max_size=48,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(secret=secrets)
def test_an_echoed_api_key_is_redacted_from_errors_and_logs(
    viking: VikingDouble,
    make_store: Callable[..., VikingSkillStore],
    caplog: pytest.LogCaptureFixture,
    secret: str,
) -> None:
    viking.faults.echo_credentials = True
    store = make_store(api_key=secret)
    caplog.clear()
    with caplog.at_level(logging.DEBUG), pytest.raises(VikingStoreError) as caught:
        store.resolve(DEMO_ROOT)
    assert "bad request from key" in str(caught.value)
    assert "<redacted>" in str(caught.value)
    assert secret not in str(caught.value)
    assert secret not in repr(caught.value)
    assert all(secret not in record.getMessage() for record in caplog.records)


@pytest.fixture
def dead_port() -> int:
    """A loopback port nothing listens on (connections are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_refused_connection_is_reported_as_unreachable_not_busy(
    make_store: Callable[..., VikingSkillStore],
    dead_port: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = make_store(server_url=f"http://127.0.0.1:{dead_port}", busy_retries=8)
    with caplog.at_level(logging.WARNING), pytest.raises(VikingStoreError) as caught:
        store.resolve(DEMO_ROOT)
    assert caught.value.code == SKILL_UNAVAILABLE
    assert "unreachable" in str(caught.value)
    assert "busy" not in caplog.text
    assert "unreachable after 3 tries" in caplog.text


@pytest.fixture
def hang_up_server() -> Iterator[tuple[str, list[int]]]:
    """A server that accepts every connection and closes it at once; counts connections."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.05)
    accepted: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            accepted.append(1)
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    stop.set()
    thread.join(5)
    listener.close()


def test_a_failing_connection_is_retried_briefly_not_like_a_busy_server(
    make_store: Callable[..., VikingSkillStore], hang_up_server: tuple[str, list[int]]
) -> None:
    url, accepted = hang_up_server
    store = make_store(server_url=url, busy_retries=8)
    with pytest.raises(VikingStoreError, match="unreachable") as caught:
        store.resolve(DEMO_ROOT)
    assert caught.value.code == SKILL_UNAVAILABLE
    assert len(accepted) == 3  # one try and two short retries, not busy_retries + 1


def test_server_named_files_are_redacted_from_store_errors(
    viking: VikingDouble, make_store: Callable[..., VikingSkillStore]
) -> None:
    secret = "sk-live-0123456789abcdef"

    def name_a_file_after_the_key(result: dict[str, object]) -> None:
        files = result["files"]
        assert isinstance(files, list)
        files.append(
            {"name": secret, "uri": f"{DEMO_ROOT}/{secret}", "path": secret, "is_dir": False}
        )

    viking.faults.manifest_hook = name_a_file_after_the_key
    store = make_store(api_key=secret)
    with pytest.raises(VikingStoreError) as caught:
        store.resolve(DEMO_ROOT)
    assert "<redacted>" in str(caught.value)
    assert secret not in str(caught.value)
