"""Where audit events go beyond the log: the hook source the plugin layer hands in.

Observability sits below the plugins, so it never imports the plugin registry; instead the layer
above hands in a function that returns the current implementations of the
``skillruntime_audit_event`` hook (``skillruntime.core`` does so when it is imported, with a
source that loads the registry on the first event). This module imports nothing, so handing the
source in costs nothing at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["HookSource", "hook_implementations", "set_hook_source"]

HookSource = Callable[[], list[Any]]
"""Returns the current implementations of the ``skillruntime_audit_event`` hook (pluggy
``HookImpl`` objects: ``function``, ``argnames``, ``plugin_name``)."""

_hook_source: HookSource | None = None


def set_hook_source(source: HookSource | None) -> HookSource | None:
    """Hand in where the audit hook's implementations come from; returns the previous source.

    With no source (``None``) audit events go to the audit logger only.
    """
    global _hook_source
    previous, _hook_source = _hook_source, source
    return previous


def hook_implementations() -> list[Any]:
    """The current implementations of the audit hook, from the source handed in (none without)."""
    source = _hook_source
    return [] if source is None else source()
