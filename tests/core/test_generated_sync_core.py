"""Core's generated sync modules: listed in ``skillruntime-core/unasync.toml``, marked as generated.

``tests/aio/test_generated_sync.py`` checks that every generated module of the repository matches
its async source; this suite checks that core's twins are among them and that the two faces of
the exclusive guards export the same names.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from skillruntime.core.conversations import async_exclusive, exclusive

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "generate_sync.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_sync", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("generate_sync", module)
    spec.loader.exec_module(module)
    return module


def test_the_core_sync_modules_are_generated_and_say_so() -> None:
    config = _generator().load_config(ROOT / "skillruntime-core" / "unasync.toml")
    assert {(twin.source.name, twin.target.name) for twin in config.twins} >= {
        ("async_exclusive.py", "exclusive.py")
    }
    for twin in config.twins:
        text = twin.target.read_text(encoding="utf-8")
        assert text.startswith(f"# Generated from {twin.source.name} by scripts/generate_sync.py")
        assert "async def" not in text
        assert "await " not in text
        assert "# unasync:" not in text


def test_both_faces_of_the_exclusive_guards_export_the_same_names() -> None:
    unprefixed = {name.removeprefix("Async") for name in async_exclusive.__all__}
    assert unprefixed == set(exclusive.__all__)
    assert exclusive.workspace_guard.__kwdefaults__["guard_type"] is exclusive.ConversationGuard
    async_default = async_exclusive.workspace_guard.__kwdefaults__["guard_type"]
    assert async_default is async_exclusive.AsyncConversationGuard
    assert issubclass(exclusive.ConversationGuard, exclusive.ConversationGuardBase)
    assert async_exclusive.ConversationGuardBase is exclusive.ConversationGuardBase
