"""Workspace snapshots: manifests, the listing a sandbox produces, planning, and the stores.

A snapshot of a conversation's workspace is a :class:`Manifest` (paths, kinds, modes, digests,
link targets; never file content) plus the file contents as objects keyed by digest in a
:class:`SnapshotStore` (:class:`LocalSnapshotStore`, :class:`ObjectSnapshotStore`). The
planning helpers are pure: :func:`plan_snapshot` turns a workspace listing (as
:data:`LISTING_SCRIPT` prints it in the sandbox, read by :func:`parse_listing`) and the previous
manifest into the next manifest and the objects to upload; :func:`plan_restore` turns a manifest
and the current listing into the writes and deletions that make the workspace equal to it.
See docs/durability.md.
"""

from __future__ import annotations

from .listing import LISTING_SCRIPT, ListingEntry, listing_command, parse_listing
from .local import LocalSnapshotStore, default_snapshot_dir
from .manifest import MANIFEST_VERSION, Entry, EntryKind, Manifest, check_path
from .objectstore import ObjectSnapshotStore
from .planning import RestorePlan, plan_restore, plan_snapshot
from .spi import RetentionResult, SnapshotRef, SnapshotStore

__all__ = [
    "LISTING_SCRIPT",
    "MANIFEST_VERSION",
    "Entry",
    "EntryKind",
    "ListingEntry",
    "LocalSnapshotStore",
    "Manifest",
    "ObjectSnapshotStore",
    "RestorePlan",
    "RetentionResult",
    "SnapshotRef",
    "SnapshotStore",
    "check_path",
    "default_snapshot_dir",
    "listing_command",
    "parse_listing",
    "plan_restore",
    "plan_snapshot",
]
