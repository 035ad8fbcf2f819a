"""``DriverConformance``: prove a :class:`~skillruntime.core.conversations.sandboxes.SandboxDriver`
with a few lines of pytest, and get every conversation rule of
:class:`~skillruntime.core.conversations.sandboxes.ConversationSandboxes` on it.

.. code-block:: python

    from skillruntime.core.testing import DriverConformance

    class TestMyDriver(DriverConformance):
        def make_driver(self, tags, *, private=False):
            return MyDriver(tags=tags)

        def vanish(self, driver, sandbox_id):
            my_platform.delete_behind_the_drivers_back(sandbox_id)

Each test makes its own conversation (a fresh id, so runs in parallel never meet) on an
in-memory conversation store, and two *nodes* where a rule is about races: two drivers made by
:meth:`DriverConformance.make_driver` and two lifecycles, as two processes would have. Every
sandbox the test's tags find is killed afterwards, then :meth:`DriverConformance.cleanup` runs.
``docs/custom-runtime.md`` ("Writing a sandbox driver") lists the contracts and shows a complete
small driver that passes them.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, TypeVar

import pytest

from ..conversations.binding import ConversationBinding
from ..conversations.memory import InMemoryConversationStore
from ..conversations.sandboxes import (
    ROLE_CANDIDATE,
    ROLE_CONVERSATION,
    ROLE_PRIVATE,
    TAG_CONVERSATION_ID,
    TAG_CONVERSATION_KEY,
    TAG_ROLE,
    TAG_RUNTIME,
    AcquiredSandbox,
    ConversationSandboxes,
    SandboxDriver,
    tags_match,
)
from ..conversations.spi import ConversationRecord, storage_key_for

__all__ = ["DriverConformance", "DriverWorld"]

T = TypeVar("T")

_SERVICE_KEY = "driver-kit"
_WORKSPACE_ROOT = "/conversations"


class DriverWorld:
    """One test's conversation: its id, store, tags and the drivers and lifecycles made for it
    (every sandbox they find is killed at the end)."""

    def __init__(self, suite: DriverConformance) -> None:
        self.suite = suite
        self.conversation_id = f"kit-{uuid.uuid4().hex[:12]}"
        self.store = InMemoryConversationStore()
        self.storage_key = storage_key_for(_SERVICE_KEY, self.conversation_id)
        self.tags: dict[str, str] = {
            **suite.deployment_tags,
            TAG_RUNTIME: suite.runtime_tag,
            TAG_CONVERSATION_KEY: self.storage_key,
            TAG_CONVERSATION_ID: self.conversation_id,
        }
        self.private_tags: dict[str, str] = {
            **suite.deployment_tags,
            TAG_RUNTIME: suite.runtime_tag,
        }
        self.drivers: list[SandboxDriver[Any]] = []

    def driver(self, *, private: bool = False) -> SandboxDriver[Any]:
        """A new driver (one node's) for this conversation's tags, or (``private``) for a
        runtime without a conversation."""
        tags = self.private_tags if private else self.tags
        driver = self.suite.make_driver(dict(tags), private=private)
        self.drivers.append(driver)
        return driver

    def node(
        self, *, orphan_grace_seconds: float = 3600.0, private: bool = False
    ) -> ConversationSandboxes[Any]:
        """A lifecycle on a new driver: the conversation's, or (``private``) a private one."""
        binding = None
        if not private:
            binding = ConversationBinding(
                self.store,
                service_key=_SERVICE_KEY,
                conversation_id=self.conversation_id,
                runtime_name=self.suite.runtime_tag,
                workspace_root=_WORKSPACE_ROOT,
            )
        return ConversationSandboxes(
            self.driver(private=private),
            binding=binding,
            tags=self.private_tags if private else self.tags,
            orphan_grace_seconds=orphan_grace_seconds,
        )

    def live(self, node: ConversationSandboxes[Any]) -> set[str]:
        """Ids of the live sandboxes carrying every tag of ``node``'s new sandboxes, checked
        on the client (the kit's own view, as an orphan scan would see them)."""
        base = {key: value for key, value in node.creation_tags.items() if key != TAG_ROLE}
        return {
            found.sandbox_id
            for found in node.driver.list_tagged(base)
            if tags_match(found.tags, base)
        }

    def record(self) -> ConversationRecord | None:
        """The conversation's record as stored."""
        return self.store.get(self.storage_key)

    def close(self) -> None:
        """Kill every sandbox of this conversation the drivers find, then clean each driver."""
        for driver in self.drivers:
            try:
                for found in list(driver.list_tagged(self.tags)):
                    if tags_match(found.tags, self.tags):
                        driver.kill(found.sandbox_id)
            finally:
                self.suite.cleanup(driver)


def _race(*calls: Callable[[], T]) -> list[T]:
    """Run ``calls`` in threads released together; their results in order (first error
    raised)."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int, call: Callable[[], T]) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = call()
        except BaseException as exc:  # handed to the test below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(index, call)) for index, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


class DriverConformance:
    """Subclass it as ``Test<YourDriver>`` and implement :meth:`make_driver` and
    :meth:`vanish`; see the module docs."""

    runtime_tag: ClassVar[str] = "driver-kit"
    """The value of the runtime tag on the kit's sandboxes."""
    deployment_tags: ClassVar[Mapping[str, str]] = {"skillruntime-kit": "driver"}
    """Tags of the deployment (a sandbox without them is never touched)."""

    def make_driver(self, tags: Mapping[str, str], *, private: bool = False) -> SandboxDriver[Any]:
        """A driver for one node of a conversation whose sandboxes carry ``tags`` (without the
        role tag, which the lifecycle adds), or (``private``) for a runtime without one (its
        sandboxes are tagged ``skillruntime-role=private``)."""
        raise NotImplementedError

    def vanish(self, driver: SandboxDriver[Any], sandbox_id: str) -> None:
        """Make ``sandbox_id`` disappear behind the driver's back (its platform removed it)."""
        raise NotImplementedError

    def cleanup(self, driver: SandboxDriver[Any]) -> None:
        """Release what a driver made besides sandboxes (after each test; default nothing)."""

    @pytest.fixture
    def world(self) -> Iterator[DriverWorld]:
        """A fresh conversation for one test, cleaned up afterwards."""
        world = DriverWorld(self)
        try:
            yield world
        finally:
            world.close()

    # ------------------------------------------------------------- the driver

    def test_a_created_sandbox_is_listed_with_its_tags_and_connects(
        self, world: DriverWorld
    ) -> None:
        driver = world.driver()
        wanted = {**world.tags, TAG_ROLE: ROLE_CANDIDATE if driver.retags else ROLE_CONVERSATION}
        handle = driver.create(wanted)
        sandbox_id = driver.identify(handle)
        try:
            found = [item for item in driver.list_tagged(wanted) if item.sandbox_id == sandbox_id]
            assert len(found) == 1, "a created sandbox is listed by its tags"
            assert tags_match(found[0].tags, wanted), "it carries every tag at its value"
            other = world.driver()
            attached = other.connect(sandbox_id)
            assert attached is not None, "another node connects to a live sandbox"
            assert other.identify(attached) == sandbox_id
            other.release(attached)
        finally:
            driver.release(handle)

    def test_a_vanished_sandbox_connects_as_none_and_kills_are_idempotent(
        self, world: DriverWorld
    ) -> None:
        driver = world.driver()
        handle = driver.create({**world.tags, TAG_ROLE: ROLE_CONVERSATION})
        sandbox_id = driver.identify(handle)
        driver.release(handle)
        self.vanish(driver, sandbox_id)
        assert driver.connect(sandbox_id) is None, "a vanished sandbox is gone, not an error"
        driver.kill(sandbox_id)
        driver.kill(sandbox_id)
        assert sandbox_id not in {item.sandbox_id for item in driver.list_tagged(world.tags)}

    def test_tags_change_only_where_the_driver_says_they_can(self, world: DriverWorld) -> None:
        node = world.node()
        acquired = node.acquire()
        base = {key: value for key, value in node.creation_tags.items() if key != TAG_ROLE}
        listed = {item.sandbox_id: item.tags for item in node.driver.list_tagged(base)}
        assert acquired.sandbox_id in listed
        # A recorded sandbox is the conversation's: retagged from candidate, or born so.
        assert listed[acquired.sandbox_id].get(TAG_ROLE) == ROLE_CONVERSATION

    # --------------------------------------------------------- the lifecycle

    def test_two_nodes_racing_a_new_conversation_share_one_sandbox(
        self, world: DriverWorld
    ) -> None:
        first, second = world.node(), world.node()
        results: list[AcquiredSandbox[Any]] = _race(first.acquire, second.acquire)
        ids = {result.sandbox_id for result in results}
        assert len(ids) == 1, f"both nodes attach to one sandbox, got {ids}"
        record = world.record()
        assert record is not None
        assert record.sandbox_id in ids
        assert world.live(first) == ids, "the losing candidate was killed"
        for node, result in zip((first, second), results, strict=True):
            node.driver.release(result.handle)

    def test_a_vanished_sandbox_is_replaced_once_by_racing_nodes(self, world: DriverWorld) -> None:
        first = world.node()
        old = first.acquire()
        first.driver.release(old.handle)
        self.vanish(first.driver, old.sandbox_id)
        second, third = world.node(), world.node()
        results: list[AcquiredSandbox[Any]] = _race(second.acquire, third.acquire)
        ids = {result.sandbox_id for result in results}
        assert len(ids) == 1, f"one replacement, used by both, got {ids}"
        assert old.sandbox_id not in ids, "the vanished sandbox is not attached again"
        record = world.record()
        assert record is not None
        assert record.sandbox_id in ids
        assert record.prepared_skills == {}, "a replacement holds no prepared skills"
        assert world.live(second) == ids, "no second replacement survives"
        for node, result in zip((second, third), results, strict=True):
            node.driver.release(result.handle)

    def test_an_unrecorded_sandbox_past_the_grace_is_killed_and_a_recorded_one_never(
        self, world: DriverWorld
    ) -> None:
        crashed = world.node()
        orphan = crashed.driver.create(crashed.creation_tags)
        orphan_id = crashed.driver.identify(orphan)
        crashed.driver.release(orphan)
        kept = crashed.driver.create(crashed.creation_tags)
        kept_id = crashed.driver.identify(kept)
        crashed.driver.release(kept)
        # Another conversation's record names ``kept``: a sandbox any record names stays.
        world.store.create(
            ConversationRecord.new(
                service_key=_SERVICE_KEY,
                conversation_id=f"{world.conversation_id}-other",
                runtime=self.runtime_tag,
                workspace_root=_WORKSPACE_ROOT,
                sandbox_id=kept_id,
            )
        )
        patient = world.node(orphan_grace_seconds=3600.0)
        attached = patient.acquire()
        patient.driver.release(attached.handle)
        assert {orphan_id, kept_id} <= world.live(patient), "nothing younger than the grace dies"
        strict = world.node(orphan_grace_seconds=0.0)
        again = strict.acquire()
        strict.driver.release(again.handle)
        assert again.sandbox_id == attached.sandbox_id
        live = world.live(strict)
        assert orphan_id not in live, "an unrecorded sandbox past the grace is killed"
        assert kept_id in live, "a sandbox a record names is never killed"
        assert attached.sandbox_id in live
        strict.driver.kill(kept_id)

    def test_destroy_deletes_the_record_then_the_sandbox(self, world: DriverWorld) -> None:
        node = world.node()
        acquired = node.acquire()
        node.driver.release(acquired.handle)
        removed = node.destroy(acquired.sandbox_id)
        assert removed is not None
        assert removed.sandbox_id == acquired.sandbox_id
        assert world.record() is None
        assert node.driver.connect(acquired.sandbox_id) is None
        assert world.live(node) == set()
        fresh = world.node().acquire()
        assert fresh.created
        assert fresh.sandbox_id != acquired.sandbox_id

    def test_a_private_sandbox_is_tagged_private_and_never_recorded(
        self, world: DriverWorld
    ) -> None:
        node = world.node(private=True)
        acquired = node.acquire()
        try:
            assert acquired.created
            assert node.creation_tags[TAG_ROLE] == ROLE_PRIVATE
            assert world.record() is None
            assert acquired.sandbox_id in world.live(node)
        finally:
            node.driver.release(acquired.handle)
            node.driver.kill(acquired.sandbox_id)
