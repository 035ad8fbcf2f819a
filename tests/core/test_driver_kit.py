"""The driver kit on the example driver of docs/custom-runtime.md, and the kit failing on
drivers that break a rule (a kit that cannot fail proves nothing)."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from skillruntime.core.conversations.sandboxes import SandboxDriver, TaggedSandbox
from skillruntime.core.testing import DriverConformance, DriverWorld

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "directory_driver.py"


def _load_example() -> Any:
    spec = importlib.util.spec_from_file_location("directory_driver_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


DirectoryDriver = _load_example().DirectoryDriver


class TestDirectoryDriver(DriverConformance):
    """The example driver passes every contract."""

    @pytest.fixture(autouse=True)
    def _root(self, tmp_path: Path) -> None:
        self.root = tmp_path / "sandboxes"

    def make_driver(self, tags: Mapping[str, str], *, private: bool = False) -> SandboxDriver[Any]:
        driver: SandboxDriver[Any] = DirectoryDriver(self.root)
        return driver

    def vanish(self, driver: SandboxDriver[Any], sandbox_id: str) -> None:
        # Behind the driver's back: the directory is removed by someone else.
        for path in sorted((self.root / sandbox_id).rglob("*"), reverse=True):
            path.unlink()
        (self.root / sandbox_id).rmdir()


class _KillsNothing(DirectoryDriver):  # type: ignore[misc, valid-type]
    def kill(self, sandbox_id: str) -> None:
        pass


class _SeesDeadSandboxes(DirectoryDriver):  # type: ignore[misc, valid-type]
    def connect(self, sandbox_id: str) -> str | None:
        return sandbox_id


class _ListsNothing(DirectoryDriver):  # type: ignore[misc, valid-type]
    def list_tagged(
        self, tags: Mapping[str, str], *, older_than: float = 0.0
    ) -> Iterator[TaggedSandbox]:
        return iter(())


def _run(driver_type: type[Any], test: str, tmp_path: Path) -> None:
    suite = TestDirectoryDriver()
    suite.root = tmp_path / "sandboxes"
    suite.make_driver = lambda tags, private=False: driver_type(suite.root)  # type: ignore[method-assign]
    world = DriverWorld(suite)
    try:
        getattr(suite, test)(world)
    finally:
        world.drivers.clear()  # the broken drivers cannot clean up; tmp_path goes anyway


@pytest.mark.parametrize(
    ("driver_type", "test"),
    [
        (_KillsNothing, "test_destroy_deletes_the_record_then_the_sandbox"),
        (
            _KillsNothing,
            "test_an_unrecorded_sandbox_past_the_grace_is_killed_and_a_recorded_one_never",
        ),
        (_SeesDeadSandboxes, "test_a_vanished_sandbox_connects_as_none_and_kills_are_idempotent"),
        (_SeesDeadSandboxes, "test_a_vanished_sandbox_is_replaced_once_by_racing_nodes"),
        (_ListsNothing, "test_a_created_sandbox_is_listed_with_its_tags_and_connects"),
    ],
)
def test_the_kit_fails_a_driver_that_breaks_a_rule(
    driver_type: type[Any], test: str, tmp_path: Path
) -> None:
    with pytest.raises(AssertionError):
        _run(driver_type, test, tmp_path)


def test_the_docs_show_the_example_driver_as_it_is_tested() -> None:
    page = (ROOT / "docs" / "custom-runtime.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    source = EXAMPLE.read_text(encoding="utf-8")
    body = source[source.index("from __future__") :]
    assert any(block.strip() == body.strip() for block in blocks), (
        "docs/custom-runtime.md must show examples/directory_driver.py from its imports on"
    )
