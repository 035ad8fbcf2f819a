"""The old flat module names of core still import, with a warning, the objects of the new homes."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from skillruntime.core._moved import MOVED_MODULES


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_MODULES.items()))
def test_old_name_warns_and_holds_the_new_objects(old: str, new: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        moved = importlib.import_module(old)
    target = importlib.import_module(new)
    public = [name for name in vars(target) if not name.startswith("_")]
    assert public
    for name in public:
        assert getattr(moved, name) is getattr(target, name)
    assert getattr(moved, "__all__", None) == getattr(target, "__all__", None)


FORMER_FLAT_MODULES = {
    "allowed_tools": "skills.allowed_tools",
    "audit": "observability.audit",
    "tracing": "observability.tracing",
    "filesystem": "files.spi",
    "async_filesystem": "files.async_spi",
    "file_search": "files.search",
    "search_command": "files.search_command",
    "publishing": "files.publishing",
    "tools.globbing": "files.globbing",
    "tools.wildcard": "files.wildcard",
    "tools.linear_regex": "files.linear_regex",
    "async_runtime": "runtime.async_spi",
    "runtime_rules": "runtime.rules",
    "workspace": "runtime.workspace",
    "async_workspace": "runtime.async_scoped",
    "runtime.async_workspace": "runtime.async_scoped",
    "bridge": "runtime.bridge",
    "closing": "runtime.closing",
    "output": "runtime.output",
    "exclusive": "conversations.exclusive",
    "async_exclusive": "conversations.async_exclusive",
    "runtime_listings": "plugins.listings",
    "runtime_options": "plugins.options",
}
"""The flat modules of core that moved into its concept packages, old name -> new home."""


@pytest.mark.parametrize(("old", "new"), sorted(FORMER_FLAT_MODULES.items()))
def test_every_former_flat_module_is_served_from_its_package(old: str, new: str) -> None:
    assert MOVED_MODULES[f"skillruntime.core.{old}"] == f"skillruntime.core.{new}"


def test_the_scoped_file_system_is_still_served_by_its_old_module_with_a_warning() -> None:
    from skillruntime.core.runtime import workspace
    from skillruntime.core.runtime.scoped import ScopedFileSystem

    with pytest.warns(DeprecationWarning, match=r"runtime\.scoped"):
        assert workspace.ScopedFileSystem is ScopedFileSystem
    with pytest.raises(AttributeError):
        _ = workspace.NoSuchName  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("files", "read_tool"),
        ("files", "write_tool"),
        ("files", "edit_tool"),
        ("search", "ls_tool"),
        ("search", "glob_tool"),
        ("search", "grep_tool"),
        ("shell", "bash_tool"),
    ],
)
def test_the_tool_builders_are_still_served_by_their_old_modules_with_a_warning(
    module: str, name: str
) -> None:
    from skillruntime.core.tools import runtime_tools

    old = importlib.import_module(f"skillruntime.core.tools.{module}")
    with pytest.warns(DeprecationWarning, match=r"tools\.runtime_tools"):
        assert getattr(old, name) is getattr(runtime_tools, name)
    with pytest.raises(AttributeError):
        _ = old.no_such_tool


def test_the_activator_is_still_served_by_the_skill_module_with_a_warning() -> None:
    from skillruntime.core.tools import activator, skill

    for name in ("SkillActivator", "skill_tool"):
        with pytest.warns(DeprecationWarning, match=r"tools\.activator"):
            assert getattr(skill, name) is getattr(activator, name)


def test_from_import_of_an_old_name_works_in_a_fresh_interpreter() -> None:
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "try:\n"
        "    from skillruntime.core.skillfiles import UploadPolicy\n"
        "except DeprecationWarning as w: print('warned', w)\n"
        "warnings.simplefilter('ignore')\n"
        "from skillruntime.core.skillfiles import UploadPolicy\n"
        "from skillruntime.core.skills.policy import UploadPolicy as New\n"
        "print(UploadPolicy is New)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "warned skillruntime.core.skillfiles is deprecated" in out.stdout
    assert out.stdout.strip().endswith("True")


def test_unknown_names_are_not_served() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("skillruntime.core.no_such_module")


@pytest.mark.parametrize(
    ("package", "names"),
    [
        (
            "skillruntime.core.conversations",
            ["InMemoryConversationStore", "open_conversation_store"],
        ),
        ("skillruntime.core.skills", ["discover_skills", "load_skill", "SKILL_FILE_NAME"]),
        ("skillruntime.core.cli", ["main", "cli", "build_cli"]),
        (
            "skillruntime.core.runtime",
            [
                "BOOTSTRAP_OUTPUT_TAIL",
                "BaseSkillRuntime",
                "PreparedSkill",
                "SkillRuntime",
                "ready_marker_path",
                "run_bootstrap",
            ],
        ),
        (
            "skillruntime.core.plugins",
            [
                "hookimpl",
                "hookspec",
                "create_runtime",
                "create_async_runtime",
                "get_plugin_manager",
                "register_plugin",
                "registered_plugin",
                "RuntimeOptions",
                "RuntimeProvider",
                "RuntimeListing",
                "SkillRuntimeHookSpecs",
            ],
        ),
    ],
)
def test_old_flat_names_that_became_packages_export_the_same_names(
    package: str, names: list[str]
) -> None:
    module = importlib.import_module(package)
    for name in names:
        assert name in module.__all__
        assert hasattr(module, name)


@pytest.mark.parametrize(
    "package",
    [
        "skillruntime.core",
        "skillruntime.core.artifacts",
        "skillruntime.core.conversations",
        "skillruntime.core.skills",
        "skillruntime.core.runtime",
        "skillruntime.core.plugins",
        "skillruntime.local",
        "skillruntime.opensandbox",
        "skillruntime.aio",
        "skillruntime.viking",
        "skillruntime.mcp",
    ],
)
def test_every_lazily_exported_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        assert value is not None
        assert name in dir(module)
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = module.no_such_name
