"""The suite-wide rules of ``tests/conftest.py`` and ``tests/slow_tests.py`` stay true as the suite
changes."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from slow_tests import (
    DURATIONS_FILE,
    SLOW_MODULES,
    SLOW_TESTS,
    THRESHOLD_SECONDS,
    defined_tests,
    heaviest_modules_first,
    split_nodeid,
)

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def test_every_slow_module_exists() -> None:
    missing = sorted(name for name in SLOW_MODULES if not (TESTS / name).is_file())
    assert not missing


def test_every_measured_slow_test_names_a_test_that_exists() -> None:
    """Each node id of ``tests/durations.json`` names a test function of its module, or a method
    of a test class of its module (written there or inherited)."""
    defined: dict[str, set[str]] = {}
    stale = []
    for nodeid in SLOW_TESTS:
        path, name = split_nodeid(nodeid)
        module = ROOT / path
        if path not in defined:
            defined[path] = defined_tests(module) if module.is_file() else set()
        names = defined[path]
        cls, sep, _method = name.rpartition("::")
        if name not in names and not (sep and f"{cls}::" in names):
            stale.append(nodeid)
    assert not sorted(stale), "run `make durations` (or remove these ids)"


def test_the_durations_file_holds_what_its_threshold_says() -> None:
    """The file was written with the threshold in force, and lists only tests at or above it."""
    data = json.loads(DURATIONS_FILE.read_text())
    assert data["threshold_seconds"] == THRESHOLD_SECONDS
    below = sorted(nodeid for nodeid, s in data["tests"].items() if s < THRESHOLD_SECONDS)
    assert not below


_MEASURED: dict[str, set[str]] = {}
for _nodeid in SLOW_TESTS:
    _path, _name = split_nodeid(_nodeid)
    _MEASURED.setdefault(_path, set()).add(_name)


def _marked_slow(decorators: list[ast.expr]) -> bool:
    return any(ast.unparse(d).endswith("mark.slow") for d in decorators)


def _quick_tests(module: Path) -> list[str]:
    """The test functions of ``module`` that stay in the quick set: not marked ``slow`` where they
    are written (nor the module) and no case of them measured slow."""
    relative = module.relative_to(TESTS).as_posix()
    if relative in SLOW_MODULES:
        return []
    tree = ast.parse(module.read_text())
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
            and "mark.slow" in ast.unparse(node.value)
        ):
            return []
    measured = _MEASURED.get("tests/" + relative, set())
    quick = []
    for node in tree.body:
        members: list[tuple[str, list[ast.expr]]] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            members = [(node.name, node.decorator_list)]
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            if _marked_slow(node.decorator_list):
                continue
            members = [
                (f"{node.name}::{m.name}", m.decorator_list)
                for m in node.body
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
            ]
        for name, decorators in members:
            is_test = name.rpartition("::")[2].startswith("test")
            if is_test and not _marked_slow(decorators) and name not in measured:
                quick.append(name)
    return quick


def test_every_area_keeps_tests_outside_the_slow_set() -> None:
    """``make test-quick`` covers every area: each folder of ``tests/`` keeps test functions of
    which no case is slow (by module, by mark or by measure)."""
    quick: dict[str, int] = {}
    for module in TESTS.rglob("test_*.py"):
        relative = module.relative_to(TESTS).as_posix()
        if "/" not in relative:
            continue
        area = relative.partition("/")[0]
        quick[area] = quick.get(area, 0) + len(_quick_tests(module))
    only_slow = sorted(area for area, count in quick.items() if count == 0)
    # The benchmarks' quick mode and the real server's own tier (viking/ tests the store on the
    # double) are end-to-end by nature; `make test` runs them.
    assert only_slow == ["benchmarks", "viking_real"]


def test_heaviest_modules_come_first_and_keep_their_inner_order() -> None:
    ids = ["a.py::one", "a.py::two", "b.py::one", "c.py::one", "c.py::two", "d.py::one"]
    items = cast(list[Any], [SimpleNamespace(nodeid=nodeid) for nodeid in ids])
    seconds = {"a.py::two": 2.0, "b.py::one": 1.0, "c.py::one": 3.0, "c.py::two": 0.5}
    ordered = [item.nodeid for item in heaviest_modules_first(items, seconds)]
    assert ordered == ["c.py::one", "c.py::two", "a.py::one", "a.py::two", "b.py::one", "d.py::one"]
