"""The sandbox provider the deepagents command line discovers through its entry points."""

from __future__ import annotations

import importlib.metadata
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.errors import RuntimeClosedError
from skillruntime.deepagents import SkillRuntimeBackend, SkillRuntimeSandboxProvider


def _discovered() -> SkillRuntimeSandboxProvider:
    """What the CLI's registry does: load the entry point and call it with no arguments."""
    (entry,) = [
        e
        for e in importlib.metadata.entry_points(group="deepagents_code.sandbox_providers")
        if e.name == "skillruntime"
    ]
    provider = entry.load()()
    assert isinstance(provider, SkillRuntimeSandboxProvider)
    return provider


@dataclass(frozen=True)
class SandboxProviderMetadata:
    """deepagents-code 0.2.2's ``SandboxProviderMetadata`` (its fields and defaults; the same
    in 0.1.88)."""

    name: str
    working_dir: str
    install: object | None = None
    supports_sandbox_id: bool = True
    supports_snapshot_name: bool = False
    backend_module: str | None = None


@pytest.fixture
def cli_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's ``deepagents_code.integrations.sandbox_provider`` module, as installed with it
    (the CLI itself, 0.2.2, needs Python 3.14; its releases for 3.11-3.13 pin deepagents
    <= 0.7.30: docs/deepagents.md)."""
    modules = {
        "deepagents_code": types.ModuleType("deepagents_code"),
        "deepagents_code.integrations": types.ModuleType("deepagents_code.integrations"),
        "deepagents_code.integrations.sandbox_provider": types.ModuleType(
            "deepagents_code.integrations.sandbox_provider"
        ),
    }
    modules["deepagents_code.integrations.sandbox_provider"].SandboxProviderMetadata = (  # type: ignore[attr-defined]
        SandboxProviderMetadata
    )
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)


def _announced_working_dir() -> str:
    """What deepagents-code 0.2.2 puts in the model's prompt: ``get_default_working_dir`` →
    a new registry → a new provider from the entry point → ``_provider_metadata``, which takes
    ``provider.metadata`` when it is a ``SandboxProviderMetadata`` and else ``/workspace``."""
    provider = _discovered()
    meta = getattr(provider, "metadata", None)
    if isinstance(meta, SandboxProviderMetadata):
        return meta.working_dir
    return "/workspace"


@pytest.mark.usefixtures("cli_protocol")
def test_the_cli_announces_the_conversation_workspace_and_the_model_can_write_there(
    tmp_path: Path,
) -> None:
    """The CLI's flow: create_sandbox (get_or_create without an id), then the prompt's working
    directory from a new provider's metadata; the model writes below that directory."""
    params = {"runtime": "local", "conversations_root": str(tmp_path)}
    provider = _discovered()
    backend = provider.get_or_create(sandbox_id=None, **params)
    try:
        announced = _announced_working_dir()
        assert announced == backend.runtime.default_working_directory
        assert announced == str((tmp_path / backend.id).resolve())
        written = backend.write(f"{announced}/src/app.py", "print('hi')\n")
        assert written.error is None
        assert backend.execute("python3 src/app.py").output == "hi\n"
        assert backend.write("/workspace/src/app.py", "x").error is not None  # the old guess
        meta = _discovered().metadata
        assert isinstance(meta, SandboxProviderMetadata)
        assert (meta.name, meta.supports_sandbox_id, meta.supports_snapshot_name) == (
            "skillruntime",
            True,
            False,
        )
    finally:
        provider.delete(sandbox_id=backend.id)
    assert _announced_working_dir() != announced  # a deleted sandbox is announced no more


@pytest.mark.usefixtures("cli_protocol")
def test_the_announced_directory_follows_the_latest_live_sandbox(tmp_path: Path) -> None:
    params = {"runtime": "local", "conversations_root": str(tmp_path)}
    provider = _discovered()
    first = provider.get_or_create(sandbox_id="cli-a", **params)
    second = _discovered().get_or_create(sandbox_id="cli-b", **params)
    try:
        assert _announced_working_dir() == second.runtime.default_working_directory
        provider.get_or_create(sandbox_id="cli-a", **params)  # reattached: the latest again
        assert _announced_working_dir() == first.runtime.default_working_directory
        provider.delete(sandbox_id="cli-a")
        assert _announced_working_dir() == second.runtime.default_working_directory
    finally:
        _discovered().delete(sandbox_id="cli-b", **params)


def test_without_the_cli_installed_there_is_no_metadata() -> None:
    assert "deepagents_code" not in sys.modules
    assert _discovered().metadata is None


def test_the_sandbox_id_is_the_conversation_and_resumes_in_a_new_provider(tmp_path: Path) -> None:
    params = {"runtime": "local", "conversations_root": str(tmp_path)}
    first_provider = _discovered()
    first = first_provider.get_or_create(sandbox_id="cli-1", **params)
    assert isinstance(first, SkillRuntimeBackend)
    assert first.id == "cli-1"
    notes = f"{first.runtime.default_working_directory}/notes.txt"
    assert first.write(notes, "kept\n").error is None
    assert first.runtime.default_working_directory == str((tmp_path / "cli-1").resolve())

    provider = _discovered()  # another CLI process
    again = provider.get_or_create(sandbox_id="cli-1", **params)
    assert again.execute("cat notes.txt").output == "kept\n"
    assert provider.get_or_create(sandbox_id="cli-1", **params).runtime is again.runtime
    provider.delete(sandbox_id="cli-1")
    with pytest.raises(RuntimeClosedError):
        again.execute("true")
    fresh = provider.get_or_create(**params)
    assert fresh.id.startswith("deepagents-")
    assert fresh.id != "cli-1"
    provider.delete(sandbox_id=fresh.id)
    first_provider.delete(sandbox_id="cli-1")  # the first process ends its own runtime too


def test_unknown_options_fail_before_anything_is_built(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="no_such_option"):
        _discovered().get_or_create(sandbox_id="cli-2", runtime="local", no_such_option=1)


def test_deleting_an_opensandbox_conversation_destroys_its_sandbox(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    params = {
        "runtime": "opensandbox",
        "domain": opensandbox_double.domain,
        "api_key": opensandbox_double.api_key,
    }
    before = {s["id"] for s in opensandbox_double.sandboxes()}
    provider = _discovered()
    backend = provider.get_or_create(sandbox_id="cli-os", **params)
    assert backend.execute("echo up").output == "up\n"
    assert len({s["id"] for s in opensandbox_double.sandboxes()} - before) == 1
    provider.delete(sandbox_id="cli-os")
    assert {s["id"] for s in opensandbox_double.sandboxes()} == before
