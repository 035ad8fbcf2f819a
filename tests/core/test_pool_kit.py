"""The pool kit on the example pool driver of docs/custom-runtime.md, and the kit failing on
pools whose driver breaks a rule (a kit that cannot fail proves nothing)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from skillruntime.core.conversations.memory import InMemoryConversationStore
from skillruntime.core.conversations.pools import PoolMember, WarmPool, pool_key
from skillruntime.core.testing import PoolConformance, PoolWorld

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "directory_driver.py"


def _load_example() -> Any:
    spec = importlib.util.spec_from_file_location("directory_pool_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


DirectoryPoolDriver = _load_example().DirectoryPoolDriver


class TestDirectoryPool(PoolConformance):
    """The example pool driver passes every contract."""

    ready_seconds = 20.0
    driver_type: Any = DirectoryPoolDriver

    @pytest.fixture(autouse=True)
    def _root(self, tmp_path: Path) -> None:
        self.root = tmp_path / "sandboxes"

    def make_pool(
        self,
        store: InMemoryConversationStore,
        *,
        size: int,
        tags: Mapping[str, str],
        ttl_seconds: float,
        claim_ttl_seconds: float,
        clock: Callable[[], float],
    ) -> WarmPool[Any]:
        return WarmPool(
            self.driver_type(self.root),
            store,
            size=size,
            key=pool_key({"tags": dict(tags)}),
            tags=tags,
            ttl_seconds=ttl_seconds,
            claim_ttl_seconds=claim_ttl_seconds,
            clock=clock,
            refill_delay_seconds=0.05,
        )

    def sandbox_exists(self, sandbox_id: str) -> bool:
        return (self.root / sandbox_id / "tags.json").is_file()

    def vanish(self, sandbox_id: str) -> None:
        shutil.rmtree(self.root / sandbox_id, ignore_errors=True)


class _RemovesNothing(DirectoryPoolDriver):  # type: ignore[misc, valid-type]
    def remove_member(self, member: PoolMember) -> None:
        pass


class _ConnectsToTheDead(DirectoryPoolDriver):  # type: ignore[misc, valid-type]
    def connect_member(self, member: PoolMember) -> str | None:
        return member.sandbox_id


class _ListsNothing(DirectoryPoolDriver):  # type: ignore[misc, valid-type]
    def list_members(self, tags: Mapping[str, str]) -> Iterator[PoolMember]:
        return iter(())


@pytest.mark.parametrize(
    ("driver_type", "test"),
    [
        (_RemovesNothing, "test_close_removes_unclaimed_members_and_keeps_claimed_ones"),
        (_RemovesNothing, "test_an_old_member_is_never_handed_out_and_is_removed"),
        (_ConnectsToTheDead, "test_a_vanished_member_is_not_handed_out"),
        (_ListsNothing, "test_a_dead_claimers_member_returns_only_when_no_record_names_it"),
    ],
)
def test_the_kit_fails_a_pool_that_breaks_a_rule(
    driver_type: type[Any], test: str, tmp_path: Path
) -> None:
    suite = TestDirectoryPool()
    suite.root = tmp_path / "sandboxes"
    suite.driver_type = driver_type
    suite.ready_seconds = 3.0
    world = PoolWorld(suite)
    try:
        with pytest.raises(AssertionError):
            getattr(suite, test)(world)
    finally:
        world.close()
