"""Old flat module names of core, kept importable while they are deprecated.

The conversation stores, the command line, the skill modules and then every flat module of core
(runtime, files, observability, plugins) became packages; importing an old name
(``skillruntime.core.sql``, ``skillruntime.core.audit``, ``skillruntime.core.tools.globbing``, ...)
still works and gives a module holding the same public objects as the new home, with a
:class:`DeprecationWarning` naming it. The old files are gone (no stub files), so each moved module
keeps its history in one place. Two old modules share their name with the package that replaced
them (``skillruntime.core.runtime`` and ``skillruntime.core.plugins``): those packages serve the
old modules' names themselves. A single name that moved out of a module that stays is served by
that module's ``__getattr__`` (:func:`moved_names`).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

__all__ = ["MOVED_MODULES", "install", "moved_names"]

MOVED_MODULES: dict[str, str] = {
    "skillruntime.core.sql": "skillruntime.core.conversations.sql",
    "skillruntime.core.sql_deadline": "skillruntime.core.conversations.sql_deadline",
    "skillruntime.core.conversation_plugin": "skillruntime.core.conversations.plugin",
    "skillruntime.core.skillfiles": "skillruntime.core.skills.files",
    "skillruntime.core.cli_runtime": "skillruntime.core.cli.runtime",
    "skillruntime.core.cli_errors": "skillruntime.core.cli.errors",
    "skillruntime.core.cli_progress": "skillruntime.core.cli.progress",
    "skillruntime.core.cli_skills": "skillruntime.core.cli.skills",
    "skillruntime.core.allowed_tools": "skillruntime.core.skills.allowed_tools",
    "skillruntime.core.audit": "skillruntime.core.observability.audit",
    "skillruntime.core.tracing": "skillruntime.core.observability.tracing",
    "skillruntime.core.filesystem": "skillruntime.core.files.spi",
    "skillruntime.core.async_filesystem": "skillruntime.core.files.async_spi",
    "skillruntime.core.file_search": "skillruntime.core.files.search",
    "skillruntime.core.search_command": "skillruntime.core.files.search_command",
    "skillruntime.core.publishing": "skillruntime.core.files.publishing",
    "skillruntime.core.tools.globbing": "skillruntime.core.files.globbing",
    "skillruntime.core.tools.wildcard": "skillruntime.core.files.wildcard",
    "skillruntime.core.tools.linear_regex": "skillruntime.core.files.linear_regex",
    "skillruntime.core.async_runtime": "skillruntime.core.runtime.async_spi",
    "skillruntime.core.runtime_rules": "skillruntime.core.runtime.rules",
    "skillruntime.core.workspace": "skillruntime.core.runtime.workspace",
    "skillruntime.core.async_workspace": "skillruntime.core.runtime.async_scoped",
    "skillruntime.core.runtime.async_workspace": "skillruntime.core.runtime.async_scoped",
    "skillruntime.core.bridge": "skillruntime.core.runtime.bridge",
    "skillruntime.core.closing": "skillruntime.core.runtime.closing",
    "skillruntime.core.output": "skillruntime.core.runtime.output",
    "skillruntime.core.exclusive": "skillruntime.core.conversations.exclusive",
    "skillruntime.core.async_exclusive": "skillruntime.core.conversations.async_exclusive",
    "skillruntime.core.runtime_listings": "skillruntime.core.plugins.listings",
    "skillruntime.core.runtime_options": "skillruntime.core.plugins.options",
}
"""Old module name -> the module that now holds its contents."""


class _MovedLoader:
    """Builds the old module as a copy of the new one's public namespace (an import loader)."""

    def __init__(self, new_name: str) -> None:
        self._new_name = new_name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        """Let the import system create a plain module."""
        return None

    def exec_module(self, module: ModuleType) -> None:
        warnings.warn(
            f"{module.__name__} is deprecated: import {self._new_name} instead",
            DeprecationWarning,
            stacklevel=2,
        )
        target = importlib.import_module(self._new_name)
        module.__dict__.update(
            {name: value for name, value in vars(target).items() if not name.startswith("__")}
        )
        module.__doc__ = target.__doc__
        names = getattr(target, "__all__", None)
        if names is not None:
            module.__dict__["__all__"] = list(names)


class _MovedFinder:
    """Finds only the names in :data:`MOVED_MODULES`; every other import passes through."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        new_name = MOVED_MODULES.get(fullname)
        if new_name is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader(new_name))  # type: ignore[arg-type]


def install() -> None:
    """Register the finder once per interpreter (idempotent)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())


def moved_names(module: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module`` serving each name of ``moved`` (name -> the
    module that now holds it) with a :class:`DeprecationWarning`. The new module is imported by
    name when the old name is first asked for, so the old module does not import it (it may sit
    above it)."""

    def serve(name: str) -> Any:
        new_module = moved.get(name)
        if new_module is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(f"{module}.{name} moved to {new_module}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new_module), name)

    return serve
