"""The async face of :mod:`.workspace`: the same snapshot and restore over an
:class:`AsyncSkillRuntime`. The store is synchronous; its calls run in worker threads, and a file
read out of the sandbox is spooled to a local temporary file (bounded memory) before the store
verifies and keeps it."""

from __future__ import annotations

import asyncio
import io
import posixpath
import tempfile
import time
from pathlib import Path

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
from .workspace import SnapshotSettings

__all__ = ["AsyncWorkspaceSnapshots"]


class AsyncWorkspaceSnapshots(SnapshotSettings):
    """:class:`~.workspace.WorkspaceSnapshots` for asyncio programs (same arguments)."""

    async def _list(
        self, runtime: AsyncSkillRuntime, conversation_id: str, *, inline: bool = True
    ) -> tuple[list[ListingEntry], int, dict[str, bytes]]:
        """See :meth:`~.workspace.WorkspaceSnapshots._list`."""
        key = (runtime.name, runtime.default_working_directory, conversation_id)
        cache = self._cache(key)
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
            data = fast.portable()
        entries = parse_listing(data, max_entries=self.max_entries)
        if fast is not None:
            self._remember(key, fast.cache())
        return self._parsed(entries), requests, inline_contents(result)

    async def snapshot(
        self, runtime: AsyncSkillRuntime, *, conversation_id: str, keep_last: int | None = None
    ) -> SnapshotResult:
        """See :meth:`~.workspace.WorkspaceSnapshots.snapshot`."""
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
        """See :meth:`~.workspace.WorkspaceSnapshots.restore`."""
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
        listing, requests, inline = await self._list(runtime, conversation_id)
        previous = await asyncio.to_thread(self.store.latest, conversation_id)
        manifest, uploads = plan_snapshot(
            listing, previous, conversation=conversation_id, skip_special=self.skip_special
        )
        if previous is not None and previous.entries == manifest.entries:
            deleted = await asyncio.to_thread(self._retain, conversation_id, keep_last)
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
        present = await asyncio.to_thread(self.store.has_objects, uploads)
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
                    await asyncio.to_thread(self._put, entry, io.BytesIO(inline[entry.path]))
                    uploaded += entry.size or 0
            for batch in batches:
                result = await runtime.execute(
                    batch_request(batch, timeout_seconds=self.script_timeout_seconds)
                )
                requests += 1
                contents = batch_contents(result, batch)
                for entry in batch:
                    data = io.BytesIO(contents.pop(entry.path))
                    await asyncio.to_thread(self._put, entry, data)
                uploaded += sum(entry.size or 0 for entry in batch)
            for entry in singles:
                requests += 1
                with tempfile.TemporaryFile(dir=self.spool_dir) as spool:
                    stream = fs.read_stream(posixpath.join(workspace, entry.path))
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
                    await asyncio.to_thread(self._put, entry, spool)
                uploaded += entry.size or 0
        reads = len(needed)
        snapshot_id = await asyncio.to_thread(self.store.put_manifest, manifest)
        deleted = await asyncio.to_thread(self._retain, conversation_id, keep_last)
        return SnapshotResult(
            snapshot_id=snapshot_id,
            conversation_id=conversation_id,
            changed=True,
            entries=len(manifest.entries),
            objects_uploaded=reads,
            bytes_uploaded=uploaded,
            requests=requests,
            commands=commands + len(batches),
            seconds=time.perf_counter() - started,
            deleted_snapshots=deleted,
        )

    async def _restore(
        self, runtime: AsyncSkillRuntime, *, conversation_id: str, snapshot_id: str | None = None
    ) -> RestoreResult:
        """The work of :meth:`restore` (audited there)."""
        validate_conversation_id(conversation_id)
        started = time.perf_counter()
        manifest = await asyncio.to_thread(self._manifest, conversation_id, snapshot_id)
        with tempfile.TemporaryDirectory(
            prefix="skillruntime-restore-", dir=self._spool_root(manifest)
        ) as spool:
            try:
                spooled = await asyncio.to_thread(self._spool, manifest, Path(spool))
                current, listed, _ = await self._list(runtime, conversation_id, inline=False)
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
                await (await runtime.get_file_system()).upload_files(files)
            except Exception as error:
                raise WorkspaceRestoreError(
                    f"restore of snapshot {manifest.snapshot_id[:12]}: sending the files failed: "
                    f"{type(error).__name__}: {str(error)[:300]}",
                    done=tuple(done),
                ) from error
            counts["requests"] += 1
            done.append(f"wrote {len(files)} files")
        await run(post_scripts(plan, current, wanted), "made the links and set the modes")
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
            seconds=time.perf_counter() - started,
        )
