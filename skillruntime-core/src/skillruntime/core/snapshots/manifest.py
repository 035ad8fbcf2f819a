"""The snapshot manifest: what a workspace held, as paths, kinds, modes and digests.

A manifest never holds file content or anything read from a file: only relative paths, kinds
(``file``, ``directory``, ``symlink``), mode bits, sizes and sha256 digests of files, and the
targets of symlinks (each resolving inside the workspace, else :class:`SymlinkEscapeError`).
Its JSON form is canonical (sorted keys, no spaces, ASCII, ``None`` fields left out, entries
sorted by the bytes of their path), and a snapshot's id is the sha256 of that JSON, so equal
manifests have equal ids and a changed byte in a stored manifest is detected on read.

Version 2 (:data:`MANIFEST_VERSION`) may also hold, to let a later snapshot reuse digests
(docs/durability.md, "Digest reuse"): each file's **stat key** as the listing reported it
(``stat``: device, inode, size, modification and change times), the sandbox's clock when that
listing started (``listed_ns``) and a tag of the runtime and workspace that listed it
(``lister``). None of them is content; a version 1 manifest (without them) is read as before.

Paths are ``str``: a name that is not UTF-8 is kept with ``surrogateescape`` (``os.fsdecode``)
and appears in the JSON as ``\\udcXX`` escapes, so any POSIX name round-trips byte for byte.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from ..errors import SnapshotManifestError, SnapshotPathError, SymlinkEscapeError

__all__ = [
    "MANIFEST_VERSION",
    "SUPPORTED_VERSIONS",
    "Entry",
    "EntryKind",
    "Manifest",
    "check_path",
    "is_digest",
    "is_stat_key",
    "snapshot_id_of",
]

MANIFEST_VERSION = 2
"""The newest manifest format this code writes and reads: 2 adds the stat keys (module
docstring); a manifest without them is written as version 1, as before."""

SUPPORTED_VERSIONS = (1, 2)
"""The manifest formats this code reads (a reader refuses any other)."""

_STAT_KEY = re.compile(r"[0-9]{1,20}:[0-9]{1,20}:[0-9]{1,20}(:[0-9]{1,20}(\.[0-9]{1,10})?){2}")


def is_stat_key(value: object) -> bool:
    """Whether ``value`` has the shape of a fast listing's stat key (``%D:%i:%s:%T@:%C@``:
    device, inode, size, modification and change times; ASCII digits, at most 120 chars)."""
    return isinstance(value, str) and len(value) <= 120 and _STAT_KEY.fullmatch(value) is not None


EntryKind = Literal["file", "directory", "symlink"]

_DIGEST = re.compile(r"[0-9a-f]{64}")
_MAX_LINK_HOPS = 40  # as Linux's ELOOP bound


def is_digest(value: object) -> bool:
    """Whether ``value`` is a sha256 digest as the store keys objects: 64 lowercase hex digits."""
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


def check_path(path: str) -> str:
    """``path`` if it is relative, POSIX and normalized, else :class:`SnapshotPathError`."""
    if not isinstance(path, str) or not path:
        raise SnapshotPathError("a manifest path must be a non-empty string")
    if "\0" in path:
        raise SnapshotPathError("a manifest path must not contain NUL")
    if path[0] == "/":
        raise SnapshotPathError(f"a manifest path must be relative: {path[:200]!r}")
    padded = f"/{path}/"  # an empty, "." or ".." part shows as "//", "/./" or "/../"
    if "//" in padded or "/./" in padded or "/../" in padded:
        raise SnapshotPathError(
            f"a manifest path must be normalized (no empty, '.' or '..' part): {path[:200]!r}"
        )
    return path


def _path_key(path: str) -> bytes:
    return os.fsencode(path)


class Entry(BaseModel):
    """One entry of a workspace: a file (``size`` and ``digest``), a directory, or a symlink
    (``target``). ``mode`` holds the permission bits (``0o7777`` at most)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    path: str
    kind: EntryKind
    mode: int
    size: int | None = None
    digest: str | None = None
    target: str | None = None
    stat: str | None = None

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return check_path(value)

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> Entry:
        _check_fields(
            self.path,
            self.kind,
            self.mode,
            size=self.size,
            digest=self.digest,
            target=self.target,
            stat=self.stat,
        )
        return self

    @classmethod
    def checked(
        cls,
        path: str,
        kind: str,
        mode: int,
        *,
        size: int | None = None,
        digest: str | None = None,
        target: str | None = None,
        stat: str | None = None,
    ) -> Entry:
        """The entry of these fields, checked as validation checks them (strict types, a
        normalized relative path, the fields its kind needs) but without pydantic's per-model
        validation: the bulk path of a manifest built from a listing of many entries.
        :class:`SnapshotManifestError` (or :class:`SnapshotPathError`) when they do not fit."""
        if type(path) is not str or kind not in _KINDS or type(mode) is not int:
            raise SnapshotManifestError("an entry needs a str path, a known kind and an int mode")
        if (
            (size is not None and type(size) is not int)
            or (digest is not None and type(digest) is not str)
            or (target is not None and type(target) is not str)
            or (stat is not None and type(stat) is not str)
        ):
            raise SnapshotManifestError(f"an entry field of {path[:200]!r} has the wrong type")
        check_path(path)
        _check_fields(path, kind, mode, size=size, digest=digest, target=target, stat=stat)
        # what ``model_construct`` does, without its per-field loop: the instance a validation
        # of the same fields makes (equal to it, the same dump)
        entry = cls.__new__(cls)
        fields = {"path", "kind", "mode"}
        if size is not None:
            fields.add("size")
        if digest is not None:
            fields.add("digest")
        if target is not None:
            fields.add("target")
        if stat is not None:
            fields.add("stat")
        values = {
            "path": path,
            "kind": kind,
            "mode": mode,
            "size": size,
            "digest": digest,
            "target": target,
            "stat": stat,
        }
        object.__setattr__(entry, "__dict__", values)
        object.__setattr__(entry, "__pydantic_fields_set__", fields)
        object.__setattr__(entry, "__pydantic_extra__", None)
        object.__setattr__(entry, "__pydantic_private__", None)
        return entry


_KINDS = frozenset(("file", "directory", "symlink"))


def _check_fields(
    path: str,
    kind: str,
    mode: int,
    *,
    size: int | None,
    digest: str | None,
    target: str | None,
    stat: str | None,
) -> None:
    """The rules every entry keeps whatever way it is made: the mode's range, and the fields
    its kind needs and no others (a stat key only on a file, of its shape)."""
    if stat is not None and (kind != "file" or not is_stat_key(stat)):
        raise SnapshotManifestError(f"the stat key of {path[:200]!r} is malformed")
    if not 0 <= mode <= 0o7777:
        raise SnapshotManifestError(f"mode of {path[:200]!r} is out of range")
    if kind == "file":
        if size is None or size < 0 or not is_digest(digest):
            raise SnapshotManifestError(
                f"file {path[:200]!r} needs a size and a sha256 digest (64 hex digits)"
            )
        if target is not None:
            raise SnapshotManifestError(f"file {path[:200]!r} has a target")
    elif kind == "symlink":
        if not target or "\0" in target:
            raise SnapshotManifestError(f"symlink {path[:200]!r} needs a target")
        if size is not None or digest is not None:
            raise SnapshotManifestError(f"symlink {path[:200]!r} has a size or digest")
    elif size is not None or digest is not None or target is not None:
        raise SnapshotManifestError(f"directory {path[:200]!r} has file or link fields")


class Manifest(BaseModel):
    """A snapshot of one conversation's workspace (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = 1
    conversation: str
    created: datetime
    parent: str | None = None
    entries: tuple[Entry, ...] = ()
    listed_ns: int | None = None
    lister: str | None = None

    @field_validator("created")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise SnapshotManifestError("a manifest's created time must be timezone-aware")
        return value.astimezone(UTC)

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        if self.version not in SUPPORTED_VERSIONS:
            raise SnapshotManifestError(
                f"manifest version {self.version} is not supported (this reader: "
                f"{', '.join(map(str, SUPPORTED_VERSIONS))})"
            )
        reuse = self.listed_ns is not None or self.lister is not None
        if self.version < 2 and (reuse or any(entry.stat is not None for entry in self.entries)):
            raise SnapshotManifestError("stat keys need manifest version 2")
        if reuse and (
            type(self.listed_ns) is not int or self.listed_ns < 0 or not is_digest(self.lister)
        ):
            raise SnapshotManifestError("a manifest's listing time and lister go together")
        if not self.conversation:
            raise SnapshotManifestError("a manifest needs its conversation")
        if self.parent is not None and not is_digest(self.parent):
            raise SnapshotManifestError("a manifest's parent must be a snapshot id")
        keys = [_path_key(entry.path) for entry in self.entries]
        if keys != sorted(keys):
            # keep the canonical order whatever order the caller gave
            ordered = tuple(sorted(self.entries, key=lambda e: _path_key(e.path)))
            object.__setattr__(self, "entries", ordered)
        by_path: dict[str, Entry] = {}
        for entry in self.entries:
            if entry.path in by_path:
                raise SnapshotManifestError(f"duplicate manifest path {entry.path[:200]!r}")
            by_path[entry.path] = entry
        for entry in self.entries:
            parent = entry.path.rpartition("/")[0]
            if parent and by_path.get(parent) is None:
                raise SnapshotManifestError(
                    f"{entry.path[:200]!r} has no directory entry for its parent"
                )
            if parent and by_path[parent].kind != "directory":
                raise SnapshotManifestError(f"{entry.path[:200]!r} lies under a non-directory")
        links = {entry.path: entry.target for entry in self.entries if entry.kind == "symlink"}
        for path in links:
            check_link(path, links)
        return self

    # -- canonical form ---------------------------------------------------------------------------

    def canonical_json(self) -> bytes:
        """The canonical JSON bytes (what is stored, and what the id is the digest of); made
        once per manifest (it is immutable)."""
        return self.canonical

    @functools.cached_property
    def canonical(self) -> bytes:
        """:meth:`canonical_json`, kept on the (frozen) manifest after its first use."""
        data: dict[str, Any] = {
            "version": self.version,
            "conversation": self.conversation,
            "created": self.created.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "entries": [_entry_data(entry) for entry in self.entries],
        }
        if self.parent is not None:
            data["parent"] = self.parent
        if self.listed_ns is not None:
            data["listed_ns"] = self.listed_ns
        if self.lister is not None:
            data["lister"] = self.lister
        return json.dumps(
            data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
        ).encode("ascii")

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> Manifest:
        """A copy (pydantic's), without the canonical form and id kept on this one: an
        ``update`` may change what they are made of."""
        copy = super().model_copy(update=update, deep=deep)
        for name in _CACHED:
            copy.__dict__.pop(name, None)
        return copy

    @functools.cached_property
    def snapshot_id(self) -> str:
        """The sha256 (hex) of :meth:`canonical_json`."""
        return snapshot_id_of(self.canonical_json())

    @classmethod
    def from_json(cls, data: bytes | str) -> Manifest:
        """Parse a manifest (canonical or not); malformed input raises
        :class:`SnapshotManifestError` (or one of its subclasses)."""
        try:
            raw = json.loads(data)
        except (ValueError, UnicodeDecodeError) as error:
            raise SnapshotManifestError(f"manifest is not JSON: {error}") from None
        if not isinstance(raw, dict):
            raise SnapshotManifestError("manifest is not a JSON object")
        return cls.from_data(raw)

    @classmethod
    def from_data(cls, raw: Mapping[str, Any]) -> Manifest:
        """Validate a decoded manifest, turning pydantic's errors into typed ones."""
        try:
            return cls.model_validate(dict(raw))
        except ValidationError as error:
            raise SnapshotManifestError(f"invalid manifest: {_summary(error)}") from None

    def same_content(self, other: Manifest) -> bool:
        """Whether ``other`` holds the same entries (paths, kinds, modes, sizes, digests and
        targets), whatever their stat keys: a workspace whose files were only touched, or
        restored elsewhere, is unchanged."""
        if len(self.entries) != len(other.entries):
            return False
        return all(
            mine.path == theirs.path
            and mine.kind == theirs.kind
            and mine.mode == theirs.mode
            and mine.size == theirs.size
            and mine.digest == theirs.digest
            and mine.target == theirs.target
            for mine, theirs in zip(self.entries, other.entries, strict=True)
        )

    @property
    def files(self) -> Iterable[Entry]:
        return (entry for entry in self.entries if entry.kind == "file")

    def digests(self) -> set[str]:
        """The digests of the objects the manifest's files need."""
        return {entry.digest for entry in self.files if entry.digest is not None}

    def total_size(self) -> int:
        return sum(entry.size or 0 for entry in self.files)


_CACHED = ("canonical", "snapshot_id")
"""What a manifest keeps once made (``functools.cached_property``, outside its fields)."""


def _entry_data(entry: Entry) -> dict[str, Any]:
    """``entry.model_dump(exclude_none=True)``, without pydantic's serializer per entry."""
    data: dict[str, Any] = {"path": entry.path, "kind": entry.kind, "mode": entry.mode}
    if entry.size is not None:
        data["size"] = entry.size
    if entry.digest is not None:
        data["digest"] = entry.digest
    if entry.target is not None:
        data["target"] = entry.target
    if entry.stat is not None:
        data["stat"] = entry.stat
    return data


def snapshot_id_of(canonical: bytes) -> str:
    return hashlib.sha256(canonical).hexdigest()


def check_link(path: str, links: Mapping[str, str | None]) -> None:
    """Refuse symlink ``path`` unless its target resolves inside the workspace.

    Resolution follows the other links of the workspace (``links``: path -> target), as the
    kernel would: ``a -> .`` and ``b -> a/..`` together leave the workspace although each looks
    harmless lexically. A component that is not a link (or not in the manifest) is taken as a
    directory; ``..`` above the root is an escape. A loop (more than 40 links followed, as the
    kernel's bound) is kept: following it fails, it reaches nothing.
    """
    target = links[path]
    if not target:
        raise SymlinkEscapeError(f"symlink {path[:200]!r} has no target")
    if target.startswith("/"):
        raise SymlinkEscapeError(
            f"symlink {path[:200]!r} points outside the workspace (absolute target)"
        )
    parent = path.split("/")[:-1]
    pending = target.split("/")
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not parent:
                raise SymlinkEscapeError(f"symlink {path[:200]!r} points outside the workspace")
            parent.pop()
            continue
        candidate = "/".join([*parent, part])
        link = links.get(candidate)
        if link is None:
            parent.append(part)
            continue
        hops += 1
        if hops > _MAX_LINK_HOPS:
            return  # a loop: following it fails with ELOOP, it reaches nothing, in or out
        if link.startswith("/"):
            raise SymlinkEscapeError(f"symlink {path[:200]!r} resolves through an absolute link")
        pending = link.split("/") + pending


def _summary(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:3]:
        where = ".".join(str(loc) for loc in item.get("loc", ()))
        parts.append(f"{where}: {item.get('msg', '')}"[:200])
    return "; ".join(parts)
