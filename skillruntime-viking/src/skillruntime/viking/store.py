"""``VikingSkillStore``: OpenViking skills as verified local directories, with a host cache.

Flow of :meth:`VikingSkillStore.lease`: read the integrity manifest and verify it
(:mod:`.manifest`); on a cache hit verify every cached byte against that fresh manifest; on a
miss download each package file into a ``.partial-*`` staging directory while counting and
hashing, read the manifest again and require the same signature, then publish the entry by one
rename. The lease holds the entry against eviction until the ``with`` block ends.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, cast

from skillruntime.core.errors import RuntimeClosedError
from skillruntime.core.observability.audit import audited_call
from skillruntime.core.runtime.closing import Closeable

from .cache import CacheKey, SnapshotCache, make_private_dir, remove_tree, verify_snapshot
from .client import VikingClient
from .errors import (
    SKILL_CACHE_CORRUPT,
    SKILL_PACKAGE_TOO_LARGE,
    SKILL_REVISION_CHANGED,
    VikingStoreError,
)
from .locks import HostLock, LockTimeoutError
from .manifest import ManifestLimits, verify_manifest
from .models import VikingCacheEntry, VikingSkillFile, VikingSkillManifest, VikingSkillSummary
from .options import VikingStoreOptions
from .redaction import Redactor
from .uris import AGENT_SKILLS_ROOT, parse_skill_uri

__all__ = ["Progress", "VikingSkillStore"]

logger = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _redacting(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Redact credentials from the message of a :class:`VikingStoreError` the store method
    raises (it may quote server-sent names: a file path, a root URI)."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except VikingStoreError as error:
            redact = cast(VikingSkillStore, args[0]).redactor
            error.args = tuple(redact(arg) if isinstance(arg, str) else arg for arg in error.args)
            raise

    return wrapper


Progress = Callable[[int, int], None]
"""``progress(bytes_done, bytes_total)``, called as bytes of a package arrive (from download
worker threads, one call at a time, ``bytes_done`` never decreasing)."""


def _cache_event(status: str, manifest: VikingSkillManifest) -> dict[str, str]:
    """The structured fields of a cache log record (``skill_event="cache"``; no secrets)."""
    return {
        "skill_event": "cache",
        "skill_cache": status,
        "skill_uri": manifest.root_uri,
        "skill_revision": manifest.revision,
    }


def _manifest_audit_fields(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Audit fields of a ``viking.materialize`` event: the manifest's skill name and revision."""
    for arg in (*args, *kwargs.values()):
        if isinstance(arg, VikingSkillManifest):
            return {"runtime": "viking", "skill_name": arg.name, "skill_revision": arg.revision}
    return {"runtime": "viking"}


class _BypassError(Exception):
    """The cache cannot serve this request; materialize privately instead."""


class VikingSkillStore(Closeable):
    """Turns ``viking://…/skills/<name>`` URIs into verified local skill directories.

    Thread-safe; several stores (threads or processes) may share one ``cache_dir``. Every use
    reads the manifest from the server with the configured identity first, so a cache hit never
    skips the server's access control or a revision check. ``clock`` (seconds, like
    :func:`time.time`) drives the cache's idle TTL and LRU order and exists for tests.
    """

    def __init__(
        self,
        options: VikingStoreOptions | None = None,
        *,
        clock: Callable[[], float] | None = None,
        **option_values: Any,
    ) -> None:
        if options is None:
            options = VikingStoreOptions(**option_values)
        elif option_values:
            options = VikingStoreOptions.model_validate(options.model_dump() | option_values)
        self.options = options
        self._clock = clock or time.time
        self._client = VikingClient(options)
        self._redact = Redactor(
            [options.api_key.get_secret_value() if options.api_key is not None else None]
        )
        self._limits = ManifestLimits(
            max_files=options.effective_max_files,
            max_file_bytes=options.effective_max_file_bytes,
            max_total_bytes=options.effective_max_total_bytes,
        )
        self._scope = self._scope_digest()
        self._private: list[Path] = []
        self._lock = threading.Lock()
        self._closed = False
        self._cache: SnapshotCache | None = SnapshotCache(
            options.resolved_cache_dir(), clock=self._clock, ttl=options.cache_ttl_seconds
        )
        try:
            self._cache.prepare()
        except OSError as error:
            logger.warning(
                "viking skill cache %s is not usable (%s); skills are materialized into "
                "private temporary directories instead",
                options.resolved_cache_dir(),
                type(error).__name__,
            )
            self._cache = None

    # -- identity --------------------------------------------------------------------------
    def _scope_digest(self) -> str:
        """SHA-256 of the permission scope: server, account, user, actor peer; the API key's
        own hash only when no stable user is configured next to it."""
        options = self.options
        scope: dict[str, str | None] = {
            "server_url": options.server_url,
            "account": options.account or ("default" if options.api_key is None else None),
            "user": options.user or ("default" if options.api_key is None else None),
            "agent": options.agent,
        }
        if options.api_key is not None and not options.user:
            secret = options.api_key.get_secret_value().encode("utf-8")
            scope["api_key_sha256"] = hashlib.sha256(secret).hexdigest()
        payload = json.dumps(scope, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    @property
    def cache_available(self) -> bool:
        """Whether the host cache is in use (``False``: it could not be written)."""
        return self._cache is not None

    # -- reading ---------------------------------------------------------------------------
    @property
    def redactor(self) -> Redactor:
        """What takes the store's credentials out of a text before it is logged or raised."""
        return self._redact

    @_redacting
    def resolve(self, uri: str) -> VikingSkillManifest:
        """The verified manifest of the skill's current revision (nothing is downloaded).

        Raises :class:`VikingStoreError` with a stable ``code`` (see :mod:`.errors`).
        """
        asked = parse_skill_uri(uri)
        target = None if asked.is_home else asked.scope_root
        result = self._client.get_skill(asked.name, target_uri=target, uri=uri)
        return verify_manifest(
            result,
            asked,
            uri=uri,
            limits=self._limits,
            expected_user=self.options.user if asked.is_home else None,
            check_revision=self.options.verify_revision,
        )

    @_redacting
    def find_skills(
        self,
        query: str,
        *,
        limit: int = 8,
        score_threshold: float = 0.35,
        timeout_seconds: float = 2.0,
    ) -> list[VikingSkillSummary]:
        """Skills relevant to ``query`` through OpenViking's search (``POST
        /api/v1/skills/find`` over the user and shared scopes), best first: at most ``limit``,
        each scoring at least ``score_threshold``, answered within ``timeout_seconds``.

        The server's answer is checked, not trusted: hits without a valid skill URI, a name or a
        numeric score are dropped, and the limit and threshold are applied again. Nothing is
        verified or downloaded. Raises :class:`VikingStoreError` on failure or timeout.
        """
        self._check_open()
        if not query.strip():
            return []
        result = self._client.find_skills(
            query, limit=limit, score_threshold=score_threshold, seconds=timeout_seconds
        )
        hits = result.get("skills")
        found: list[VikingSkillSummary] = []
        for item in hits if isinstance(hits, list) else []:
            if not isinstance(item, dict):
                continue
            skill_uri = item.get("root_uri") or item.get("uri")
            name, score = item.get("name"), item.get("score")
            if not isinstance(skill_uri, str) or not isinstance(name, str):
                continue
            if isinstance(score, bool) or not isinstance(score, int | float):
                continue
            try:
                parsed = parse_skill_uri(skill_uri)
            except VikingStoreError:
                continue
            if parsed.name != name or float(score) < score_threshold:
                continue
            description = item.get("description")
            found.append(
                VikingSkillSummary(
                    uri=parsed.root_uri,
                    name=name,
                    description=description if isinstance(description, str) else "",
                    score=float(score),
                )
            )
        found.sort(key=lambda summary: -(summary.score or 0.0))
        return found[:limit]

    @_redacting
    def list_skills(self, scope: str | None = None) -> list[VikingSkillSummary]:
        """Skills visible to this identity, by URI: by default the caller's user skills and the
        account's shared ``viking://agent/skills`` (what ``GET /api/v1/skills`` lists); with
        ``scope`` (``viking://user/<u>/skills``, ``viking://~/skills`` or
        ``viking://agent/skills``) only that root. Nothing is verified or downloaded."""
        target: str | None = None
        prefix: str | None = None
        if scope is not None:
            scope = scope.rstrip("/")
            probe = parse_skill_uri(f"{scope}/probe")
            if probe.is_home:
                prefix = "viking://user/"
                if self.options.user:
                    target = f"viking://user/{self.options.user}/skills"
            else:
                target = probe.scope_root
            if target is not None:
                prefix = f"{target}/"
        result = self._client.list_skills(target_uri=target)
        skills = result.get("skills")
        found: list[VikingSkillSummary] = []
        for item in skills if isinstance(skills, list) else []:
            if not isinstance(item, dict):
                continue
            skill_uri = item.get("uri") or item.get("root_uri")
            name = item.get("name")
            if not isinstance(skill_uri, str) or not isinstance(name, str):
                continue
            if prefix is not None and not skill_uri.startswith(prefix):
                continue
            if prefix == "viking://user/" and skill_uri.startswith(AGENT_SKILLS_ROOT):
                continue
            description = item.get("description")
            found.append(
                VikingSkillSummary(
                    uri=skill_uri,
                    name=name,
                    description=description if isinstance(description, str) else "",
                )
            )
        found.sort(key=lambda summary: summary.uri)
        return found

    # -- materializing ---------------------------------------------------------------------
    @contextmanager
    def lease(
        self, uri: str, *, progress: Progress | None = None, signature: str | None = None
    ) -> Iterator[Path]:
        """A verified directory holding the skill's ``SKILL.md`` for a ``with`` block.

        With ``signature`` (a :attr:`VikingSkillManifest.signature` read earlier, e.g. when the
        skill was activated) only that revision is accepted: when the server's current manifest
        has another signature, ``SKILL_REVISION_CHANGED`` is raised before anything is
        downloaded or taken from the cache.

        The directory is named after the skill. No process evicts the entry while the lease is
        held. The directory and its files are private (0700/0600) and must be treated as
        read-only (copy it before changing anything). Scripts are not executable; run them
        through an interpreter (``bash x.sh``). When the cache cannot be used the directory is
        a private temporary copy deleted when the block ends. Raises :class:`VikingStoreError`
        with a stable ``code``; no unverified file is ever handed out.
        """
        self._check_open()
        manifest = self.resolve(uri)
        _require_signature(manifest, signature)
        cache = self._cache
        if cache is not None:
            key = CacheKey.build(self._scope, manifest)
            held: HostLock | None = None
            path: Path | None = None
            try:
                cache.expire_if_idle(key)
                held = cache.lease_lock(key, self.options.lock_timeout_seconds)
                path = self._from_cache(cache, key, manifest, progress)
            except (OSError, _BypassError) as error:
                if held is not None:
                    held.release()
                held = None
                self._warn_bypass(manifest, error)
            except BaseException:
                if held is not None:
                    held.release()
                raise
            if held is not None and path is not None:
                try:
                    yield path
                finally:
                    cache.touch(key)
                    held.release()
                    self._prune_quietly()
                return
        private = self._materialize_private(manifest, progress)
        try:
            yield private
        finally:
            remove_tree(private.parent)

    @_redacting
    def read_file(self, uri: str, path: str, *, signature: str | None = None) -> bytes:
        """One file of the skill at ``uri``, read from the server and verified (size and SHA-256
        against a fresh manifest), without materializing the package or using the cache.

        ``SKILL.md`` is served from the verified manifest content. With ``signature`` only that
        revision is served (as in :meth:`lease`). Raises :class:`VikingStoreError`
        (``SKILL_RESOURCE_NOT_FOUND`` for a path not in the manifest, ``SKILL_REVISION_CHANGED``
        for another revision than ``signature``'s).
        """
        self._check_open()
        manifest = self.resolve(uri)
        _require_signature(manifest, signature)
        if path == "SKILL.md":
            return manifest.content.encode("utf-8")
        item = next((entry for entry in manifest.files if entry.path == path), None)
        if item is None:
            raise VikingStoreError(
                f"{path!r} is not a file of {manifest.root_uri}",
                code="SKILL_RESOURCE_NOT_FOUND",
                uri=manifest.uri,
            )
        base = Path(tempfile.mkdtemp(prefix="skillruntime-viking-read-"))
        try:
            os.chmod(base, 0o700)
            make_private_dir((base / item.path).parent)
            transfer = _Transfer(item.size, self._limits.max_file_bytes, None)
            self._download_file(manifest, item, base, transfer)
            return (base / item.path).read_bytes()
        finally:
            remove_tree(base)

    @_redacting
    def materialize(self, uri: str, *, progress: Progress | None = None) -> Path:
        """Like :meth:`lease` but without holding the directory.

        Eviction risk: once this returns, the entry is not protected; a later prune (by this or
        any process sharing the cache) may delete it when it is idle past the TTL or pushed out
        by the LRU. Use :meth:`lease` while the files are needed. A private bypass copy lives
        until :meth:`close`.
        """
        self._check_open()
        manifest = self.resolve(uri)
        cache = self._cache
        if cache is not None:
            key = CacheKey.build(self._scope, manifest)
            try:
                cache.expire_if_idle(key)
                with cache.lease_lock(key, self.options.lock_timeout_seconds):
                    path = self._from_cache(cache, key, manifest, progress)
                    cache.touch(key)
                    self._prune_quietly()
                return path
            except (OSError, _BypassError) as error:
                self._warn_bypass(manifest, error)
        private = self._materialize_private(manifest, progress)
        with self._lock:
            self._private.append(private.parent)
        return private

    def _warn_bypass(self, manifest: VikingSkillManifest, error: BaseException) -> None:
        logger.warning(
            "viking skill %s: cache=bypassed (%s); using a private copy",
            manifest.root_uri,
            error if isinstance(error, _BypassError) else type(error).__name__,
            extra=_cache_event("bypassed", manifest),
        )

    @audited_call("viking.materialize", _manifest_audit_fields)
    @_redacting
    def _from_cache(
        self,
        cache: SnapshotCache,
        key: CacheKey,
        manifest: VikingSkillManifest,
        progress: Progress | None,
    ) -> Path:
        status = cache.check(key, manifest)
        if status == "hit":
            logger.info(
                "viking skill %s revision %s: cache=hit",
                manifest.root_uri,
                manifest.revision,
                extra=_cache_event("hit", manifest),
            )
            _report(progress, manifest.total_bytes, manifest.total_bytes)
            return cache.snapshot_dir(key)
        corrupt = status == "corrupt"
        try:
            build = cache.build_lock(key, self.options.lock_timeout_seconds)
        except LockTimeoutError as error:
            raise _BypassError("another download of this revision is still running") from error
        with build:
            status = cache.check(key, manifest)
            if status == "hit":
                logger.info(
                    "viking skill %s: cache=hit after wait",
                    manifest.root_uri,
                    extra=_cache_event("hit", manifest),
                )
                _report(progress, manifest.total_bytes, manifest.total_bytes)
                return cache.snapshot_dir(key)
            corrupt = corrupt or status == "corrupt"
            if status != "missing":
                cache.discard(key)
            staging = cache.new_staging(key)
            try:
                self._download(manifest, cache.staging_snapshot(staging, key), progress)
                self._require_unchanged(manifest)
                cache.publish(staging, key, manifest)
            except BaseException:
                remove_tree(staging)
                raise
            if corrupt:
                try:
                    verify_snapshot(cache.snapshot_dir(key), manifest)
                except Exception as error:
                    cache.discard(key)
                    raise VikingStoreError(
                        f"cached snapshot of {manifest.root_uri} is still corrupt after a "
                        "rebuild; check the cache directory's disk",
                        code=SKILL_CACHE_CORRUPT,
                        uri=manifest.uri,
                    ) from error
            logger.info(
                "viking skill %s revision %s: cache=miss (%d files, %d bytes)",
                manifest.root_uri,
                manifest.revision,
                len(manifest.files),
                manifest.total_bytes,
                extra=_cache_event("miss", manifest),
            )
            return cache.snapshot_dir(key)

    @audited_call("viking.materialize", _manifest_audit_fields)
    @_redacting
    def _materialize_private(
        self, manifest: VikingSkillManifest, progress: Progress | None
    ) -> Path:
        base = Path(tempfile.mkdtemp(prefix="skillruntime-viking-"))
        os.chmod(base, 0o700)
        target = base / manifest.name
        try:
            make_private_dir(target)
            self._download(manifest, target, progress)
            self._require_unchanged(manifest)
        except BaseException:
            remove_tree(base)
            raise
        return target

    def _require_unchanged(self, manifest: VikingSkillManifest) -> None:
        current = self.resolve(manifest.uri)
        if current.signature != manifest.signature:
            raise VikingStoreError(
                f"{manifest.root_uri} changed while it was downloaded (revision "
                f"{manifest.revision} -> {current.revision}); read the skill again",
                code=SKILL_REVISION_CHANGED,
                uri=manifest.uri,
            )

    def _download(
        self, manifest: VikingSkillManifest, target: Path, progress: Progress | None
    ) -> None:
        """Stream every package file into ``target`` (``download_concurrency`` at a time),
        verifying sizes, hashes and limits; the first failure stops every transfer."""
        transfer = _Transfer(manifest.total_bytes, self._limits.max_total_bytes, progress)
        transfer.report()
        for item in manifest.files:
            make_private_dir((target / item.path).parent)
        workers = min(self.options.download_concurrency, len(manifest.files))
        if workers <= 1:
            for item in manifest.files:
                self._download_file(manifest, item, target, transfer)
            return
        failures: list[BaseException] = []
        with ThreadPoolExecutor(workers, thread_name_prefix="viking-download") as pool:
            futures = [
                pool.submit(self._download_file, manifest, item, target, transfer)
                for item in manifest.files
            ]
            for future in as_completed(futures):
                error = future.exception()
                if error is not None:
                    transfer.cancelled.set()
                    failures.append(error)
        if failures:
            real = [error for error in failures if not isinstance(error, _CancelledError)]
            raise (real or failures)[0]

    def _download_file(
        self,
        manifest: VikingSkillManifest,
        item: VikingSkillFile,
        target: Path,
        transfer: _Transfer,
    ) -> None:
        if transfer.cancelled.is_set():
            raise _CancelledError
        limits = self._limits
        file_uri = f"{manifest.root_uri}/{item.path}"
        digest = hashlib.sha256()
        received = 0
        fd = os.open(
            target / item.path,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o600)
            with self._client.download(file_uri, skill_uri=manifest.uri) as chunks:
                for chunk in chunks:
                    if transfer.cancelled.is_set():
                        raise _CancelledError
                    received += len(chunk)
                    if received > limits.max_file_bytes or not transfer.add(len(chunk)):
                        raise VikingStoreError(
                            f"{item.path!r} of {manifest.root_uri} sent more bytes than the "
                            "package limits allow",
                            code=SKILL_PACKAGE_TOO_LARGE,
                            uri=manifest.uri,
                        )
                    if received > item.size:
                        raise VikingStoreError(
                            f"{item.path!r} of {manifest.root_uri} is larger than its "
                            "manifest entry",
                            code=SKILL_REVISION_CHANGED,
                            uri=manifest.uri,
                        )
                    digest.update(chunk)
                    handle.write(chunk)
        if received != item.size or digest.hexdigest() != item.sha256:
            raise VikingStoreError(
                f"{item.path!r} of {manifest.root_uri} does not match its manifest entry "
                "(size or sha256)",
                code=SKILL_REVISION_CHANGED,
                uri=manifest.uri,
            )

    # -- cache administration ----------------------------------------------------------------
    def cache_entries(self) -> list[VikingCacheEntry]:
        """Every cached snapshot, least recently used first (empty without a cache)."""
        return [] if self._cache is None else self._cache.entries()

    def prune(self, *, everything: bool = False) -> int:
        """Evict unleased entries idle past the TTL, then LRU ones over the count or byte
        capacity (every unleased entry with ``everything``); sweep stale staging directories.
        Returns the number of entries evicted."""
        if self._cache is None:
            return 0
        return self._cache.prune(
            max_entries=self.options.cache_max_entries,
            max_bytes=self.options.cache_max_bytes,
            everything=everything,
        )

    def forget(self, root_uri: str, revision: str | None = None) -> int:
        """Evict this host's unleased cached copies of ``root_uri`` (one ``revision`` or all);
        returns how many were removed. The server is not touched."""
        if self._cache is None:
            return 0
        removed = 0
        for entry in self._cache.entries():
            if entry.root_uri == root_uri and revision in (None, entry.revision):
                removed += self._cache.evict_key(entry.key)
        return removed

    def _prune_quietly(self) -> None:
        try:
            self.prune()
        except Exception as error:
            logger.warning("viking skill cache pruning failed: %s", type(error).__name__)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeClosedError("the viking skill store is closed")

    def close(self) -> None:
        """Close the HTTP sessions and delete private bypass copies (idempotent)."""
        with self._lock:
            private, self._private = self._private, []
            self._closed = True
        for path in private:
            remove_tree(path)
        self._client.close()


def _require_signature(manifest: VikingSkillManifest, signature: str | None) -> None:
    """Refuse ``manifest`` unless it has ``signature`` (when one is given)."""
    if signature is not None and manifest.signature != signature:
        raise VikingStoreError(
            f"{manifest.root_uri} changed on the server since it was activated (now revision "
            f"{manifest.revision}); read the skill again",
            code=SKILL_REVISION_CHANGED,
            uri=manifest.uri,
        )


class _CancelledError(Exception):
    """Another file of the same package failed; this transfer stopped."""


class _Transfer:
    """Byte accounting shared by the downloads of one package (thread-safe)."""

    def __init__(self, total: int, limit: int, progress: Progress | None) -> None:
        self.total = total
        self.limit = limit
        self.done = 0
        self.progress = progress
        self.cancelled = threading.Event()
        self._lock = threading.Lock()

    def add(self, count: int) -> bool:
        """Count received bytes and report progress; ``False`` once over the total limit."""
        with self._lock:
            self.done += count
            if self.done > self.limit:
                return False
            _report(self.progress, self.done, self.total)
        return True

    def report(self) -> None:
        """Report the current state."""
        with self._lock:
            _report(self.progress, self.done, self.total)


def _report(progress: Progress | None, done: int, total: int) -> None:
    if progress is not None:
        progress(done, total)
