"""Snapshot and restore a conversation's workspace through any :class:`AsyncSkillRuntime`, on
demand: the async face of workspace snapshots (its sync face, :mod:`.workspace`, is generated from
this module by ``scripts/generate_sync.py``).

:class:`AsyncWorkspaceSnapshots` works through the runtime's public SPI only, as its sync twin
does (see :mod:`.workspace` for the steps of a snapshot and a restore). The store is synchronous;
its calls run in worker threads, and a file read out of the sandbox is spooled to a local
temporary file (bounded memory) before the store verifies and keeps it. See docs/durability.md.
"""

from __future__ import annotations

if False:  # unasync: sync docstring
    """Snapshot and restore a conversation's workspace through any :class:`SkillRuntime`, on demand.

    :class:`WorkspaceSnapshots` works through the runtime's public SPI only: ``execute`` and
    ``get_file_system``. A **snapshot** runs one command in the sandbox (the listing with every
    file's digest), plans against the conversation's previous manifest, reads out of the sandbox
    only the files whose content the store does not hold yet (``read_stream``, streamed into the
    store in bounded memory and verified against the listing's digest), then stores the manifest.
    A **restore** fetches and verifies every object it needs into a local temporary directory
    *before* it changes anything, lists the current workspace (one command), then deletes and
    creates directories (one command), sends the files in one batch (``upload_files``) and makes the
    links and sets the modes (one command). See docs/durability.md.
    """

import asyncio
import contextlib
import io
import logging
import posixpath
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, ParamSpec, TypeVar, cast

from ..errors import (
    SnapshotError,
    WorkspaceRestoreError,
    WorkspaceSnapshotError,
)
from ..observability.audit import audited_async
from ..runtime.async_spi import AsyncSkillRuntime
from ..runtime.workspace import validate_conversation_id
from ..snapshots.listing import ListingEntry, parse_listing
from ..snapshots.manifest import Manifest
from ..snapshots.planning import plan_restore, plan_snapshot
from .common import (
    RestoreResult,
    SnapshotResult,
    batch_contents,
    batch_request,
    hash_requests,
    hash_result,
    inline_contents,
    lister_tag,
    listing_output,
    listing_request,
    post_scripts,
    pre_scripts,
    read_batches,
    record_restore,
    record_snapshot,
    script_failed,
    script_request,
    split_listing,
)
from .settings import SnapshotSettings

__all__ = ["AsyncWorkspaceSnapshots"]

if False:  # unasync: sync
    __all__ += ["SnapshotSettings"]  # public here too, where it was defined first

logger = logging.getLogger(__name__)

_Listed = tuple[int, dict[str, str], str]
"""What a fast listing tells the manifest: its start (ns, the sandbox's clock), each file's
stat key by path, and the tag of what listed it."""

P = ParamSpec("P")
T = TypeVar("T")


async def _off_loop(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``function(*args, **kwargs)``, a blocking store call: in a worker thread on the async
    face."""
    if True:  # unasync: async
        return await asyncio.to_thread(function, *args, **kwargs)
    else:  # unasync: sync
        return function(*args, **kwargs)


if False:  # unasync: sync

    class _ChunkReader(io.RawIOBase):
        """A readable binary stream over an iterator of byte chunks (one chunk held at a time)."""

        def __init__(self, chunks: Iterator[bytes], path: str) -> None:
            self._chunks = chunks
            self._path = path
            self._pending = b""

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
            while not self._pending:
                try:
                    chunk = next(self._chunks, None)
                except Exception as error:
                    # not an OSError: a store must not take the sandbox's failure for its own
                    raise WorkspaceSnapshotError(
                        f"{self._path[:200]!r} could not be read from the sandbox: "
                        f"{type(error).__name__}: {str(error)[:300]}"
                    ) from error
                if chunk is None:
                    return 0
                self._pending = bytes(chunk)
            size = min(len(buffer), len(self._pending))
            buffer[:size] = self._pending[:size]
            self._pending = self._pending[size:]
            return size

    def _reader(chunks: Iterator[bytes], path: str) -> BinaryIO:
        return cast(BinaryIO, _ChunkReader(chunks, path))


class AsyncWorkspaceSnapshots(SnapshotSettings):
    """:class:`~.workspace.WorkspaceSnapshots` for asyncio programs (same arguments)."""

    if False:  # unasync: sync docstring
        """On-demand snapshots of conversation workspaces into ``store`` (module docstring); the
        arguments (the store, the excluded entries, the bounds) are those of
        :class:`~.settings.SnapshotSettings`."""

    # -- listing ----------------------------------------------------------------------------------

    async def _list(
        self,
        runtime: AsyncSkillRuntime,
        conversation_id: str,
        *,
        inline: bool = True,
        seed: Manifest | None = None,
    ) -> tuple[list[ListingEntry], int, dict[str, bytes], _Listed | None]:
        """The workspace's listing (excluded entries left out), the requests it took (one,
        plus one per batch of files the listing left without a digest; see
        :class:`~.common.DigestCache`), the files that came back inline and, for a fast
        listing, its start and stat keys. Without a digest cache of its own, the listing
        reuses the digests of ``seed``'s stat keys when it was listed here (docs/durability.md,
        "Digest reuse")."""
        key = (runtime.name, runtime.default_working_directory, conversation_id)
        cache = self._cache(key)
        if cache is None:
            cache = self._seed(key, seed)
        self._remember(key, None)
        result = await runtime.execute(
            listing_request(
                timeout_seconds=self.listing_timeout_seconds,
                max_output_bytes=self.max_listing_bytes,
                cache=cache,
                inline=inline,
            )
        )
        data = listing_output(result)
        fast = split_listing(data)
        requests = 1
        if fast is not None:
            missing = fast.resolve(cache)
            if missing:
                for request in hash_requests(missing, timeout_seconds=self.listing_timeout_seconds):
                    requests += 1
                    fast.sums.update(hash_result(await runtime.execute(request)))
            entries = fast.entries(max_entries=self.max_entries)
            self._listed(key, fast.cache())
            listed: _Listed | None = (fast.started_ns, fast.stat_keys(), lister_tag(*key))
        else:
            entries = parse_listing(data, max_entries=self.max_entries)
            listed = None
        return self._parsed(entries), requests, inline_contents(result), listed

    # -- snapshot ---------------------------------------------------------------------------------

    async def snapshot(
        self, runtime: AsyncSkillRuntime, *, conversation_id: str, keep_last: int | None = None
    ) -> SnapshotResult:
        """Snapshot ``runtime``'s workspace as the next snapshot of ``conversation_id``.

        Raises :class:`~skillruntime.core.errors.SnapshotListingError` when the listing failed,
        timed out or is truncated or malformed,
        :class:`~skillruntime.core.errors.SymlinkEscapeError` for a link out of the workspace,
        :class:`WorkspaceSnapshotError` when a file changed while it was read. Nothing is
        stored then but objects (swept later if unreferenced).
        ``keep_last`` applies retention afterwards (keep the newest N, sweep the rest).

        Audited as one ``workspace.snapshot`` event (docs/observability.md): ids and counts,
        never a path.
        """
        async with audited_async(
            "workspace.snapshot", runtime=runtime.name, conversation_id=conversation_id
        ) as record:
            result = await self._snapshot(
                runtime, conversation_id=conversation_id, keep_last=keep_last
            )
            record_snapshot(record, result)
            return result

    async def restore(
        self, runtime: AsyncSkillRuntime, *, conversation_id: str, snapshot_id: str | None = None
    ) -> RestoreResult:
        """Make ``runtime``'s workspace equal to a snapshot of ``conversation_id`` (the latest,
        or ``snapshot_id``).

        Every object is fetched from the store and verified into a local temporary directory
        first: a missing or corrupted object raises :class:`WorkspaceRestoreError` (its cause
        the store's error) with the workspace untouched. A step that fails afterwards raises
        :class:`WorkspaceRestoreError` naming the steps done; restoring again finishes the job.

        Audited as one ``workspace.restore`` event (docs/observability.md): ids and counts,
        never a path.
        """
        async with audited_async(
            "workspace.restore", runtime=runtime.name, conversation_id=conversation_id
        ) as record:
            result = await self._restore(
                runtime, conversation_id=conversation_id, snapshot_id=snapshot_id
            )
            record_restore(record, result)
            return result

    async def _snapshot(
        self, runtime: AsyncSkillRuntime, *, conversation_id: str, keep_last: int | None = None
    ) -> SnapshotResult:
        """The work of :meth:`snapshot` (audited there)."""
        validate_conversation_id(conversation_id)
        started = time.perf_counter()
        previous = await _off_loop(self._previous, conversation_id)
        listing, requests, inline, listed = await self._list(
            runtime, conversation_id, seed=previous
        )
        manifest, uploads = plan_snapshot(
            listing,
            previous,
            conversation=conversation_id,
            skip_special=self.skip_special,
            stat_keys=listed[1] if listed is not None else None,
            listed_ns=listed[0] if listed is not None else None,
            lister=listed[2] if listed is not None else None,
        )
        if previous is not None and previous.same_content(manifest):
            deleted = await _off_loop(self._retain, conversation_id, keep_last)
            return SnapshotResult(
                snapshot_id=previous.snapshot_id,
                conversation_id=conversation_id,
                changed=False,
                entries=len(manifest.entries),
                objects_uploaded=0,
                bytes_uploaded=0,
                requests=requests,
                commands=requests,
                seconds=time.perf_counter() - started,
                deleted_snapshots=deleted,
            )
        present = await _off_loop(self.store.has_objects, uploads)
        missing = set(uploads) - present
        fs = await runtime.get_file_system()
        workspace = runtime.default_working_directory
        needed = []
        for entry in manifest.files:
            if entry.digest in missing:
                missing.discard(entry.digest)
                needed.append(entry)
        batches, singles = read_batches([entry for entry in needed if entry.path not in inline])
        commands = requests
        uploaded = 0
        with self._forgetting(runtime, conversation_id):
            for entry in needed:
                if entry.path in inline:
                    await _off_loop(self._put, entry, io.BytesIO(inline[entry.path]))
                    uploaded += entry.size or 0
            for batch in batches:
                result = await runtime.execute(
                    batch_request(batch, timeout_seconds=self.script_timeout_seconds)
                )
                requests += 1
                contents = batch_contents(result, batch)
                for entry in batch:
                    data = io.BytesIO(contents.pop(entry.path))
                    await _off_loop(self._put, entry, data)
                uploaded += sum(entry.size or 0 for entry in batch)
            for entry in singles:
                requests += 1
                path = posixpath.join(workspace, entry.path)
                if True:  # unasync: async
                    with tempfile.TemporaryFile(dir=self.spool_dir) as spool:
                        stream = fs.read_stream(path)
                        try:
                            async for chunk in stream:
                                spool.write(chunk)
                        except Exception as error:
                            raise WorkspaceSnapshotError(
                                f"{entry.path[:200]!r} could not be read from the sandbox: "
                                f"{type(error).__name__}: {str(error)[:300]}"
                            ) from error
                        finally:
                            await stream.aclose()
                        spool.seek(0)
                        await _off_loop(self._put, entry, spool)
                else:  # unasync: sync
                    # streamed into the store (the reader holds one chunk at a time)
                    with contextlib.closing(fs.read_stream(path)) as chunks:
                        self._put(entry, _reader(chunks, entry.path))
                uploaded += entry.size or 0
        reads = len(needed)
        snapshot_id = await _off_loop(self.store.put_manifest, manifest)
        self._keep(conversation_id, manifest)
        deleted = await _off_loop(self._retain, conversation_id, keep_last)
        seconds = time.perf_counter() - started
        if False:  # unasync: sync
            logger.info(
                "snapshot %s of %s: %d entries, %d objects (%d bytes) uploaded in %.3fs",
                snapshot_id[:12],
                conversation_id,
                len(manifest.entries),
                reads,
                uploaded,
                seconds,
            )
        return SnapshotResult(
            snapshot_id=snapshot_id,
            conversation_id=conversation_id,
            changed=True,
            entries=len(manifest.entries),
            objects_uploaded=reads,
            bytes_uploaded=uploaded,
            requests=requests,
            commands=commands + len(batches),
            seconds=seconds,
            deleted_snapshots=deleted,
        )

    # -- restore ----------------------------------------------------------------------------------

    async def _restore(
        self, runtime: AsyncSkillRuntime, *, conversation_id: str, snapshot_id: str | None = None
    ) -> RestoreResult:
        """The work of :meth:`restore` (audited there)."""
        validate_conversation_id(conversation_id)
        started = time.perf_counter()
        manifest = await _off_loop(self._manifest, conversation_id, snapshot_id)
        with tempfile.TemporaryDirectory(
            prefix="skillruntime-restore-", dir=self._spool_root(manifest)
        ) as spool:
            try:
                spooled = await _off_loop(self._spool, manifest, Path(spool))
                current, listed, _, _ = await self._list(runtime, conversation_id, inline=False)
            except SnapshotError as error:
                raise WorkspaceRestoreError(
                    f"restore of snapshot {manifest.snapshot_id[:12]} could not start: {error}"
                ) from error
            return await self._apply(runtime, manifest, current, spooled, started, listed=listed)

    async def _apply(
        self,
        runtime: AsyncSkillRuntime,
        manifest: Manifest,
        current: list[ListingEntry],
        spooled: dict[str, Path],
        started: float,
        *,
        listed: int,
    ) -> RestoreResult:
        plan = plan_restore(manifest, current)
        wanted = {entry.path: entry for entry in manifest.entries}
        workspace = runtime.default_working_directory
        done: list[str] = []
        counts = {"commands": listed, "requests": listed}

        async def run(scripts: list[bytes], step: str) -> None:
            for script in scripts:
                result = await runtime.execute(
                    script_request(script, timeout_seconds=self.script_timeout_seconds)
                )
                counts["commands"] += 1
                counts["requests"] += 1
                failure = script_failed(result)
                if failure is not None:
                    raise WorkspaceRestoreError(
                        f"restore of snapshot {manifest.snapshot_id[:12]}: {failure} ({step})",
                        done=tuple(done),
                    )
            if scripts:
                done.append(step)

        await run(pre_scripts(plan, current), "deleted and created directories")
        files = [
            (spooled[entry.digest], posixpath.join(workspace, entry.path), bool(entry.mode & 0o100))
            for entry in plan.write_files
            if entry.digest is not None
        ]
        if files:
            try:
                fs = await runtime.get_file_system()
                await fs.upload_files(files)
            except Exception as error:
                raise WorkspaceRestoreError(
                    f"restore of snapshot {manifest.snapshot_id[:12]}: sending the files failed: "
                    f"{type(error).__name__}: {str(error)[:300]}",
                    done=tuple(done),
                ) from error
            counts["requests"] += 1
            done.append(f"wrote {len(files)} files")
        await run(post_scripts(plan, current, wanted), "made the links and set the modes")
        seconds = time.perf_counter() - started
        if False:  # unasync: sync
            logger.info(
                "restored snapshot %s of %s: %d deleted, %d files written in %.3fs",
                manifest.snapshot_id[:12],
                manifest.conversation,
                len(plan.delete),
                len(files),
                seconds,
            )
        return RestoreResult(
            snapshot_id=manifest.snapshot_id,
            conversation_id=manifest.conversation,
            deleted=len(plan.delete),
            directories=len(plan.make_directories),
            files=len(files),
            bytes_written=sum(entry.size or 0 for entry in plan.write_files),
            symlinks=len(plan.make_symlinks),
            modes=len(plan.set_modes),
            entries=len(manifest.entries),
            requests=counts["requests"],
            commands=counts["commands"],
            seconds=seconds,
        )
