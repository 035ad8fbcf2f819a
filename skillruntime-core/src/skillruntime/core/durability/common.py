"""What the sync and async workspace snapshots share: the commands, their parsing, the results.

Everything here is pure (no I/O): the listing request and its decoding, the filtering of the
runtime's own directories, the restore scripts and the result types. The drivers
(:mod:`.workspace`, :mod:`.async_workspace`) run them through a runtime's public SPI.

Commands reach the sandbox as text, and a command's output comes back as text, over transports
that may carry it as JSON strings: so the listing is sent back in base64, and a restore script
(which names paths that may hold a newline, a quote or bytes that are not UTF-8) is sent in
base64 and decoded by the sandbox's ``base64 -d`` into ``sh``. Inside a script every path is
single-quoted byte for byte and prefixed with ``./`` (so a name starting with ``-`` is not an
option); the script runs with ``set -e`` and prints a trailer only when every step worked.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import io
import os
import re
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import SnapshotListingError, WorkspaceSnapshotError
from ..models import SkillExecutionRequest, SkillExecutionResult
from ..observability.audit import AuditRecorder
from ..snapshots.listing import (
    DEFAULT_MAX_FIELD_BYTES,
    LISTING_SCRIPT,
    ListingEntry,
    listing_entry,
    parse_listing,
)
from ..snapshots.manifest import Entry, Manifest
from ..snapshots.planning import RestorePlan

__all__ = [
    "DEFAULT_EXCLUDE",
    "DEFAULT_LISTING_TIMEOUT",
    "DEFAULT_MAX_LISTING_BYTES",
    "DEFAULT_SCRIPT_TIMEOUT",
    "MAX_SCRIPT_BYTES",
    "DigestCache",
    "FastListing",
    "RestoreResult",
    "SnapshotResult",
    "decode_listing",
    "excluded",
    "hash_requests",
    "hash_result",
    "inline_contents",
    "lister_tag",
    "listing_output",
    "listing_request",
    "post_scripts",
    "pre_scripts",
    "record_restore",
    "record_snapshot",
    "script_request",
    "seeded_cache",
    "split_listing",
]

DEFAULT_LISTING_TIMEOUT = 600.0
"""Seconds the listing command may take (it reads and hashes every file of the workspace)."""

DEFAULT_SCRIPT_TIMEOUT = 300.0
"""Seconds a restore script may take."""

DEFAULT_MAX_LISTING_BYTES = 256 * 1024 * 1024
"""The output cap of the listing command (base64): about a million entries of typical names."""

MAX_SCRIPT_BYTES = 64 * 1024
"""A restore script is cut into commands of at most this many bytes before base64 (a command is
one argument of ``sh -c``, and Linux caps one argument at 128 KiB)."""

DEFAULT_EXCLUDE = ("skills",)
"""Top-level workspace entries that are the runtime's, not the conversation's: prepared skill
copies (``skills/``) are made again by ``prepare`` and are neither stored nor touched."""

TRAILER = "SNAPDONE"


@dataclass(frozen=True)
class SnapshotResult:
    """What one :meth:`~.workspace.WorkspaceSnapshots.snapshot` did.

    ``snapshot_id`` is the stored manifest's id (the previous one when nothing changed:
    ``changed`` is then false and nothing was stored); ``entries`` counts the manifest's paths;
    ``objects_uploaded``/``bytes_uploaded`` the file contents read out of the sandbox and stored;
    ``requests`` the calls made to the runtime (``commands`` of them commands), ``seconds`` the
    wall time, ``deleted_snapshots`` what retention removed.
    """

    snapshot_id: str
    conversation_id: str
    changed: bool
    entries: int
    objects_uploaded: int
    bytes_uploaded: int
    requests: int
    commands: int
    seconds: float
    deleted_snapshots: tuple[str, ...] = ()


@dataclass(frozen=True)
class RestoreResult:
    """What one :meth:`~.workspace.WorkspaceSnapshots.restore` did: the snapshot restored, the
    paths deleted, directories created, files written (``bytes_written`` of them), links made,
    modes set, the calls made to the runtime and the wall time; ``entries`` counts the
    snapshot's paths."""

    snapshot_id: str
    conversation_id: str
    deleted: int
    directories: int
    files: int
    bytes_written: int
    symlinks: int
    modes: int
    requests: int
    commands: int
    seconds: float
    entries: int = 0


def record_snapshot(record: AuditRecorder, result: SnapshotResult) -> None:
    """The fields of a ``workspace.snapshot`` audit event (docs/observability.md): counts and
    ids only, never a path."""
    record.snapshot_id = result.snapshot_id
    record.entries = result.entries
    record.objects = result.objects_uploaded
    record.bytes = result.bytes_uploaded
    record.requests = result.requests


def record_restore(record: AuditRecorder, result: RestoreResult) -> None:
    """The fields of a ``workspace.restore`` audit event: the files and bytes restored."""
    record.snapshot_id = result.snapshot_id
    record.entries = result.entries
    record.objects = result.files
    record.bytes = result.bytes_written
    record.requests = result.requests


FAST_HEADER = b"SNAPFAST2"
SUMS = b"SNAPSUMS"
END = b"SNAPEND"

FAST_LISTING_SCRIPT = (
    "LC_ALL=C; export LC_ALL; "
    'cd -- "$1" || exit 3; '
    "printf 'SNAPFAST2\\0'; "
    "printf '%s\\0' \"$(date +%s.%N)\" || exit 4; "
    "find . ! -name . -printf '%y\\0%p\\0%M\\0%s\\0%l\\0%D:%i:%s:%T@:%C@\\0' || exit 4; "
    "printf 'SNAPSUMS\\0'; "
    'if [ -n "$2" ]; then '
    'find . ! -name . -type f -newerct "@$2" -exec sha256sum -z -- {} + || exit 4; '
    "else find . ! -name . -type f -exec sha256sum -z -- {} + || exit 4; fi; "
    "printf 'SNAPEND\\0'"
)
"""The listing with GNU ``find -printf`` and ``sha256sum -z``: the same facts as
:data:`~skillruntime.core.snapshots.listing.LISTING_SCRIPT` from three processes and a few
batches of ``sha256sum`` instead of four processes per file, plus the sandbox's clock when it
started and every file's stat key (device, inode, size, modification and change times in
nanoseconds). Given ``$2`` (Unix seconds), it hashes only the files whose change time is later:
the client takes the others' digests from what it saw of the same stat key at an earlier
listing (:class:`DigestCache`). Its output is turned into ``LISTING_SCRIPT``'s format on the
client and read by the same strict parser."""

_PROBE = (
    "find . -maxdepth 0 -printf '' >/dev/null 2>&1 && sha256sum -z /dev/null >/dev/null 2>&1 "
    "&& case $(date +%N) in *[!0-9]*|'') false;; esac"
)

INLINE_FILE_BYTES = 256 * 1024
"""Changed files under this size come back inside an incremental listing's output."""

INLINE_BYTES = 4 * 1024 * 1024
"""The inline part of a listing's output at most (a tar, cut there: what is cut is read
afterwards as usual)."""

INLINE_SCRIPT = (
    "LC_ALL=C; export LC_ALL; "
    'cd -- "$1" || exit 3; '
    f'find . ! -name . -type f -newerct "@$2" -size -{INLINE_FILE_BYTES // 1024}k '
    f"-exec tar -cf - -- {{}} + | head -c {INLINE_BYTES}"
)
"""The files an incremental listing hashed (changed since ``$2``) that are small, as tar
streams (one per ``find`` batch), the whole cut at :data:`INLINE_BYTES`: a one-file change
costs one request, not a listing and a read. The client keeps the whole members and verifies
each against the listing's digest as it stores it."""

CACHE_MARGIN_NS = 100_000_000
"""How far before the previous listing's start a change time must lie for a file's digest to be
reused: file times come from the kernel's coarse clock, up to a tick (at most 10 ms) behind the
one ``date`` reads. A change time of whole seconds (a file system that keeps no fraction) must
lie a further second before it."""

MAX_CACHED_ENTRIES = 250_000
"""A listing with more files than this is not kept in the digest cache (the next one hashes
everything): about 200 bytes of client memory per file."""


@dataclass(frozen=True)
class DigestCache:
    """What one fast listing saw: the sandbox's clock when it started (ns) and, for every file,
    its stat key (device, inode, size, modification and change times) with its digest. A later
    listing of the same workspace reuses a digest when a file's key is the same and its change
    time lies :data:`CACHE_MARGIN_NS` before ``started_ns`` (so no write after the earlier
    hashing can hide behind an unchanged key)."""

    started_ns: int
    digests: dict[bytes, str]

    @property
    def cutoff_ns(self) -> int:
        """Files changed after this are hashed again."""
        return self.started_ns - CACHE_MARGIN_NS


def lister_tag(runtime_name: str, working_directory: str, conversation_id: str) -> str:
    """What a manifest names as the lister of its stat keys: the sha256 of the runtime's name,
    its working directory and the conversation (the in-memory cache's key; no path in clear).
    A manifest's keys seed a listing only under the same tag."""
    text = "\0".join((runtime_name, working_directory, conversation_id))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def seeded_cache(manifest: Manifest | None, tag: str) -> DigestCache | None:
    """The digest cache a manifest's stat keys give a listing of the workspace tagged ``tag``
    (docs/durability.md, "Digest reuse"): ``None`` for a manifest without them (version 1),
    from another lister, or with more files than :data:`MAX_CACHED_ENTRIES`."""
    if manifest is None or manifest.listed_ns is None or manifest.lister != tag:
        return None
    digests = {
        entry.stat.encode("ascii"): entry.digest
        for entry in manifest.entries
        if entry.stat is not None and entry.digest is not None
    }
    if not digests or len(digests) > MAX_CACHED_ENTRIES:
        return None
    return DigestCache(manifest.listed_ns, digests)


def _ns(text: bytes) -> int:
    """``seconds.fraction`` (``find %T@``, ``date +%s.%N``) in integer nanoseconds."""
    whole, _, fraction = text.partition(b".")
    if not whole.isdigit() or (fraction and not fraction.isdigit()):
        raise SnapshotListingError("a listing time is malformed")
    return int(whole) * 1_000_000_000 + int((fraction + b"000000000")[:9] or b"0")


def _seconds(ns: int) -> str:
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def listing_request(
    *,
    timeout_seconds: float,
    max_output_bytes: int,
    working_directory: str | None = None,
    cache: DigestCache | None = None,
    inline: bool = True,
) -> SkillExecutionRequest:
    """The one command that lists the workspace (the command's working directory) with the
    digest of every file, base64-encoded on stdout: the fast listing where the sandbox has GNU
    ``find``, ``sha256sum -z`` and ``date +%N``, else the portable one. With ``cache`` the fast
    listing hashes only the files changed since the cache's cutoff and, with ``inline``, prints
    the small ones after a ``#`` (:func:`inline_contents`)."""
    if cache is None:
        command = (
            f"if {_PROBE}; then sh -c {_quote_text(FAST_LISTING_SCRIPT)} sh . ''; "
            f"else sh -c {_quote_text(LISTING_SCRIPT)} sh .; fi | base64"
        )
    else:
        since = _seconds(max(cache.cutoff_ns, 0))
        command = (
            f"if {_PROBE}; then sh -c {_quote_text(FAST_LISTING_SCRIPT)} sh . {since} | base64 "
            + (
                f"&& echo '#' && sh -c {_quote_text(INLINE_SCRIPT)} sh . {since} | base64; "
                if inline
                else "; "
            )
            + f"else sh -c {_quote_text(LISTING_SCRIPT)} sh . | base64; fi"
        )
    return SkillExecutionRequest(
        command=command,
        working_directory=working_directory,
        timeout_seconds=timeout_seconds,
        max_output_bytes=max_output_bytes,
    )


@dataclass
class FastListing:
    """The fast listing's output, split: when it started, its records (five fields and the stat
    key each), the digests it computed, and the files whose digest it left to the cache."""

    started_ns: int
    records: list[tuple[bytes, bytes, bytes, bytes, bytes, bytes]]
    sums: dict[bytes, bytes]

    def resolve(self, cache: DigestCache | None) -> list[bytes]:
        """Fill the digests of unchanged files from ``cache`` (same stat key, changed before its
        cutoff); returns the paths of files that still have none (to hash on their own)."""
        missing = []
        known = cache.digests if cache is not None else {}
        cutoff = cache.cutoff_ns if cache is not None else 0
        for kind, path, _mode, _size, _target, key in self.records:
            if kind != b"f" or path in self.sums:
                continue
            found = known.get(key)
            if found is not None:
                try:
                    changed = _ns(key.rpartition(b":")[2])
                except SnapshotListingError:
                    changed = None
                if changed is not None and changed % 1_000_000_000 == 0:
                    changed += 1_000_000_000
                if changed is None or changed > cutoff:
                    found = None
            if found is None:
                missing.append(path)
            else:
                self.sums[path] = found.encode("ascii")
        return missing

    def cache(self) -> DigestCache | None:
        """The cache this listing leaves for the next one (``None`` when too large)."""
        files = [record for record in self.records if record[0] == b"f"]
        if len(files) > MAX_CACHED_ENTRIES:
            return None
        digests = {}
        for record in files:
            digest = self.sums.get(record[1])
            if digest is not None:
                digests[record[5]] = digest.decode("ascii")
        return DigestCache(self.started_ns, digests)

    def entries(
        self, *, max_entries: int, max_field_bytes: int = DEFAULT_MAX_FIELD_BYTES
    ) -> list[ListingEntry]:
        """The listing's entries, sorted by the bytes of their path: each record checked by the
        portable listing's own record parser (:func:`~..snapshots.listing.listing_entry`) with
        the same bounds as :func:`~..snapshots.listing.parse_listing` (field length, entry
        count, a path named twice), without re-encoding the listing first; a file without a
        digest fails closed."""
        if len(self.records) > max_entries:
            raise SnapshotListingError(f"the listing has more than {max_entries} entries")
        sums = self.sums
        parsed: list[tuple[bytes, ListingEntry]] = []
        for kind, path, mode, size, target, _key in self.records:
            if len(path) > max_field_bytes or len(target) > max_field_bytes:
                raise SnapshotListingError(f"a listing field is over {max_field_bytes} bytes")
            if kind == b"f":
                found = sums.get(path)
                if found is None:
                    raise SnapshotListingError("a file appeared or changed during the listing")
                entry = listing_entry(b"f", path, mode + b" ", (size, found + b"  -"))
            elif kind == b"l":
                entry = listing_entry(b"l", path, mode + b" ", (target,))
            elif kind == b"d":
                entry = listing_entry(b"d", path, mode + b" ", ())
            else:
                entry = listing_entry(b"o", path, mode + b" ", ())
            parsed.append((path, entry))
        parsed.sort(key=lambda item: item[0])
        for index in range(1, len(parsed)):
            if parsed[index][0] == parsed[index - 1][0]:
                raise SnapshotListingError("the listing names one path twice")
        return [entry for _, entry in parsed]

    def stat_keys(self) -> dict[str, str]:
        """Every file's stat key as the listing reported it (by workspace path), for the
        manifest (:func:`~..snapshots.planning.plan_snapshot` keeps those of the right shape)."""
        keys = {}
        for kind, path, _mode, _size, _target, key in self.records:
            if kind == b"f" and key.isascii():
                keys[os.fsdecode(path[2:])] = key.decode("ascii")
        return keys

    def portable(self) -> bytes:
        """The listing in the portable listing's format (whose parser then checks everything);
        a file without a digest fails closed."""
        out = bytearray(b"SNAPLIST1\0")
        for kind, path, mode, size, target, _key in self.records:
            if kind == b"f":
                found = self.sums.get(path)
                if found is None:
                    raise SnapshotListingError("a file appeared or changed during the listing")
                out += b"f\0%s\0%s \0%s\0%s  -\0" % (path, mode, size, found)
            elif kind == b"l":
                out += b"l\0%s\0%s \0%s\0" % (path, mode, target)
            elif kind == b"d":
                out += b"d\0%s\0%s \0" % (path, mode)
            else:
                out += b"o\0%s\0%s \0" % (path, mode)
        out += b"SNAPEND\0"
        return bytes(out)


def _sums(fields: Iterable[bytes]) -> dict[bytes, bytes]:
    digests: dict[bytes, bytes] = {}
    for line in fields:
        digest, separator, path = line.partition(b"  ")
        if not separator or len(digest) != 64 or not _HEX.fullmatch(digest):
            raise SnapshotListingError("a listing digest line is malformed")
        digests[path] = digest
    return digests


_HEX = re.compile(rb"[0-9a-f]{64}")


def _fast(data: bytes) -> FastListing:
    """The fast listing's output split into its parts; fails closed on a truncated or malformed
    output."""
    fields = data.split(b"\0")
    if fields[-1] != b"":
        raise SnapshotListingError("the listing ends inside a field (truncated output)")
    fields.pop()
    if len(fields) < 2 or fields[0] != FAST_HEADER or END not in fields:
        raise SnapshotListingError("the listing has no header or trailer (a command failed)")
    if fields[-1] != END:
        raise SnapshotListingError("the listing has data after its trailer")
    # The digests' marker stands at a record boundary (records are six fields); a field inside
    # a record (a link's target) may hold the same bytes and is never taken for it.
    middle = 2
    while middle < len(fields) and fields[middle] != SUMS:
        middle += 6
    if middle >= len(fields):
        raise SnapshotListingError("the listing has no digests (a command failed)")
    started = _ns(fields[1].strip())
    flat = fields[2:middle]
    if len(flat) % 6:
        raise SnapshotListingError("the listing ends inside a record (truncated output)")
    records = [
        (flat[i], flat[i + 1], flat[i + 2], flat[i + 3], flat[i + 4], flat[i + 5])
        for i in range(0, len(flat), 6)
    ]
    return FastListing(started, records, _sums(fields[middle + 1 : -1]))


def listing_output(result: SkillExecutionResult) -> bytes:
    """The decoded listing of :func:`listing_request`'s result (its inline files left out);
    fails closed (:class:`SnapshotListingError`) on a timeout, a non-zero exit, a cut or
    non-base64 output."""
    if result.timed_out:
        raise SnapshotListingError("the workspace listing timed out")
    if result.stdout_truncated:
        raise SnapshotListingError(
            "the workspace listing was cut at the output cap; raise max_listing_bytes"
        )
    if result.exit_code != 0:
        raise SnapshotListingError(
            f"the workspace listing failed (exit code {result.exit_code}): "
            f"{result.stderr.strip()[-200:]!r}"
        )
    listing = result.stdout.partition("#")[0]
    try:
        return base64.b64decode("".join(listing.split()), validate=True)
    except (binascii.Error, ValueError):
        raise SnapshotListingError("the workspace listing is not base64 (malformed)") from None


def inline_contents(result: SkillExecutionResult) -> dict[str, bytes]:
    """The files that came back inside an incremental listing's output (by workspace path):
    the whole members of its tar streams; a cut or malformed part gives what came before it.
    Nothing here is trusted: each is verified against the listing's digest when stored."""
    _, separator, rest = result.stdout.partition("#")
    if not separator or result.stdout_truncated:
        return {}
    try:
        data = base64.b64decode("".join(rest.split()), validate=True)
    except (binascii.Error, ValueError):
        return {}
    found: dict[str, bytes] = {}
    with (
        contextlib.suppress(tarfile.TarError, OSError, EOFError),
        tarfile.open(fileobj=io.BytesIO(data), mode="r:", ignore_zeros=True) as archive,
    ):
        for member in archive:
            if not member.isfile():
                continue
            name = member.name[2:] if member.name.startswith("./") else member.name
            stream = archive.extractfile(member)
            if stream is not None:
                content = stream.read()
                if len(content) == member.size:
                    found[name] = content
    return found


def split_listing(data: bytes) -> FastListing | None:
    """The fast listing's parts, or ``None`` for the portable listing's output."""
    return _fast(data) if data.startswith(FAST_HEADER + b"\0") else None


def hash_requests(paths: Sequence[bytes], *, timeout_seconds: float) -> list[SkillExecutionRequest]:
    """Commands printing ``sha256sum -z`` of ``paths`` (``./`` paths of a fast listing) in
    base64, each at most about :data:`MAX_SCRIPT_BYTES`: the files a listing left without a
    digest."""
    names = [os.fsdecode(path[2:]) for path in paths]
    requests = []
    for line in _commands(b"sha256sum -z --", names):
        encoded = base64.b64encode(line + b"\n").decode("ascii")
        requests.append(
            SkillExecutionRequest(
                command=f"printf '%s' '{encoded}' | base64 -d | sh -s | base64",
                timeout_seconds=timeout_seconds,
                max_output_bytes=4 * len(line) + 64 * 1024,
            )
        )
    return requests


def hash_result(result: SkillExecutionResult) -> dict[bytes, bytes]:
    """The digests (by ``./`` path) printed by one of :func:`hash_requests`; fails closed."""
    return _sums(field for field in listing_output(result).split(b"\0") if field)


def decode_listing(
    result: SkillExecutionResult, *, max_entries: int, cache: DigestCache | None = None
) -> list[ListingEntry]:
    """The parsed listing of :func:`listing_request`'s result; fails closed
    (:class:`SnapshotListingError`) on a timeout, a non-zero exit, a truncated or malformed
    output, or a file left without a digest (see :func:`split_listing` to fill those)."""
    data = listing_output(result)
    fast = split_listing(data)
    if fast is not None:
        fast.resolve(cache)
        return fast.entries(max_entries=max_entries)
    return parse_listing(data, max_entries=max_entries)


def excluded(path: str, exclude: Sequence[str]) -> bool:
    """Whether ``path`` is one of ``exclude`` or lies under one."""
    return any(path == top or path.startswith(top + "/") for top in exclude)


def _quote_text(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _quote(path: str) -> bytes:
    """``./path`` single-quoted for ``sh``, byte for byte (any byte but NUL may be in it)."""
    raw = b"./" + os.fsencode(path)
    return b"'" + raw.replace(b"'", b"'\\''") + b"'"


def _quote_target(target: str) -> bytes:
    raw = os.fsencode(target)
    return b"'" + raw.replace(b"'", b"'\\''") + b"'"


def _commands(prefix: bytes, paths: Iterable[str]) -> list[bytes]:
    """``prefix path path ...`` lines, each at most about :data:`MAX_SCRIPT_BYTES`."""
    lines: list[bytes] = []
    current = bytearray()
    for path in paths:
        word = _quote(path)
        if current and len(current) + len(word) + 1 > MAX_SCRIPT_BYTES // 2:
            lines.append(bytes(current))
            current = bytearray()
        if not current:
            current += prefix
        current += b" " + word
    if current:
        lines.append(bytes(current))
    return lines


def _chunk(lines: Sequence[bytes]) -> list[bytes]:
    """The lines grouped into scripts of at most about :data:`MAX_SCRIPT_BYTES` each."""
    scripts: list[bytes] = []
    current = bytearray()
    for line in lines:
        if current and len(current) + len(line) + 1 > MAX_SCRIPT_BYTES:
            scripts.append(bytes(current))
            current = bytearray()
        current += line + b"\n"
    if current:
        scripts.append(bytes(current))
    return scripts


def pre_scripts(plan: RestorePlan, current: Sequence[ListingEntry]) -> list[bytes]:
    """The scripts run before the files are sent: delete what goes (a directory being deleted
    is made writable by its owner first, without following links), make the owner able to write
    into the kept directories and files that will change, create the new directories."""
    kinds = {entry.path: entry for entry in current}
    lines: list[bytes] = []
    doomed_dirs = [path for path in plan.delete if kinds[path].kind == "directory"]
    lines += _commands(b"chmod -R u+rwx --", doomed_dirs)
    lines += _commands(b"rm -rf --", plan.delete)
    lines += _commands(b"chmod u+rwx --", relaxed_directories(plan, current))
    rewritten = [
        entry.path
        for entry in plan.write_files
        if entry.path in kinds
        and kinds[entry.path].kind == "file"
        and not kinds[entry.path].mode & 0o200
        and entry.path not in plan.delete
    ]
    lines += _commands(b"chmod u+w --", rewritten)
    lines += _commands(b"mkdir -p --", [entry.path for entry in plan.make_directories])
    return _chunk(lines)


def relaxed_directories(plan: RestorePlan, current: Sequence[ListingEntry]) -> list[str]:
    """Kept directories that their owner cannot enter or write into and under which the restore
    changes something: opened for the restore, given their mode back at the end."""
    doomed = tuple(plan.delete)
    changed = [
        *plan.delete,
        *(entry.path for entry in plan.make_directories),
        *(entry.path for entry in plan.write_files),
        *(entry.path for entry in plan.make_symlinks),
        *(entry.path for entry in plan.set_modes),
    ]
    ancestors: set[str] = set()
    for path in changed:
        parts = path.split("/")
        ancestors.update("/".join(parts[:depth]) for depth in range(1, len(parts)))
    return [
        entry.path
        for entry in current
        if entry.kind == "directory"
        and entry.mode & 0o700 != 0o700
        and entry.path in ancestors
        and not excluded(entry.path, doomed)
    ]


def post_scripts(
    plan: RestorePlan, current: Sequence[ListingEntry], wanted: dict[str, Entry]
) -> list[bytes]:
    """The scripts run after the files were sent: make the links, then set every mode (the
    files written, then the directories deepest first, so a read-only directory is closed after
    everything under it was written)."""
    lines: list[bytes] = []
    for link in plan.make_symlinks:
        assert link.target is not None
        lines.append(b"ln -s -- " + _quote_target(link.target) + b" " + _quote(link.path))
    files = {entry.path: entry.mode for entry in plan.write_files}
    files.update({entry.path: entry.mode for entry in plan.set_modes if entry.kind == "file"})
    by_mode: dict[int, list[str]] = {}
    for path, mode in files.items():
        by_mode.setdefault(mode, []).append(path)
    for mode, paths in sorted(by_mode.items()):
        lines += _commands(b"chmod %04o --" % mode, paths)
    directories = [entry for entry in plan.set_modes if entry.kind == "directory"]
    seen = {entry.path for entry in directories}
    for path in relaxed_directories(plan, current):
        if path not in seen and path in wanted:
            directories.append(wanted[path])
    directories.sort(key=lambda entry: -entry.path.count("/"))
    run: list[str] = []
    run_mode = 0
    for entry in directories:
        if run and entry.mode != run_mode:
            lines += _commands(b"chmod %04o --" % run_mode, run)
            run = []
        run_mode = entry.mode
        run.append(entry.path)
    if run:
        lines += _commands(b"chmod %04o --" % run_mode, run)
    return _chunk(lines)


def script_request(
    script: bytes, *, timeout_seconds: float, working_directory: str | None = None
) -> SkillExecutionRequest:
    """A command that runs ``script`` (bytes) with ``set -e`` in the workspace and prints the
    trailer only when it all worked; the script travels in base64."""
    body = b"set -e\n" + script + b"printf '%s\\n' " + TRAILER.encode() + b"\n"
    encoded = base64.b64encode(body).decode("ascii")
    return SkillExecutionRequest(
        command=f"printf '%s' '{encoded}' | base64 -d | sh -s",
        working_directory=working_directory,
        timeout_seconds=timeout_seconds,
        max_output_bytes=64 * 1024,
    )


def script_failed(result: SkillExecutionResult) -> str | None:
    """Why a restore script failed, or ``None`` when it worked (its trailer printed)."""
    if result.timed_out:
        return "a restore command timed out"
    if result.exit_code != 0 or TRAILER not in result.stdout:
        return (
            f"a restore command failed (exit code {result.exit_code}): "
            f"{result.stderr.strip()[-300:]!r}"
        )
    return None


BATCH_FILE_BYTES = 1024 * 1024
"""Files up to this size are read out of the sandbox in batches (one command, a tar in base64)
when a snapshot needs more than one of them; larger ones through ``read_stream``."""

BATCH_BYTES = 4 * 1024 * 1024
"""The content of one batch at most (it is held in memory, with its base64 text)."""


def read_batches(entries: Sequence[Entry]) -> tuple[list[list[Entry]], list[Entry]]:
    """``(batches, singles)``: the small files grouped into batches (bounded in bytes and in
    command length), the rest read one at a time. A lone small file is read on its own."""
    small = [entry for entry in entries if (entry.size or 0) <= BATCH_FILE_BYTES]
    singles = [entry for entry in entries if (entry.size or 0) > BATCH_FILE_BYTES]
    if len(small) < 2:
        return [], singles + small
    batches: list[list[Entry]] = []
    current: list[Entry] = []
    size = length = 0
    for entry in small:
        word = len(_quote(entry.path)) + 1
        if current and (
            size + (entry.size or 0) > BATCH_BYTES or length + word > MAX_SCRIPT_BYTES // 2
        ):
            batches.append(current)
            current, size, length = [], 0, 0
        current.append(entry)
        size += entry.size or 0
        length += word
    if current:
        batches.append(current)
    return batches, singles


def batch_request(entries: Sequence[Entry], *, timeout_seconds: float) -> SkillExecutionRequest:
    """One command printing a tar of ``entries`` (files of the workspace) in base64."""
    script = b"tar -cf - --" + b"".join(b" " + _quote(entry.path) for entry in entries) + b"\n"
    encoded = base64.b64encode(script).decode("ascii")
    # a tar member is a 512-byte header (three more for a long name) and its data padded to
    # 512 bytes; base64 adds a third and its line ends: twice the worst case is plenty
    archive = sum(2048 + (entry.size or 0) + 2 * len(entry.path) for entry in entries)
    limit = 2 * archive + 64 * 1024
    return SkillExecutionRequest(
        command=f"printf '%s' '{encoded}' | base64 -d | sh -s | base64",
        timeout_seconds=timeout_seconds,
        max_output_bytes=limit,
    )


def batch_contents(result: SkillExecutionResult, entries: Sequence[Entry]) -> dict[str, bytes]:
    """The content of each of ``entries`` from :func:`batch_request`'s result; a file missing
    from the archive, or a failed, cut or malformed output, raises
    :class:`~skillruntime.core.errors.WorkspaceSnapshotError` (the digests are checked by the
    store)."""
    if result.timed_out or result.stdout_truncated:
        raise WorkspaceSnapshotError("reading a batch of files out of the sandbox was cut short")
    try:
        data = base64.b64decode("".join(result.stdout.split()), validate=True)
    except (binascii.Error, ValueError):
        raise WorkspaceSnapshotError(
            "a batch of files read out of the sandbox is malformed"
        ) from None
    wanted = {entry.path for entry in entries}
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for member in archive:
                name = member.name[2:] if member.name.startswith("./") else member.name
                if name not in wanted or not member.isfile():
                    continue
                stream = archive.extractfile(member)
                if stream is not None:
                    found[name] = stream.read()
    except (tarfile.TarError, OSError) as error:
        raise WorkspaceSnapshotError(
            f"a batch of files read out of the sandbox is not a whole tar: {error}"
        ) from None
    missing = wanted - set(found)
    if missing:
        raise WorkspaceSnapshotError(
            f"{len(missing)} file(s) of the listing could not be read out of the sandbox "
            f"(changed or removed meanwhile; exit code {result.exit_code}): "
            f"{result.stderr.strip()[-200:]!r}"
        )
    return found
