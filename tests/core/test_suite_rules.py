"""The suite-wide rules of ``tests/conftest.py`` stay true as the suite changes."""

from __future__ import annotations

from pathlib import Path

from conftest import SLOW_MODULES

TESTS = Path(__file__).resolve().parents[1]


def test_every_slow_module_exists() -> None:
    missing = sorted(name for name in SLOW_MODULES if not (TESTS / name).is_file())
    assert not missing


def test_every_area_keeps_tests_outside_the_slow_set() -> None:
    """``make test-quick`` covers every area: no folder has only slow modules."""
    areas: dict[str, list[str]] = {}
    for module in TESTS.rglob("test_*.py"):
        relative = module.relative_to(TESTS).as_posix()
        areas.setdefault(relative.partition("/")[0], []).append(relative)
    only_slow = sorted(
        area
        for area, modules in areas.items()
        if "/" in modules[0] and all(module in SLOW_MODULES for module in modules)
    )
    # The benchmarks' quick mode and the real server's own tier (viking/ tests the store on the
    # double) are end-to-end by nature; `make test` runs them.
    assert only_slow == ["benchmarks", "viking_real"]
