"""The sandbox provider the deepagents command line discovers through its entry points."""

from __future__ import annotations

import importlib.metadata
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
