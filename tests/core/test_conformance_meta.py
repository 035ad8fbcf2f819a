"""Tests of the conformance kit itself.

The kit runs in full, through pytest, against a small correct host runtime (``kit_reference.py``).
Deliberately broken runtimes (``kit_broken.py``) each break one contract: the kit's tests for that
contract must fail and every other kit test must still pass.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import pytest

from skillruntime.core.runtime import SkillRuntime
from skillruntime.core.testing import (
    CAPABILITY_TESTS,
    ConformanceContext,
    ConversationContracts,
    ExecuteContracts,
    FileSystemContracts,
    LifecycleContracts,
    PrepareContracts,
    RuntimeConformance,
)

GROUPS = (
    PrepareContracts,
    ExecuteContracts,
    FileSystemContracts,
    ConversationContracts,
    LifecycleContracts,
)


def _load(name: str) -> ModuleType:
    """Import a helper module next to this file (test folders are not packages)."""
    module_name = f"skillruntime_tests_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


reference = _load("kit_reference")
broken = _load("kit_broken")


class _ReferenceSuite(RuntimeConformance):
    resolves_symlinks = True
    runtime_class: ClassVar[type[Any]] = reference.ReferenceRuntime

    def make_runtime(
        self, *, conversation_id: str, conversations_root: str, base_environment: Mapping[str, str]
    ) -> SkillRuntime:
        runtime: SkillRuntime = self.runtime_class(
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            base_environment=base_environment,
        )
        return runtime


class TestReferenceRuntimeConformance(_ReferenceSuite):
    """The whole kit, collected and run by pytest, passes against a correct runtime."""


def _outcome(suite: RuntimeConformance, test_name: str, tmp_path: Path) -> str:
    with ConformanceContext(suite, tmp_path) as context:
        try:
            getattr(suite, test_name)(context)
        except (Exception, pytest.fail.Exception):
            return "failed"
    return "passed"


def _suite_for(runtime_class: type[Any]) -> RuntimeConformance:
    suite_class = type(
        f"Suite{runtime_class.__name__}",
        (_ReferenceSuite,),
        {
            "runtime_class": runtime_class,
            "resolves_symlinks": getattr(runtime_class, "kit_resolves_symlinks", True),
            "timeout_seconds": 0.5,
            "kill_settle_seconds": 1.0,
        },
    )
    suite: RuntimeConformance = suite_class()
    return suite


def _group_of(test_name: str) -> type[Any]:
    owners = [group for group in GROUPS if test_name in group.__dict__]
    assert len(owners) == 1, test_name
    return owners[0]


def _neighbours(suite: RuntimeConformance, expected: frozenset[str]) -> list[str]:
    """The kit tests of every contract group that holds an expected failure.

    Timeout tests are left out unless one of them is expected to fail (they are the slow ones;
    the reference run covers them).
    """
    groups = {_group_of(name) for name in expected}
    return [
        name
        for name in suite.contract_names
        if _group_of(name) in groups and (name not in broken.TIMEOUT_TESTS or name in expected)
    ]


@pytest.mark.parametrize(
    "runtime_class", list(broken.BROKEN_RUNTIMES), ids=lambda cls: cls.__name__
)
def test_kit_fails_exactly_the_broken_contract(
    runtime_class: type[Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The broken contract's tests fail; the other tests of its contract groups pass."""
    expected = broken.BROKEN_RUNTIMES[runtime_class]
    suite = _suite_for(runtime_class)
    names = _neighbours(suite, expected)
    assert expected <= set(names)
    failed = {
        name
        for name in names
        if _outcome(suite, name, tmp_path_factory.mktemp(name[:40])) == "failed"
    }
    assert failed == set(expected)


def test_every_contract_is_proven_to_fail_by_some_broken_runtime() -> None:
    caught = set().union(*broken.BROKEN_RUNTIMES.values())
    all_contracts = set(_ReferenceSuite.contract_names)
    assert caught <= all_contracts
    assert len(caught) >= 25


def test_kit_has_at_least_forty_contract_tests() -> None:
    assert len(_ReferenceSuite.contract_names) >= 40


def test_capability_tests_are_removed_not_skipped_when_the_flag_is_off() -> None:
    class WithoutSymlinks(RuntimeConformance):
        resolves_symlinks = False

    class WithSymlinksAgain(WithoutSymlinks):
        resolves_symlinks = True

    for name in CAPABILITY_TESTS:
        assert WithoutSymlinks.__dict__[name] is None
        assert name not in WithoutSymlinks.contract_names
        assert callable(getattr(WithSymlinksAgain, name))
        assert name in WithSymlinksAgain.contract_names


def test_make_runtime_must_be_implemented(tmp_path: Path) -> None:
    class Missing(RuntimeConformance):
        pass

    with pytest.raises(NotImplementedError, match="make_runtime"):
        ConformanceContext(Missing(), tmp_path).runtime()
