"""Fixtures of the Viking store tests: the endpoint double and stores bound to it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles.viking import VikingDouble
from doubles.viking.samples import DEMO_ROOT, Clock, demo_files
from skillruntime.viking import VikingSkillStore


@pytest.fixture
def viking() -> Iterator[VikingDouble]:
    with VikingDouble() as double:
        double.add_skill(DEMO_ROOT, demo_files(), description="A demo skill")
        yield double


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def make_store(
    viking: VikingDouble, cache_dir: Path, clock: Clock
) -> Iterator[Callable[..., VikingSkillStore]]:
    stores: list[VikingSkillStore] = []

    def factory(**values: Any) -> VikingSkillStore:
        values.setdefault("server_url", viking.url)
        values.setdefault("cache_dir", cache_dir)
        values.setdefault("busy_backoff_seconds", 0.001)
        store = VikingSkillStore(clock=values.pop("clock", clock), **values)
        stores.append(store)
        return store

    yield factory
    for store in stores:
        store.close()


@pytest.fixture
def store(make_store: Callable[..., VikingSkillStore]) -> VikingSkillStore:
    return make_store()
