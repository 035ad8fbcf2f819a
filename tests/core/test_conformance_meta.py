"""Tests of the conformance kit itself.

The kit runs in full, through pytest, against a small correct host runtime (``kit_reference.py``).
Deliberately broken runtimes (``kit_broken.py``) each break one contract: the kit's tests for that
contract must fail and every other kit test must still pass.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, ClassVar

import pytest

from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import (
    CAPABILITY_TESTS,
    CONVERSATION_ONLY_TESTS,
    COPY_TESTS,
    IN_PLACE_TESTS,
    SHARED_FILES_TESTS,
    ConformanceContext,
    ConversationContracts,
    ExecuteContracts,
    FileErrorContracts,
    FileSystemContracts,
    LifecycleContracts,
    PrepareContracts,
    RuntimeConformance,
    SearchContracts,
    SkillFactory,
    immutable_host_directory,
    install_backend_spy,
    plugin,
)
from skillruntime.core.testing.skills import ALL_BYTES, POLICY_EXCLUDED_PATHS

GROUPS = (
    PrepareContracts,
    ExecuteContracts,
    FileSystemContracts,
    SearchContracts,
    FileErrorContracts,
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
    makes_unwritable_directories = True
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

    def make_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> SkillRuntime:
        runtime: SkillRuntime = self.runtime_class(
            work_root=working_directory,
            in_place=self.prepares_in_place,
            base_environment=base_environment,
        )
        return runtime

    def make_directory_unwritable(self, runtime: SkillRuntime, path: str) -> Callable[[], None]:
        return immutable_host_directory(path)


class TestReferenceRuntimeConformance(_ReferenceSuite):
    """The whole kit, collected and run by pytest, passes against a correct runtime."""


class TestReferenceRuntimeWithoutConversation(_ReferenceSuite):
    """The whole kit without a conversation: a work root whose ``skills/`` holds the copies."""

    conversation_mode = False


class TestReferenceRuntimeInPlace(_ReferenceSuite):
    """The whole kit without a conversation, preparing skills where they are."""

    conversation_mode = False
    prepares_in_place = True
    resumes_prepared_skills = False


def _outcome(suite: RuntimeConformance, test_name: str, tmp_path: Path) -> str:
    """``passed``, ``failed`` (an assertion of the kit failed) or ``error:<type>`` (the runtime
    under test raised something the kit did not expect)."""
    with ConformanceContext(suite, tmp_path) as context:
        try:
            getattr(suite, test_name)(context)
        except (AssertionError, pytest.fail.Exception):
            return "failed"
        except Exception as error:
            return f"error:{type(error).__name__}"
    return "passed"


def _suite_for(runtime_class: type[Any]) -> RuntimeConformance:
    suite_class = type(
        f"Suite{runtime_class.__name__}",
        (_ReferenceSuite,),
        {
            "runtime_class": runtime_class,
            "conversation_mode": getattr(runtime_class, "kit_conversation_mode", True),
            "prepares_in_place": getattr(runtime_class, "kit_prepares_in_place", False),
            "resumes_prepared_skills": not getattr(runtime_class, "kit_prepares_in_place", False),
            "resolves_symlinks": getattr(runtime_class, "kit_resolves_symlinks", True),
            "timeout_seconds": 0.5,
            "kill_settle_seconds": 0.5,
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
    runtime_class: type[Any],
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The broken contract's tests fail; the other tests of its contract groups pass."""
    # A runtime that resolves relative paths against the process's directory writes there.
    monkeypatch.chdir(tmp_path_factory.mktemp("process-cwd"))
    expected = broken.BROKEN_RUNTIMES[runtime_class]
    suite = _suite_for(runtime_class)
    names = _neighbours(suite, expected)
    assert expected <= set(names)
    outcomes = {name: _outcome(suite, name, tmp_path_factory.mktemp(name[:40])) for name in names}
    failed = {name: outcome for name, outcome in outcomes.items() if outcome != "passed"}
    assert set(failed) == set(expected)
    allowed = getattr(runtime_class, "kit_allowed_errors", frozenset())
    unexpected = {n: o for n, o in failed.items() if o != "failed" and o not in allowed}
    assert not unexpected, "the kit crashed instead of failing an assertion"


def test_every_contract_is_proven_to_fail_by_some_broken_runtime() -> None:
    caught = set().union(*broken.BROKEN_RUNTIMES.values())
    all_contracts = set(_ReferenceSuite.contract_names) | set(
        TestReferenceRuntimeInPlace.contract_names
    )
    assert caught <= all_contracts
    assert len(caught) >= 25


def test_kit_has_at_least_forty_contract_tests() -> None:
    assert len(_ReferenceSuite.contract_names) >= 40


def test_capability_tests_are_removed_not_skipped_when_the_flag_is_off() -> None:
    flags = {flag for flag, _ in CAPABILITY_TESTS.values()}
    without = type("Without", (RuntimeConformance,), dict.fromkeys(flags, False))
    again = type("Again", (without,), dict.fromkeys(flags, True))
    assert len(without.contract_names) == len(again.contract_names) - len(CAPABILITY_TESTS)
    for name in CAPABILITY_TESTS:
        assert without.__dict__[name] is None
        assert name not in without.contract_names
        assert callable(getattr(again, name))
        assert name in again.contract_names


def test_make_runtime_must_be_implemented(tmp_path: Path) -> None:
    class Missing(RuntimeConformance):
        pass

    with pytest.raises(NotImplementedError, match="make_runtime"):
        ConformanceContext(Missing(), tmp_path).runtime()


def test_skill_factory_builds_the_documented_files(tmp_path: Path) -> None:
    factory = SkillFactory(tmp_path)
    skill = factory.create("demo")
    root = Path(skill.base_path)
    assert skill.name == "demo"
    assert (root / "SKILL.md").read_text().startswith("---\nname: demo\n")
    assert (root / "assets/all-bytes.bin").read_bytes() == ALL_BYTES
    assert os.access(root / "scripts/hello.sh", os.X_OK)
    assert not os.access(root / "notes/readme.txt", os.X_OK)
    again = factory.create("demo")
    assert again.base_path != skill.base_path


def test_skill_factory_policy_skill_holds_every_excluded_path(tmp_path: Path) -> None:
    root = Path(SkillFactory(tmp_path).create_with_policy_files("policy").base_path)
    for relative in POLICY_EXCLUDED_PATHS:
        assert (root / relative).is_symlink() or (root / relative).exists(), relative
    assert (root / "linked-secret.txt").is_symlink()
    assert (root / "linked-dir").is_symlink()


def test_backend_spy_counts_commands_and_file_operations(tmp_path: Path) -> None:
    runtime = reference.ReferenceRuntime(conversation_id="spy", conversations_root=str(tmp_path))
    with runtime:
        spy = install_backend_spy(runtime)
        fs = runtime.get_file_system()
        assert spy.count == 0
        fs.write_text("a.txt", "x")
        assert fs.read_text("a.txt") == "x"
        runtime.execute(SkillExecutionRequest(command="true"))
        assert spy.count == 3
        assert spy.calls[-1].startswith("run in ")


def test_plugin_registers_the_marker_and_marks_kit_tests(pytestconfig: pytest.Config) -> None:
    plugin.pytest_configure(pytestconfig)
    markers = pytestconfig.getini("markers")
    assert any(line.startswith("conformance:") for line in markers)

    marks: list[Any] = []
    kit_item = SimpleNamespace(cls=TestReferenceRuntimeConformance, add_marker=marks.append)
    other_item = SimpleNamespace(cls=None, add_marker=marks.append)
    plugin.pytest_collection_modifyitems([kit_item, other_item])  # type: ignore[list-item]
    assert [mark.name for mark in marks] == ["conformance"]


def test_modes_remove_the_contracts_that_do_not_apply() -> None:
    with_conversation = set(TestReferenceRuntimeConformance.contract_names)
    without = set(TestReferenceRuntimeWithoutConversation.contract_names)
    in_place = set(TestReferenceRuntimeInPlace.contract_names)
    assert with_conversation - without == set(CONVERSATION_ONLY_TESTS)
    assert without - in_place == set(COPY_TESTS)
    assert in_place - without == set(IN_PLACE_TESTS)
    assert not IN_PLACE_TESTS & with_conversation
    private = type(
        "PrivateSandboxes",
        (RuntimeConformance,),
        {"conversation_mode": False, "keeps_files_across_runtime_objects": False},
    )
    assert set(private.contract_names) == without - SHARED_FILES_TESTS - {
        "test_writes_into_an_unwritable_directory_are_permission_denied"
    }
    for name in CONVERSATION_ONLY_TESTS | COPY_TESTS:
        assert TestReferenceRuntimeInPlace.__dict__[name] is None, "removed, not skipped"


@pytest.mark.parametrize(
    "flags", [{"prepares_in_place": True}, {"keeps_files_across_runtime_objects": False}]
)
def test_no_conversation_flags_are_refused_with_a_conversation(flags: dict[str, bool]) -> None:
    with pytest.raises(TypeError, match="conversation_mode = False"):
        type("Inconsistent", (RuntimeConformance,), flags)


def test_without_conversation_the_hook_must_be_implemented(tmp_path: Path) -> None:
    class Missing(RuntimeConformance):
        conversation_mode = False

    with pytest.raises(NotImplementedError, match="make_runtime_without_conversation"):
        ConformanceContext(Missing(), tmp_path).runtime()
