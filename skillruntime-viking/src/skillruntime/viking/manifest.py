"""Turning a ``GET /api/v1/skills/<name>`` integrity answer into a verified manifest.

:func:`verify_manifest` checks everything the answer claims about itself before a byte is
downloaded: the canonical root against the URI asked for (the server falls back between scopes),
``content_sha256`` against the content, the ``SKILL.md`` entry against both, every path and URI,
sizes and hashes, the server's ``revision`` (recomputed) and the package limits.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillruntime.core.skills import SKILL_FILE_NAME

from .errors import (
    SKILL_INTEGRITY_UNAVAILABLE,
    SKILL_INVALID,
    SKILL_PACKAGE_TOO_LARGE,
    VikingStoreError,
)
from .models import VikingSkillFile, VikingSkillManifest
from .options import SERVER_MAX_ENTRIES
from .uris import SkillUri, safe_relative_path

__all__ = [
    "SERVER_SIDECARS",
    "ManifestLimits",
    "manifest_signature",
    "server_revision",
    "verify_manifest",
]

SERVER_SIDECARS = frozenset({".abstract.md", ".overview.md", ".relations.json", ".source.json"})
"""Basenames the server writes itself; they are in the revision but not in the package."""

_HEX64 = re.compile(r"[0-9a-f]{64}")
_USER_ROOT = re.compile(r"viking://user/([^/]+)/skills/([A-Za-z0-9_-]{1,64})")


@dataclass(frozen=True)
class ManifestLimits:
    """The package limits in force: files (``SKILL.md`` included), bytes per file, total."""

    max_files: int
    max_file_bytes: int
    max_total_bytes: int


def server_revision(entries: Sequence[Mapping[str, Any]]) -> str:
    """OpenViking's revision of a file list: SHA-256 of the compact, key-sorted JSON of
    ``{path, is_dir, size, sha256}`` per entry (``None`` size/hash for directories), by path."""
    rows = sorted(
        (
            {
                "path": entry["path"],
                "is_dir": bool(entry["is_dir"]),
                "size": None if entry["is_dir"] else entry["size"],
                "sha256": None if entry["is_dir"] else entry["sha256"],
            }
            for entry in entries
        ),
        key=lambda row: str(row["path"]),
    )
    payload = json.dumps(rows, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def manifest_signature(
    root_uri: str, revision: str, content_sha256: str, entries: Sequence[Mapping[str, Any]]
) -> str:
    """The client fingerprint of a manifest: SHA-256 of the compact, key-sorted JSON of the root,
    revision, content hash and every entry's ``{path, uri, is_dir, size, sha256}`` by path."""
    rows = sorted(
        (
            {
                "path": entry["path"],
                "uri": entry["uri"],
                "is_dir": bool(entry["is_dir"]),
                "size": None if entry["is_dir"] else entry["size"],
                "sha256": None if entry["is_dir"] else entry["sha256"],
            }
            for entry in entries
        ),
        key=lambda row: str(row["path"]),
    )
    document = {
        "root_uri": root_uri,
        "revision": revision,
        "content_sha256": content_sha256,
        "files": rows,
    }
    payload = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _fail(message: str, code: str, uri: str) -> VikingStoreError:
    return VikingStoreError(f"{message} ({uri})", code=code, uri=uri)


def _check_root(asked: SkillUri, root_uri: object, expected_user: str | None, uri: str) -> str:
    if not isinstance(root_uri, str) or not root_uri:
        raise _fail("the server answered without a root_uri", SKILL_INVALID, uri)
    if asked.is_home:
        match = _USER_ROOT.fullmatch(root_uri)
        if match is None or match.group(2) != asked.name:
            raise _fail(
                f"the server answered with {root_uri!r}, not the caller's user scope",
                SKILL_INVALID,
                uri,
            )
        if expected_user is not None and match.group(1) != expected_user:
            raise _fail(
                f"the server answered with {root_uri!r}, not user {expected_user!r}",
                SKILL_INVALID,
                uri,
            )
    elif root_uri != asked.root_uri:
        raise _fail(
            f"the server answered with {root_uri!r} instead of {asked.root_uri!r} "
            "(scope fallback); refusing another scope's skill",
            SKILL_INVALID,
            uri,
        )
    return root_uri


def _check_entries(
    raw_files: object, root_uri: str, uri: str
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    if not isinstance(raw_files, list):
        raise _fail("the server answered without a file list", SKILL_INTEGRITY_UNAVAILABLE, uri)
    if len(raw_files) > SERVER_MAX_ENTRIES:
        raise _fail(
            f"the manifest lists {len(raw_files)} entries, over the server limit "
            f"{SERVER_MAX_ENTRIES}",
            SKILL_PACKAGE_TOO_LARGE,
            uri,
        )
    entries: list[dict[str, Any]] = []
    by_path: dict[str, dict[str, Any]] = {}
    for raw in raw_files:
        if not isinstance(raw, dict):
            raise _fail("a manifest entry is not an object", SKILL_INVALID, uri)
        path = safe_relative_path(raw.get("path"))
        if path in by_path:
            raise _fail(f"duplicate path in the manifest: {path!r}", SKILL_INVALID, uri)
        is_dir = raw.get("is_dir")
        if not isinstance(is_dir, bool):
            raise _fail(f"entry {path!r} has no boolean is_dir", SKILL_INVALID, uri)
        if raw.get("uri") != f"{root_uri}/{path}":
            raise _fail(f"entry {path!r} has a URI outside its root", SKILL_INVALID, uri)
        entry: dict[str, Any] = {"path": path, "uri": raw["uri"], "is_dir": is_dir}
        if not is_dir:
            size, digest = raw.get("size"), raw.get("sha256")
            if size is None or digest is None:
                raise _fail(
                    f"entry {path!r} has no size or sha256", SKILL_INTEGRITY_UNAVAILABLE, uri
                )
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise _fail(f"entry {path!r} has an invalid size", SKILL_INVALID, uri)
            if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
                raise _fail(f"entry {path!r} has an invalid sha256", SKILL_INVALID, uri)
            entry["size"], entry["sha256"] = size, digest
        by_path[path] = entry
        entries.append(entry)
    for path, entry in by_path.items():
        parent = path.rpartition("/")[0]
        while parent:
            above = by_path.get(parent)
            if above is not None and not above["is_dir"]:
                raise _fail(f"{path!r} lies under the file {parent!r}", SKILL_INVALID, uri)
            parent = parent.rpartition("/")[0]
        if entry["is_dir"] and path == SKILL_FILE_NAME:
            raise _fail("SKILL.md is listed as a directory", SKILL_INVALID, uri)
    return entries, by_path


def _check_limits(files: list[VikingSkillFile], limits: ManifestLimits, uri: str) -> None:
    if len(files) > limits.max_files:
        raise _fail(
            f"{len(files)} files exceed the limit of {limits.max_files}",
            SKILL_PACKAGE_TOO_LARGE,
            uri,
        )
    for item in files:
        if item.size > limits.max_file_bytes:
            raise _fail(
                f"{item.path!r} declares {item.size} bytes, over the per-file limit "
                f"{limits.max_file_bytes}",
                SKILL_PACKAGE_TOO_LARGE,
                uri,
            )
    total = sum(item.size for item in files)
    if total > limits.max_total_bytes:
        raise _fail(
            f"the package declares {total} bytes, over the limit {limits.max_total_bytes}",
            SKILL_PACKAGE_TOO_LARGE,
            uri,
        )


def verify_manifest(
    result: Mapping[str, Any],
    asked: SkillUri,
    *,
    uri: str,
    limits: ManifestLimits,
    expected_user: str | None = None,
    check_revision: bool = True,
) -> VikingSkillManifest:
    """Verify the ``result`` of an integrity read of ``asked`` and return its manifest.

    Raises :class:`VikingStoreError`: ``SKILL_INVALID`` for another root than asked, a content
    hash that does not match the content, a ``SKILL.md`` entry that disagrees with it, unsafe,
    duplicate or foreign paths/URIs, malformed sizes or hashes, or a revision that does not match
    the file list; ``SKILL_INTEGRITY_UNAVAILABLE`` when content, hashes, revision or sizes are
    missing; ``SKILL_PACKAGE_TOO_LARGE`` when the package (server summaries excluded) exceeds
    ``limits`` or the manifest exceeds the server's entry limit.
    """
    root_uri = _check_root(asked, result.get("root_uri"), expected_user, uri)
    content = result.get("content")
    content_sha = result.get("content_sha256")
    revision = result.get("revision")
    if not isinstance(content, str) or not content:
        raise _fail("the server returned no SKILL.md content", SKILL_INTEGRITY_UNAVAILABLE, uri)
    if not isinstance(content_sha, str) or not content_sha:
        raise _fail("the server returned no content_sha256", SKILL_INTEGRITY_UNAVAILABLE, uri)
    if not isinstance(revision, str) or not revision:
        raise _fail("the server returned no revision", SKILL_INTEGRITY_UNAVAILABLE, uri)
    content_bytes = content.encode("utf-8")
    if hashlib.sha256(content_bytes).hexdigest() != content_sha:
        raise _fail("content_sha256 does not match the SKILL.md content", SKILL_INVALID, uri)
    entries, by_path = _check_entries(result.get("files"), root_uri, uri)
    skill_md = by_path.get(SKILL_FILE_NAME)
    if skill_md is None or skill_md["is_dir"]:
        raise _fail("the manifest has no SKILL.md file", SKILL_INVALID, uri)
    if skill_md["sha256"] != content_sha or skill_md["size"] != len(content_bytes):
        raise _fail("the SKILL.md entry does not match the content", SKILL_INVALID, uri)
    if check_revision and server_revision(entries) != revision:
        raise _fail("the revision does not match the file list", SKILL_INVALID, uri)
    files = sorted(
        (
            VikingSkillFile(path=entry["path"], size=entry["size"], sha256=entry["sha256"])
            for entry in entries
            if not entry["is_dir"] and entry["path"].rpartition("/")[2] not in SERVER_SIDECARS
        ),
        key=lambda item: item.path,
    )
    _check_limits(files, limits, uri)
    description = result.get("description")
    return VikingSkillManifest(
        uri=uri,
        root_uri=root_uri,
        name=root_uri.rpartition("/")[2],
        description=description if isinstance(description, str) else "",
        revision=revision,
        content_sha256=content_sha,
        files=tuple(files),
        signature=manifest_signature(root_uri, revision, content_sha, entries),
        content=content,
    )
