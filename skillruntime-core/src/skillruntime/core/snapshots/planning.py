"""Pure planning: from a listing to a manifest, from a manifest to a restore (no I/O).

:func:`plan_snapshot` builds the next manifest of a conversation from its workspace listing and
names the objects to upload: the digests its previous manifest does not already have (ask the
store's ``has_objects`` about those before reading any file from the sandbox).
:func:`plan_restore` compares a manifest with the current listing and says what to delete and
what to write so that the workspace equals the manifest.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ..errors import SnapshotListingError
from .listing import ListingEntry
from .manifest import Entry, Manifest, is_stat_key

__all__ = ["RestorePlan", "plan_restore", "plan_snapshot"]


def _key(path: str) -> bytes:
    return os.fsencode(path)


def plan_snapshot(
    listing: Sequence[ListingEntry],
    previous: Manifest | None,
    *,
    conversation: str | None = None,
    created: datetime | None = None,
    skip_special: bool = False,
    stat_keys: Mapping[str, str] | None = None,
    listed_ns: int | None = None,
    lister: str | None = None,
) -> tuple[Manifest, list[str]]:
    """``(manifest, digests to upload)`` for a workspace listed as ``listing``.

    ``conversation`` defaults to the previous manifest's; the new manifest's parent is the
    previous one's id. An entry that is neither file, directory nor symlink (a FIFO, a socket,
    a device) raises :class:`SnapshotListingError` unless ``skip_special`` leaves it out; a link
    out of the workspace raises :class:`SymlinkEscapeError` (from the manifest's validation).

    With ``listed_ns`` and ``lister`` (the listing's start on the sandbox's clock, the tag of
    what listed it) the manifest is version 2 and keeps each file's stat key from
    ``stat_keys`` (by path; a key of another shape is left out, never refused: it comes from
    the sandbox), for a later snapshot's digest reuse (docs/durability.md, "Digest reuse").
    """
    if conversation is None:
        if previous is None:
            raise SnapshotListingError("plan_snapshot needs a conversation or a previous manifest")
        conversation = previous.conversation
    keys = stat_keys if listed_ns is not None and lister is not None else None
    entries = []
    for item in listing:
        if item.kind == "special":
            if skip_special:
                continue
            raise SnapshotListingError(
                f"{item.path[:200]!r} is not a file, directory or symlink; it cannot be kept"
            )
        # the bulk path: the same checks as Entry's validation, without pydantic per entry
        entries.append(
            Entry.checked(
                item.path,
                item.kind,
                item.mode,
                size=item.size,
                digest=item.digest,
                target=item.target,
                stat=_stat(keys, item.path) if item.kind == "file" else None,
            )
        )
    manifest = Manifest(
        version=2 if keys is not None else 1,
        listed_ns=listed_ns if keys is not None else None,
        lister=lister if keys is not None else None,
        conversation=conversation,
        created=created or datetime.now(UTC),
        parent=previous.snapshot_id if previous is not None else None,
        entries=tuple(entries),
    )
    known = previous.digests() if previous is not None else set()
    return manifest, sorted(manifest.digests() - known)


def _stat(keys: Mapping[str, str] | None, path: str) -> str | None:
    if keys is None:
        return None
    key = keys.get(path)
    return key if is_stat_key(key) else None


@dataclass(frozen=True)
class RestorePlan:
    """What turns the current workspace into the manifest's, in the order to apply it:

    1. ``delete``: remove these paths (a directory with everything under it), top-most only;
    2. ``make_directories``: create these (parents first), writable by their owner;
    3. ``write_files``: write each file's object (by digest) and set its mode;
    4. ``make_symlinks``: create these links;
    5. ``set_modes``: the directories just created, and the files and directories that stay
       but whose mode differs (files first, then directories deepest first, so that a
       read-only directory is made read-only after everything under it was written).
    """

    delete: tuple[str, ...] = ()
    make_directories: tuple[Entry, ...] = ()
    write_files: tuple[Entry, ...] = ()
    make_symlinks: tuple[Entry, ...] = ()
    set_modes: tuple[Entry, ...] = ()

    @property
    def empty(self) -> bool:
        return not (
            self.delete
            or self.make_directories
            or self.write_files
            or self.make_symlinks
            or self.set_modes
        )

    def digests(self) -> set[str]:
        """The objects the restore reads from the store."""
        return {entry.digest for entry in self.write_files if entry.digest is not None}


def plan_restore(manifest: Manifest, current: Sequence[ListingEntry]) -> RestorePlan:
    """The steps that make a workspace listed as ``current`` equal to ``manifest``."""
    wanted = {entry.path: entry for entry in manifest.entries}
    present = {entry.path: entry for entry in current}
    doomed: set[str] = set()
    for path, listed in present.items():
        target = wanted.get(path)
        changed_link = (
            target is not None and target.kind == "symlink" and target.target != listed.target
        )
        if target is None or target.kind != listed.kind or changed_link:
            doomed.add(path)
    # only the top-most of the deleted paths: a directory takes its contents with it
    delete = sorted((path for path in doomed if not _under_any(path, doomed)), key=_key)
    gone = set(doomed) | {path for path in present if _under_any(path, doomed)}
    make_directories: list[Entry] = []
    write_files: list[Entry] = []
    make_symlinks: list[Entry] = []
    set_modes: list[Entry] = []
    for entry in manifest.entries:  # sorted by path: parents before children
        item = None if entry.path in gone else present.get(entry.path)
        if entry.kind == "directory":
            if item is None:
                make_directories.append(entry)
                set_modes.append(entry)
            elif item.mode != entry.mode:
                set_modes.append(entry)
        elif entry.kind == "file":
            if item is None or item.digest != entry.digest or item.size != entry.size:
                write_files.append(entry)
            elif item.mode != entry.mode:
                set_modes.append(entry)
        elif item is None:
            make_symlinks.append(entry)
    set_modes.sort(key=lambda entry: (entry.kind == "directory", -entry.path.count("/")))
    return RestorePlan(
        delete=tuple(delete),
        make_directories=tuple(make_directories),
        write_files=tuple(write_files),
        make_symlinks=tuple(make_symlinks),
        set_modes=tuple(set_modes),
    )


def _under_any(path: str, roots: set[str]) -> bool:
    parts = path.split("/")
    return any("/".join(parts[:depth]) in roots for depth in range(1, len(parts)))
