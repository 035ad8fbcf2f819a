"""Workspace durability through a runtime: on-demand snapshots and restores of a conversation's
workspace into a snapshot store (:class:`WorkspaceSnapshots`, :class:`AsyncWorkspaceSnapshots`).

The layer above ``runtime``: it drives a runtime's public SPI (``execute``, ``get_file_system``)
with the pure pieces of :mod:`skillruntime.core.snapshots`. See docs/durability.md.
"""

from __future__ import annotations

from .async_workspace import AsyncWorkspaceSnapshots
from .common import RestoreResult, SnapshotResult
from .workspace import WorkspaceSnapshots

__all__ = ["AsyncWorkspaceSnapshots", "RestoreResult", "SnapshotResult", "WorkspaceSnapshots"]
