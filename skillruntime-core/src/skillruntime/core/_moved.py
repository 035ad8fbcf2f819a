"""Old flat module names of core, kept importable while they are deprecated.

The conversation stores, the command line and the skill modules became packages; importing an old
name (``skillruntime.core.sql``, ``skillruntime.core.cli_runtime``, ...) still works and gives a
module holding the same public objects as the new home, with a :class:`DeprecationWarning` naming
it. The old files are gone (no stub files), so each moved module keeps its history in one place.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

__all__ = ["MOVED_MODULES", "install"]

MOVED_MODULES: dict[str, str] = {
    "skillruntime.core.sql": "skillruntime.core.conversations.sql",
    "skillruntime.core.sql_deadline": "skillruntime.core.conversations.sql_deadline",
    "skillruntime.core.conversation_plugin": "skillruntime.core.conversations.plugin",
    "skillruntime.core.skillfiles": "skillruntime.core.skills.files",
    "skillruntime.core.cli_runtime": "skillruntime.core.cli.runtime",
    "skillruntime.core.cli_errors": "skillruntime.core.cli.errors",
    "skillruntime.core.cli_progress": "skillruntime.core.cli.progress",
    "skillruntime.core.cli_skills": "skillruntime.core.cli.skills",
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
