"""Workspace durability through a runtime: on-demand snapshots and restores of a conversation's
workspace into a snapshot store (:class:`WorkspaceSnapshots`, :class:`AsyncWorkspaceSnapshots`),
and the automatic ones a runtime handed a :class:`Durability` makes (:mod:`.automatic`).

The layer above ``runtime``: it drives a runtime's public SPI (``execute``, ``get_file_system``)
with the pure pieces of :mod:`skillruntime.core.snapshots`. See docs/durability.md.
"""

from __future__ import annotations

from .async_workspace import AsyncWorkspaceSnapshots
from .automatic import (
    AsyncDurableWorkspace,
    Durability,
    DurableWorkspace,
    snapshot_before_sweep,
)
from .common import RestoreResult, SnapshotResult
from .workspace import WorkspaceSnapshots

__all__ = [
    "AsyncDurableWorkspace",
    "AsyncWorkspaceSnapshots",
    "Durability",
    "DurableWorkspace",
    "RestoreResult",
    "SnapshotResult",
    "WorkspaceSnapshots",
    "snapshot_before_sweep",
]
