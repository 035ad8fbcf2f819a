"""``SnapshotConformance`` and ``AsyncSnapshotConformance``: the workspace-snapshot contracts of
``docs/durability.md`` ("On demand, through any runtime") against any runtime.

.. code-block:: python

    from skillruntime.core.testing import SnapshotConformance

    class TestMyRuntimeSnapshots(SnapshotConformance):
        def make_snapshot_runtime(self, *, conversation_id, conversations_root):
            return MyRuntime(conversation_id=conversation_id, conversations_root=conversations_root)

The subclass provides a runtime on a given conversation id (``make_snapshot_runtime``, or
``make_async_snapshot_runtime`` for :class:`AsyncSnapshotConformance`); the kit provides a
:class:`~skillruntime.core.snapshots.LocalSnapshotStore` in the test's temporary directory and
drives :class:`~skillruntime.core.durability.WorkspaceSnapshots` (or
:class:`~skillruntime.core.durability.AsyncWorkspaceSnapshots`) through the runtime's public SPI.
Every workspace is built and inspected with commands run *in the sandbox* (``sh``, ``printf``,
``base64``, ``tar``, ``ln``, ``chmod``), so the kit sees what the sandbox holds, byte for byte,
whatever transport the runtime uses. ``docs/custom-runtime.md`` lists the contracts.

Capability flags (``snapshot_symlinks``, ``snapshot_newline_names``, ``snapshot_non_utf8_names``)
describe what a runtime's file system can hold; a contract that needs an absent capability is
removed from the subclass (never skipped), and the round trip leaves such entries out.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import io
import shlex
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import pytest

from ..durability import (
    AsyncWorkspaceSnapshots,
    RestoreResult,
    SnapshotResult,
    WorkspaceSnapshots,
)
from ..errors import SymlinkEscapeError, WorkspaceRestoreError
from ..models import SkillExecutionRequest, SkillExecutionResult
from ..runtime.async_spi import AsyncSkillRuntime
from ..runtime.spi import SkillRuntime
from ..snapshots import LocalSnapshotStore

__all__ = [
    "SNAPSHOT_CAPABILITY_TESTS",
    "AsyncSnapshotConformance",
    "SnapshotConformance",
    "SnapshotWorld",
    "WorkspaceTree",
]

WorkspaceTree = dict[bytes, tuple[str, int, bytes]]
"""``{path relative to the workspace: (kind, permission bits, content or link target)}``; kind
is ``file``, ``directory`` or ``symlink`` (a directory's content is empty)."""

SNAPSHOT_CAPABILITY_TESTS: dict[str, str] = {
    "test_a_link_out_of_the_workspace_is_refused_and_stores_nothing": "snapshot_symlinks",
}
"""Tests that exist on a subclass only when its capability flag is on (never skipped)."""

_OUTPUT_BYTES = 16 * 1024 * 1024
_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/")
_SKILLS = b"skills"


def _sh_bytes(raw: bytes) -> str:
    """A shell word that expands to ``raw`` (no trailing newline, no NUL), whatever its bytes:
    ``"$(printf '\\ooo…')"`` with every byte but ``[A-Za-z0-9._/]`` as an octal escape."""
    escaped = "".join(chr(byte) if byte in _SAFE else f"\\{byte:03o}" for byte in raw)
    return f"\"$(printf '{escaped}')\""


def _in(raw: bytes) -> str:
    """A shell word for the workspace-relative path ``raw`` (``./`` first: never an option)."""
    return _sh_bytes(b"./" + raw)


@dataclass(frozen=True)
class _Node:
    """One entry of a workspace the kit builds: a file, a directory or a link."""

    path: bytes
    kind: str
    mode: int = 0o644
    content: bytes = b""


def _build_script(nodes: list[_Node]) -> str:
    """A ``sh`` script making ``nodes`` (parents listed before children) in the working
    directory, each with its exact mode."""
    lines = ["set -e"]
    for node in nodes:
        target = _in(node.path)
        if node.kind == "directory":
            lines.append(f"mkdir -p {target}")
        elif node.kind == "symlink":
            lines.append(f"ln -s {_sh_bytes(node.content)} {target}")
            continue
        else:
            data = base64.b64encode(node.content).decode("ascii")
            lines.append(f"printf '%s' '{data}' | base64 -d > {target}")
        lines.append(f"chmod {node.mode:o} {target}")
    return "\n".join(lines) + "\n"


def _tree_script(workspace: str) -> str:
    """A ``sh`` script printing, in base64, a ``tar`` of every entry of ``workspace``."""
    return (
        f"cd {shlex.quote(workspace)} || exit 3\n"
        "set --\n"
        "for e in .[!.]* ..?* *; do\n"
        '  if [ -e "$e" ] || [ -L "$e" ]; then set -- "$@" "./$e"; fi\n'
        "done\n"
        '[ "$#" -eq 0 ] && exit 0\n'
        '{ tar -cf - "$@" || echo "kit: tar failed" >&2; } | base64\n'
    )


def _parse_tree(stdout: str) -> WorkspaceTree:
    """The :data:`WorkspaceTree` of :func:`_tree_script`'s output."""
    tree: WorkspaceTree = {}
    raw = base64.b64decode("".join(stdout.split()))
    if not raw:
        return tree
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as archive:
        for member in archive:
            path = member.name.encode("utf-8", "surrogateescape")
            path = path[2:] if path.startswith(b"./") else path
            path = path.rstrip(b"/")
            mode = member.mode & 0o7777
            if member.issym():
                tree[path] = ("symlink", 0, member.linkname.encode("utf-8", "surrogateescape"))
            elif member.isdir():
                tree[path] = ("directory", mode, b"")
            elif member.isfile():
                extracted = archive.extractfile(member)
                assert extracted is not None
                tree[path] = ("file", mode, extracted.read())
            else:
                tree[path] = (f"other:{member.type!r}", mode, b"")
    return tree


def _split_skills(tree: WorkspaceTree) -> tuple[WorkspaceTree, WorkspaceTree]:
    """``tree`` without ``skills/``, and ``skills/`` alone."""
    outside: WorkspaceTree = {}
    skills: WorkspaceTree = {}
    for path, value in tree.items():
        if path == _SKILLS or path.startswith(_SKILLS + b"/"):
            skills[path] = value
        else:
            outside[path] = value
    return outside, skills


class _Driver(Protocol):
    """The calls the contracts make, sync or async underneath."""

    def open(self, conversation_id: str) -> Any: ...
    def workspace(self, runtime: Any) -> str: ...
    def execute(self, runtime: Any, request: SkillExecutionRequest) -> SkillExecutionResult: ...
    def snapshot(self, runtime: Any, conversation_id: str) -> SnapshotResult: ...
    def restore(self, runtime: Any, conversation_id: str) -> RestoreResult: ...
    def close(self, runtime: Any) -> None: ...


class SnapshotWorld:
    """One test's store, conversations and runtimes (closed afterwards), and the helpers that
    build and read a workspace through the runtime."""

    def __init__(self, driver: _Driver, store: LocalSnapshotStore) -> None:
        self.driver = driver
        self.store = store
        self.conversation_ids: list[str] = []
        self._runtimes: list[Any] = []

    def new_conversation(self) -> str:
        """A fresh conversation id (unique, so runs in parallel never meet)."""
        conversation_id = f"snap-{uuid.uuid4().hex[:12]}"
        self.conversation_ids.append(conversation_id)
        return conversation_id

    def runtime(self, conversation_id: str) -> Any:
        """A new runtime object on ``conversation_id``."""
        runtime = self.driver.open(conversation_id)
        self._runtimes.append(runtime)
        return runtime

    def run(self, runtime: Any, script: str) -> SkillExecutionResult:
        """Run ``script`` in the workspace; it must succeed."""
        result = self.driver.execute(
            runtime,
            SkillExecutionRequest(
                command=script, timeout_seconds=120.0, max_output_bytes=_OUTPUT_BYTES
            ),
        )
        assert result.ok, f"kit command failed ({result.exit_code}): {result.stderr[-2000:]}"
        assert not result.stdout_truncated
        return result

    def build(self, runtime: Any, nodes: list[_Node]) -> None:
        """Make ``nodes`` in the workspace."""
        self.run(runtime, _build_script(nodes))

    def tree(self, runtime: Any) -> WorkspaceTree:
        """Everything the workspace holds, ``skills/`` included, as the sandbox sees it."""
        result = self.run(runtime, _tree_script(self.driver.workspace(runtime)))
        assert "kit: tar failed" not in result.stderr, result.stderr
        return _parse_tree(result.stdout)

    def snapshot(self, runtime: Any, conversation_id: str) -> SnapshotResult:
        """``snapshot`` of ``runtime``'s workspace as ``conversation_id``."""
        return self.driver.snapshot(runtime, conversation_id)

    def restore(self, runtime: Any, conversation_id: str) -> RestoreResult:
        """``restore`` of ``conversation_id``'s latest snapshot into ``runtime``'s workspace."""
        return self.driver.restore(runtime, conversation_id)

    def objects(self) -> set[Path]:
        """The object files of the store."""
        return {path for path in (self.store.root / "objects").rglob("*") if path.is_file()}

    def manifests(self) -> set[Path]:
        """The manifest files of the store, every conversation's."""
        return {path for path in (self.store.root / "manifests").rglob("*") if path.is_file()}

    def close(self) -> None:
        """Close every runtime this world made."""
        for runtime in reversed(self._runtimes):
            self.driver.close(runtime)


class _SnapshotContracts:
    """The contracts, written once; :class:`SnapshotConformance` and
    :class:`AsyncSnapshotConformance` supply the driver."""

    snapshot_symlinks: ClassVar[bool] = True
    """Links inside the workspace can be made in the sandbox (``ln -s``) and kept by a
    snapshot: the round trip includes them and the escaping-link contract runs."""

    snapshot_newline_names: ClassVar[bool] = True
    """A name holding a newline can be made, snapshotted and restored."""

    snapshot_non_utf8_names: ClassVar[bool] = True
    """Names that are not UTF-8 (bytes ``0xff``, ``0xe9``) can be made, snapshotted and
    restored; off for a file system or file API that carries names as text."""

    contract_names: ClassVar[tuple[str, ...]] = ()
    """Names of the contract tests this class runs (filled in per subclass)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for test_name, flag in SNAPSHOT_CAPABILITY_TESTS.items():
            if not getattr(cls, flag):
                setattr(cls, test_name, None)
            elif getattr(cls, test_name, None) is None:
                setattr(cls, test_name, _SnapshotContracts.__dict__[test_name])
        cls.contract_names = tuple(
            sorted(
                name
                for name in dir(cls)
                if name.startswith("test_") and callable(getattr(cls, name, None))
            )
        )

    # ------------------------------------------------------------------ hooks

    def conversations_root(self, tmp_path: Path) -> str:
        """The runtime path under which conversations live (default: a host temp directory);
        the same hook as :class:`~skillruntime.core.testing.RuntimeConformance`'s."""
        return str(tmp_path / "conversations")

    def discard_conversations(self, conversation_ids: list[str]) -> None:
        """Called after each test with the conversations it used (default: nothing)."""

    def open_snapshot_world(
        self, tmp_path: Path
    ) -> contextlib.AbstractContextManager[SnapshotWorld]:
        """The test's :class:`SnapshotWorld` (provided by the sync and async classes)."""
        raise NotImplementedError

    @pytest.fixture
    def snapshot_world(self, tmp_path: Path) -> Iterator[SnapshotWorld]:
        """A :class:`SnapshotWorld` on a store under ``tmp_path`` for one test."""
        with self.open_snapshot_world(tmp_path) as world:
            yield world

    # ----------------------------------------------------------- the workspace

    def _original(self) -> list[_Node]:
        """The workspace every contract starts from: modes 0644/0755/0600/0444 and
        0700/0555 (a read-only directory), empty directories, duplicate and empty files, names
        with a space, a leading dash, a quote and a backslash and, as the capabilities allow, a
        newline, bytes that are not UTF-8 and links inside the workspace. A directory listed
        twice is made first and given its mode again after its contents."""
        nodes = [
            _Node(b"src", "directory", 0o755),
            _Node(b"src/main.py", "file", 0o644, b"print('hello')\n"),
            _Node(b"src/run.sh", "file", 0o755, b"#!/bin/sh\necho ran\n"),
            _Node(b"src/deep", "directory", 0o700),
            _Node(b"src/deep/private", "file", 0o600, b"\x00\x01binary\xff\n"),
            _Node(b"empty", "directory", 0o755),
            _Node(b"empty/nested-empty", "directory", 0o755),
            _Node(b"notes", "directory", 0o755),
            _Node(b"notes/todo.txt", "file", 0o644, b"to be deleted\n"),
            _Node(b"with space.txt", "file", 0o644, b"a space in the name\n"),
            _Node(b"same-a", "file", 0o644, b"duplicate content\n"),
            _Node(b"same-b", "file", 0o644, b"duplicate content\n"),
            _Node(b"zero.bin", "file", 0o644, b""),
            _Node(b"-dash", "file", 0o644, b"starts with a dash\n"),
            _Node(b"quote's \\ back.txt", "file", 0o644, b"a quote and a backslash\n"),
            _Node(b"readonly", "directory", 0o755),
            _Node(b"readonly/inside.txt", "file", 0o444, b"in a read-only directory\n"),
            _Node(b"readonly", "directory", 0o555),
        ]
        if self.snapshot_newline_names:
            nodes.append(_Node(b"line\nbreak.txt", "file", 0o644, b"newline in the name\n"))
        if self.snapshot_non_utf8_names:
            nodes.append(_Node(b"bytes-\xff\xfe", "directory", 0o755))
            nodes.append(_Node(b"bytes-\xff\xfe/latin-\xe9.txt", "file", 0o644, b"not utf-8\n"))
        if self.snapshot_symlinks:
            nodes.append(_Node(b"latest", "symlink", content=b"src/main.py"))
            nodes.append(_Node(b"src/up", "symlink", content=b"../empty"))
        return nodes

    def _mutate(self, world: SnapshotWorld, runtime: Any) -> None:
        """Change a file and a mode, delete a file, add a file and directories (and retarget a
        link)."""
        script = [
            "set -e",
            "printf 'changed\\n' > ./src/main.py",
            "chmod 644 ./src/run.sh",
            "rm -f ./notes/todo.txt",
            "printf 'new\\n' > ./scratch.txt",
            "mkdir -p ./new-dir/inner",
            "rmdir ./empty/nested-empty",
        ]
        # the odd names are changed or deleted, so the restore has to write them back
        script.append("rm -f ./-dash " + _in(b"with space.txt") + " " + _in(b"quote's \\ back.txt"))
        # a file changed inside a read-only directory: the restore has to open it and close it
        script += [
            "chmod 755 ./readonly",
            "chmod 644 ./readonly/inside.txt",
            "printf 'edited\\n' > ./readonly/inside.txt",
            "chmod 555 ./readonly",
        ]
        if self.snapshot_newline_names:
            script.append("printf 'other\\n' > " + _in(b"line\nbreak.txt"))
        if self.snapshot_non_utf8_names:
            script.append("rm -rf " + _in(b"bytes-\xff\xfe"))
        if self.snapshot_symlinks:
            script += ["rm -f ./latest", "ln -s same-b ./latest"]
        world.run(runtime, "\n".join(script) + "\n")

    def _prepared(self, world: SnapshotWorld) -> tuple[str, Any, WorkspaceTree]:
        """A conversation, its runtime with :meth:`_original` built, and its tree."""
        conversation = world.new_conversation()
        runtime = world.runtime(conversation)
        world.build(runtime, self._original())
        tree = world.tree(runtime)
        expected = {node.path for node in self._original()}  # a path may be listed twice
        assert set(_split_skills(tree)[0]) == expected, "the kit could not build its workspace"
        return conversation, runtime, tree

    # --------------------------------------------------------------- contracts

    def test_restore_after_changes_gives_the_snapshot_byte_for_byte(
        self, snapshot_world: SnapshotWorld
    ) -> None:
        """Snapshot, change/delete/add files and directories, restore: the workspace equals the
        snapshot (contents, modes, empty directories, links, odd names)."""
        world = snapshot_world
        conversation, runtime, before = self._prepared(world)
        taken = world.snapshot(runtime, conversation)
        assert taken.changed
        assert taken.entries == len(before)
        self._mutate(world, runtime)
        assert world.tree(runtime) != before
        restored = world.restore(runtime, conversation)
        assert restored.snapshot_id == taken.snapshot_id
        assert world.tree(runtime) == before
        # restoring an equal workspace again changes nothing
        again = world.restore(runtime, conversation)
        assert (again.deleted, again.files, again.directories) == (0, 0, 0)
        assert world.tree(runtime) == before

    def test_unchanged_workspace_stores_nothing_and_one_change_uploads_one_object(
        self, snapshot_world: SnapshotWorld
    ) -> None:
        """A second snapshot without a change stores nothing; after a one-file change exactly
        one object is uploaded."""
        world = snapshot_world
        conversation, runtime, _ = self._prepared(world)
        first = world.snapshot(runtime, conversation)
        objects, manifests = world.objects(), world.manifests()
        same = world.snapshot(runtime, conversation)
        assert not same.changed
        assert same.snapshot_id == first.snapshot_id
        assert same.objects_uploaded == 0
        assert (world.objects(), world.manifests()) == (objects, manifests)
        world.run(runtime, "printf 'one change %s\\n' \"$$\" > ./src/main.py\n")
        second = world.snapshot(runtime, conversation)
        assert second.changed
        assert second.snapshot_id != first.snapshot_id
        assert second.objects_uploaded == 1
        assert len(world.objects() - objects) == 1
        assert len(world.manifests() - manifests) == 1

    def test_a_link_out_of_the_workspace_is_refused_and_stores_nothing(
        self, snapshot_world: SnapshotWorld
    ) -> None:
        """A link whose target leaves the workspace makes ``snapshot`` raise
        ``SymlinkEscapeError`` and no manifest is stored."""
        world = snapshot_world
        conversation = world.new_conversation()
        runtime = world.runtime(conversation)
        world.build(
            runtime,
            [
                _Node(b"ok.txt", "file", 0o644, b"fine\n"),
                _Node(b"escape", "symlink", content=b"../../outside"),
            ],
        )
        with pytest.raises(SymlinkEscapeError):
            world.snapshot(runtime, conversation)
        assert world.store.list_snapshots(conversation) == []
        assert world.manifests() == set()

    def test_a_corrupted_object_fails_the_restore_and_leaves_the_workspace_untouched(
        self, snapshot_world: SnapshotWorld
    ) -> None:
        """A stored object that no longer matches its digest makes ``restore`` raise
        ``WorkspaceRestoreError`` before anything in the workspace changes."""
        world = snapshot_world
        conversation, runtime, _ = self._prepared(world)
        world.snapshot(runtime, conversation)
        self._mutate(world, runtime)
        before = world.tree(runtime)
        digest = hashlib.sha256(b"print('hello')\n").hexdigest()
        victim = world.store.root / "objects" / digest[:2] / digest
        assert victim in world.objects()
        victim.chmod(0o644)
        victim.write_bytes(b"tampered")
        with pytest.raises(WorkspaceRestoreError) as caught:
            world.restore(runtime, conversation)
        assert caught.value.done == ()
        assert not caught.value.changed
        assert world.tree(runtime) == before

    def test_restore_into_a_fresh_conversation_workspace(
        self, snapshot_world: SnapshotWorld
    ) -> None:
        """The sandbox was replaced: a new runtime object on a new conversation restores the
        first conversation's snapshot and holds the same workspace."""
        world = snapshot_world
        conversation, runtime, before = self._prepared(world)
        world.snapshot(runtime, conversation)
        fresh = world.runtime(world.new_conversation())
        restored = world.restore(fresh, conversation)
        assert restored.files > 0
        assert _split_skills(world.tree(fresh))[0] == _split_skills(before)[0]
        # the first workspace is not the second's
        world.run(fresh, "printf 'only here\\n' > ./fresh-only.txt\n")
        assert b"fresh-only.txt" not in world.tree(runtime)

    def test_skills_are_neither_stored_nor_touched(self, snapshot_world: SnapshotWorld) -> None:
        """``skills/`` is left out of the manifest, and a restore leaves it as it finds it."""
        world = snapshot_world
        conversation, runtime, _ = self._prepared(world)
        world.build(
            runtime,
            [
                _Node(b"skills", "directory", 0o755),
                _Node(b"skills/demo", "directory", 0o755),
                _Node(b"skills/demo/SKILL.md", "file", 0o644, b"# demo\n"),
            ],
        )
        outside, _ = _split_skills(world.tree(runtime))
        taken = world.snapshot(runtime, conversation)
        manifest = world.store.get_manifest(conversation, taken.snapshot_id)
        paths = [entry.path for entry in manifest.entries]
        assert not [path for path in paths if path == "skills" or path.startswith("skills/")]
        assert taken.entries == len(outside)
        world.run(
            runtime,
            "set -e\nprintf 'edited\\n' > ./skills/demo/SKILL.md\n"
            "mkdir -p ./skills/other\nprintf 'x\\n' > ./skills/other/SKILL.md\n"
            "printf 'changed\\n' > ./src/main.py\n",
        )
        skills_before = _split_skills(world.tree(runtime))[1]
        world.restore(runtime, conversation)
        after_outside, skills_after = _split_skills(world.tree(runtime))
        assert skills_after == skills_before
        assert after_outside == outside


class _SyncDriver:
    """Calls a sync runtime and :class:`WorkspaceSnapshots` directly."""

    def __init__(self, suite: SnapshotConformance, root: str, snapshots: WorkspaceSnapshots):
        self.suite = suite
        self.root = root
        self.snapshots = snapshots

    def open(self, conversation_id: str) -> SkillRuntime:
        return self.suite.make_snapshot_runtime(
            conversation_id=conversation_id, conversations_root=self.root
        )

    def workspace(self, runtime: SkillRuntime) -> str:
        return runtime.default_working_directory

    def execute(
        self, runtime: SkillRuntime, request: SkillExecutionRequest
    ) -> SkillExecutionResult:
        return runtime.execute(request)

    def snapshot(self, runtime: SkillRuntime, conversation_id: str) -> SnapshotResult:
        return self.snapshots.snapshot(runtime, conversation_id=conversation_id)

    def restore(self, runtime: SkillRuntime, conversation_id: str) -> RestoreResult:
        return self.snapshots.restore(runtime, conversation_id=conversation_id)

    def close(self, runtime: SkillRuntime) -> None:
        runtime.close()


class SnapshotConformance(_SnapshotContracts):
    """Subclass it as ``Test<YourRuntime>Snapshots`` and implement
    :meth:`make_snapshot_runtime`; set the capability flags your file system needs."""

    def make_snapshot_runtime(
        self, *, conversation_id: str, conversations_root: str
    ) -> SkillRuntime:
        """A new runtime object whose workspace is ``conversation_id``'s under
        ``conversations_root``; a second object on the same id must see the same files, another
        id must be another (empty) workspace."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_snapshot_runtime()")

    @contextlib.contextmanager
    def open_snapshot_world(self, tmp_path: Path) -> Iterator[SnapshotWorld]:
        """A :class:`SnapshotWorld` on a store under ``tmp_path`` with a sync driver; closes
        its runtimes and discards its conversations on exit."""
        store = LocalSnapshotStore(tmp_path / "snapshot-store")
        driver = _SyncDriver(self, self.conversations_root(tmp_path), WorkspaceSnapshots(store))
        world = SnapshotWorld(driver, store)
        try:
            yield world
        finally:
            try:
                world.close()
            finally:
                self.discard_conversations(world.conversation_ids)


class _AsyncDriver:
    """Drives an async runtime and :class:`AsyncWorkspaceSnapshots` on one event loop."""

    def __init__(
        self,
        suite: AsyncSnapshotConformance,
        root: str,
        snapshots: AsyncWorkspaceSnapshots,
        runner: asyncio.Runner,
    ) -> None:
        self.suite = suite
        self.root = root
        self.snapshots = snapshots
        self.runner = runner

    def open(self, conversation_id: str) -> AsyncSkillRuntime:
        async def make() -> AsyncSkillRuntime:
            return self.suite.make_async_snapshot_runtime(
                conversation_id=conversation_id, conversations_root=self.root
            )

        return self.runner.run(make())

    def workspace(self, runtime: AsyncSkillRuntime) -> str:
        return runtime.default_working_directory

    def execute(
        self, runtime: AsyncSkillRuntime, request: SkillExecutionRequest
    ) -> SkillExecutionResult:
        return self.runner.run(runtime.execute(request))

    def snapshot(self, runtime: AsyncSkillRuntime, conversation_id: str) -> SnapshotResult:
        return self.runner.run(self.snapshots.snapshot(runtime, conversation_id=conversation_id))

    def restore(self, runtime: AsyncSkillRuntime, conversation_id: str) -> RestoreResult:
        return self.runner.run(self.snapshots.restore(runtime, conversation_id=conversation_id))

    def close(self, runtime: AsyncSkillRuntime) -> None:
        self.runner.run(runtime.close())


class AsyncSnapshotConformance(_SnapshotContracts):
    """The same contracts through :class:`AsyncWorkspaceSnapshots` on an async runtime, every
    call awaited on one event loop per test. Implement :meth:`make_async_snapshot_runtime`."""

    def make_async_snapshot_runtime(
        self, *, conversation_id: str, conversations_root: str
    ) -> AsyncSkillRuntime:
        """A new async runtime object (same rules as ``make_snapshot_runtime``); called on the
        test's event loop."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement make_async_snapshot_runtime()"
        )

    @contextlib.contextmanager
    def open_snapshot_world(self, tmp_path: Path) -> Iterator[SnapshotWorld]:
        """A :class:`SnapshotWorld` on a store under ``tmp_path`` with an async driver on its
        own event loop; closes its runtimes and discards its conversations on exit."""
        store = LocalSnapshotStore(tmp_path / "snapshot-store")
        with asyncio.Runner() as runner:
            driver = _AsyncDriver(
                self, self.conversations_root(tmp_path), AsyncWorkspaceSnapshots(store), runner
            )
            world = SnapshotWorld(driver, store)
            try:
                yield world
            finally:
                try:
                    world.close()
                finally:
                    self.discard_conversations(world.conversation_ids)
