"""Objects stream through the local store in bounded memory."""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

import pytest

from skillruntime.core.snapshots import LocalSnapshotStore

SIZE = 256 * 1024 * 1024
LIMIT = 16 * 1024 * 1024


class Pattern:
    """A readable stream of SIZE deterministic bytes that never holds them all."""

    def __init__(self) -> None:
        self.left = SIZE
        self.block = bytes(range(256)) * 4096  # 1 MiB

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        size = min(size, len(self.block))
        self.left -= size
        return self.block[:size]


def _digest() -> str:
    hasher = hashlib.sha256()
    stream = Pattern()
    while chunk := stream.read(1024 * 1024):
        hasher.update(chunk)
    return hasher.hexdigest()


@pytest.mark.slow
def test_a_256_mib_object_goes_in_and_out_under_16_mib(tmp_path: Path) -> None:
    store = LocalSnapshotStore(tmp_path / "store")
    digest = _digest()
    tracemalloc.start()
    try:
        assert store.put_object(digest, Pattern(), size=SIZE)  # type: ignore[arg-type]
        hasher = hashlib.sha256()
        total = 0
        with store.get_object(digest) as stream:
            while chunk := stream.read(1024 * 1024):
                hasher.update(chunk)
                total += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (total, hasher.hexdigest()) == (SIZE, digest)
    print(f"tracemalloc peak streaming 256 MiB through the local store: {peak / 2**20:.2f} MiB")
    assert peak < LIMIT
