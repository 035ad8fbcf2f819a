"""A complete small sandbox driver: each sandbox is a directory on the host.

It is the example of ``docs/custom-runtime.md`` ("Writing a sandbox driver"): the seven calls
of :class:`~skillruntime.core.conversations.sandboxes.SandboxDriver` over a platform whose
sandboxes are directories under ``root`` with their tags in ``tags.json``. It passes the driver
kit (``tests/core/test_driver_kit.py``), so every conversation rule of core's lifecycle holds
on it; :class:`DirectoryPoolDriver` adds warm pools on the same platform and passes the pool kit
(``tests/core/test_pool_kit.py``). A real driver makes the same calls to its platform's API.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

from skillruntime.core.conversations.pools import PoolMember
from skillruntime.core.conversations.sandboxes import TaggedSandbox


class DirectoryDriver:
    """Sandboxes as directories under ``root``; the handle is the sandbox's id."""

    retags = True  # tags.json can be rewritten after creation

    def __init__(self, root: Path) -> None:
        self.root = root

    def create(self, tags: Mapping[str, str]) -> str:
        sandbox_id = uuid.uuid4().hex
        directory = self.root / sandbox_id
        directory.mkdir(parents=True)
        (directory / "tags.json").write_text(json.dumps(dict(tags)))
        return sandbox_id

    def connect(self, sandbox_id: str) -> str | None:
        return sandbox_id if (self.root / sandbox_id / "tags.json").is_file() else None

    def kill(self, sandbox_id: str) -> None:
        shutil.rmtree(self.root / sandbox_id, ignore_errors=True)

    def list_tagged(
        self, tags: Mapping[str, str], *, older_than: float = 0.0
    ) -> Iterator[TaggedSandbox]:
        for marker in self.root.glob("*/tags.json"):
            try:
                found = json.loads(marker.read_text())
                created = marker.parent.stat().st_mtime
            except (OSError, ValueError):
                continue  # killed while listed
            if all(found.get(key) == value for key, value in tags.items()):
                yield TaggedSandbox(marker.parent.name, found, created_at=created)

    def tag(self, sandbox_id: str, tags: Mapping[str, str]) -> None:
        marker = self.root / sandbox_id / "tags.json"
        marker.write_text(json.dumps({**json.loads(marker.read_text()), **tags}))

    def identify(self, handle: str) -> str:
        return handle

    def release(self, handle: str) -> None:
        pass  # nothing is held per sandbox


class DirectoryPoolDriver:
    """Warm-pool members on the same platform: a member is a sandbox made ahead."""

    def __init__(self, root: Path) -> None:
        self.sandboxes = DirectoryDriver(root)

    def create_member(self, tags: Mapping[str, str]) -> PoolMember:
        sandbox_id = self.sandboxes.create(tags)
        return PoolMember(sandbox_id, None, time.time(), dict(tags))

    def list_members(self, tags: Mapping[str, str]) -> Iterator[PoolMember]:
        for found in self.sandboxes.list_tagged(tags):
            yield PoolMember(found.sandbox_id, None, found.created_at or 0.0, found.tags)

    def connect_member(self, member: PoolMember) -> str | None:
        return self.sandboxes.connect(member.sandbox_id)

    def remove_member(self, member: PoolMember) -> None:
        self.sandboxes.kill(member.sandbox_id)

    def release(self, handle: str) -> None:
        pass

    def close(self) -> None:
        pass
