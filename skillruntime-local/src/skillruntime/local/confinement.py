"""Race-free resolution of host paths below one directory, through directory descriptors.

A path is resolved component by component from a descriptor of the root: every directory is
opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to the descriptor of its parent, and a symbolic
link met on the way is read and followed by this code (never by the kernel), so it cannot lead
above the root. ``..`` returns to the descriptor the walk came from. The caller then works on the
final name relative to the descriptor of its parent (``dir_fd=``), so swapping a directory for a
link after the walk changes nothing: the open descriptors keep pointing at the directories the
walk checked.

An absolute link target is followed when it names the root (as spelt, or its real path) or a
path below it; anything else is refused with :class:`WorkspaceEscapeError`. With the root ``/``
nothing can be refused, and resolution behaves like the kernel's (``/..`` is ``/``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat as stat_module
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from skillruntime.core.errors import (
    InvalidPathError,
    NotADirectoryFileError,
    RuntimeFileNotFoundError,
    WorkspaceEscapeError,
    file_error_from_os_error,
    printable,
)

__all__ = [
    "MAX_PATH_BYTES",
    "MAX_SYMLINK_HOPS",
    "ConfinedRoot",
    "Located",
    "check_path_text",
    "open_directory_below",
]

MAX_PATH_BYTES = 4096
"""Longest path accepted, in bytes of the file-system encoding (Linux ``PATH_MAX``)."""

MAX_SYMLINK_HOPS = 40
"""Symbolic links (and retries after a concurrent swap) one resolution follows before it gives up
with :class:`InvalidPathError`, as the kernel does with ``ELOOP``."""

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PARENT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


@dataclass
class Located:
    """The result of a walk: ``name`` inside the directory open as ``dir_fd``.

    ``name`` is ``"."`` when the path is the root itself. ``path`` is the caller's path, for
    messages. The descriptors are closed when the walk's context ends.
    """

    dir_fd: int
    name: str
    path: str
    final: os.stat_result | None = None
    """The ``lstat`` of ``name`` taken by the walk (a link only when the walk does not follow
    a final link), ``None`` when it took none (the name is missing, or ``"."``). It describes
    the entry as the walk found it; an entry swapped since is caught by the ``O_NOFOLLOW``
    open and ``fstat`` that follow."""


def check_path_text(path: str) -> str:
    """Return ``path`` when it can name a host file: encodable, no NUL, at most
    :data:`MAX_PATH_BYTES` bytes; else raise :class:`InvalidPathError` saying why."""
    try:
        encoded = os.fsencode(path)
    except UnicodeEncodeError as exc:
        raise InvalidPathError(
            f"Path {path[:80]!r}... cannot be encoded for the file system ({exc.reason})",
            path=None,
        ) from exc
    if b"\x00" in encoded:
        raise InvalidPathError("path must not contain a NUL character", path=None)
    if len(encoded) > MAX_PATH_BYTES:
        raise InvalidPathError(
            f"Path {path[:80]!r}... is {len(encoded)} bytes long; at most {MAX_PATH_BYTES} "
            "are accepted",
            path=None,
        )
    return path


def _split(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def _split_target(target: str) -> list[str]:
    """The components of a link target, ending in ``"."`` when the target ends in ``/`` or
    ``/.``: as for the kernel, its last name must then be a directory (``f/.`` naming a file is
    not a directory error, not the file)."""
    parts = _split(target)
    if parts and (target.endswith("/") or target.endswith("/.")):
        parts.append(".")
    return parts


class ConfinedRoot:
    """Resolves paths below ``root`` (an absolute host path) race-free; see the module docs.

    ``root`` itself may be reached through symbolic links: it is opened by name for every walk.
    """

    def __init__(self, root: str) -> None:
        if not os.path.isabs(root):
            raise ValueError(f"the confinement root must be absolute (got {root!r})")
        self.root = os.path.normpath(root)
        if self.root.startswith("//"):
            self.root = "/" + self.root.lstrip("/")
        self._root_parts = _split(self.root)

    @property
    def confines(self) -> bool:
        """False for the root ``/``, below which every host path lies."""
        return bool(self._root_parts)

    def relative(self, path: str) -> list[str]:
        """The components of the normalised absolute ``path`` below the root."""
        parts = _split(check_path_text(path))
        if parts[: len(self._root_parts)] != self._root_parts:
            raise WorkspaceEscapeError(f"Path {path!r} is outside {self.root}")
        return parts[len(self._root_parts) :]

    def locate(
        self, path: str, *, follow_final: bool, create_parents: bool = False
    ) -> contextlib.AbstractContextManager[Located]:
        """Walk to the last component of ``path`` and yield it with its parent's descriptor.

        ``follow_final`` follows a final symbolic link (a read); otherwise the link itself is the
        result (a write replaces it, a delete removes it). ``create_parents`` creates missing
        directories on the way. Raises :class:`WorkspaceEscapeError` when a link leads outside,
        :class:`RuntimeFileNotFoundError` when a parent is missing, :class:`NotADirectoryFileError`
        when a parent is not a directory, and :class:`InvalidPathError` after
        :data:`MAX_SYMLINK_HOPS` links. A missing final component is not an error.
        """
        parts = self.relative(path)
        if not self.confines:
            return self._locate_unconfined(parts, path, follow_final, create_parents)
        return _ConfinedWalk(
            self.root,
            self._walk,
            parts,
            path,
            follow_final=follow_final,
            create_parents=create_parents,
        )

    @contextlib.contextmanager
    def _locate_unconfined(
        self, parts: list[str], path: str, follow_final: bool, create_parents: bool
    ) -> Iterator[Located]:
        """Below ``/`` nothing can escape: the kernel resolves the parent directory, and only a
        final link is followed here (so the caller still sees what it points at)."""
        current = "/" + "/".join(parts)
        for _ in range(MAX_SYMLINK_HOPS + 1):
            parent, name = os.path.split(current)
            if create_parents:
                try:
                    os.makedirs(parent, exist_ok=True)
                except FileExistsError as exc:  # a parent is a file, or a looping link
                    try:
                        os.stat(parent)
                    except OSError as probe:
                        raise file_error_from_os_error(probe, path, operation="resolve") from exc
                    raise NotADirectoryFileError(
                        f"Cannot resolve {printable(path)}: a parent is not a directory", path=path
                    ) from exc
                except OSError as exc:
                    raise file_error_from_os_error(
                        exc, path, operation="create the parents of"
                    ) from exc
            try:
                fd = os.open(parent, _PARENT_FLAGS)
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    raise RuntimeFileNotFoundError(
                        f"Cannot resolve {printable(path)}: a parent directory does not exist",
                        path=path,
                    ) from exc
                if exc.errno == errno.ENOTDIR:
                    raise NotADirectoryFileError(
                        f"Cannot resolve {printable(path)}: a parent is not a directory", path=path
                    ) from exc
                if exc.errno == errno.ELOOP:
                    raise InvalidPathError(
                        f"Cannot resolve {printable(path)}: too many levels of symbolic links",
                        path=path,
                    ) from exc
                raise file_error_from_os_error(exc, path, operation="resolve") from exc
            try:
                target = self._link_target(fd, name, path) if follow_final and name else None
                if target is None:
                    yield Located(dir_fd=fd, name=name or ".", path=path)
                    return
            finally:
                os.close(fd)
            current = target if target.startswith("/") else f"{parent}/{target}"
        raise InvalidPathError(
            f"Cannot resolve {printable(path)}: too many levels of symbolic links", path=path
        )

    def _walk(
        self,
        stack: list[int],
        parts: list[str],
        path: str,
        follow_final: bool,
        create_parents: bool,
    ) -> tuple[str, os.stat_result | None]:
        pending = deque(parts)
        hops = 0

        def another_hop() -> None:
            nonlocal hops
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise InvalidPathError(
                    f"Cannot resolve {printable(path)}: too many levels of symbolic links",
                    path=path,
                )

        while pending:
            name = pending.popleft()
            if name == ".":
                continue
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop())
                elif self.confines:
                    raise self._escape(path)
                continue
            last = not pending
            if not last:
                try:
                    stack.append(os.open(name, _DIRECTORY_FLAGS, dir_fd=stack[-1]))
                    continue
                except OSError as exc:
                    link = exc.errno in (errno.ENOTDIR, errno.ELOOP)
                    target = self._link_target(stack[-1], name, path) if link else None
                    if target is None:
                        if not self._retry_component(exc, stack[-1], name, path, create_parents):
                            another_hop()  # changed meanwhile: a bounded number of retries
                        pending.appendleft(name)
                        continue
            else:
                final = self._final_entry(stack[-1], name, path)
                if final is None or not stat_module.S_ISLNK(final.st_mode):
                    return name, final
                if not follow_final:
                    if self.confines:
                        self._refuse_outside_link(path)
                    return name, final
                target = self._link_target(stack[-1], name, path)
                if target is None:  # no longer a link: look at it again
                    another_hop()
                    pending.appendleft(name)
                    continue
            another_hop()
            if target.startswith("/"):
                beneath = self._beneath(target)
                if beneath is None:
                    raise self._escape(path)
                while len(stack) > 1:
                    os.close(stack.pop())
                pending.extendleft(reversed(beneath))
            else:
                pending.extendleft(reversed(_split_target(target) or ["."]))
        return ".", None

    @staticmethod
    def _final_entry(dir_fd: int, name: str, path: str) -> os.stat_result | None:
        """The ``lstat`` of the final component, ``None`` when it is missing."""
        try:
            return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise file_error_from_os_error(exc, path, operation="resolve") from exc

    def _retry_component(
        self, exc: OSError, dir_fd: int, name: str, path: str, create: bool
    ) -> bool:
        """Decide after a failed open of the directory ``name``, which is walked again: true when
        it was just created, false when it changed meanwhile (the caller bounds those retries).
        Raises when the walk cannot go on."""
        if exc.errno == errno.ENOENT:
            if not create:
                raise RuntimeFileNotFoundError(
                    f"Cannot resolve {printable(path)}: a parent directory does not exist",
                    path=path,
                ) from exc
            try:
                os.mkdir(name, dir_fd=dir_fd)
            except FileExistsError:
                return False  # created meanwhile by someone else
            except OSError as mkdir_exc:
                raise file_error_from_os_error(
                    mkdir_exc, path, operation="create the parents of"
                ) from mkdir_exc
            return True
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            try:
                mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                return False  # removed meanwhile: walk it again
            if stat_module.S_ISLNK(mode) or stat_module.S_ISDIR(mode):
                return False  # swapped meanwhile: walk it again
            raise NotADirectoryFileError(
                f"Cannot resolve {printable(path)}: a parent is not a directory", path=path
            ) from exc
        raise file_error_from_os_error(exc, path, operation="resolve") from exc

    @staticmethod
    def _link_target(dir_fd: int, name: str, path: str) -> str | None:
        try:
            return os.readlink(name, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOENT):
                return None  # not a link, or missing (the caller's open says which)
            raise file_error_from_os_error(exc, path, operation="resolve") from exc

    def _refuse_outside_link(self, path: str) -> None:
        """A final link is acted on as itself, but one leading outside is refused all the same.

        Only an escape counts here: a dangling or looping link may still be replaced or removed.
        """
        with (
            contextlib.suppress(InvalidPathError, RuntimeFileNotFoundError, NotADirectoryFileError),
            self.locate(path, follow_final=True),
        ):
            pass

    def _beneath(self, target: str) -> list[str] | None:
        parts = _split_target(target)
        for root_parts in (self._root_parts, _split(os.path.realpath(self.root))):
            if parts[: len(root_parts)] == root_parts:
                return parts[len(root_parts) :]
        return None

    @staticmethod
    def _escape(path: str) -> WorkspaceEscapeError:
        return WorkspaceEscapeError(
            f"Path {path!r} leads outside the conversation workspace through a symbolic link"
        )


_Walk = Callable[[list[int], list[str], str, bool, bool], tuple[str, os.stat_result | None]]
""":meth:`ConfinedRoot._walk`: descriptor stack, components, path, follow_final, create_parents."""


class _ConfinedWalk:
    """The context of one confined walk: the descriptors it opened are closed on exit."""

    __slots__ = ("_args", "_root", "_stack", "_walk")

    def __init__(
        self,
        root: str,
        walk: _Walk,
        parts: list[str],
        path: str,
        *,
        follow_final: bool,
        create_parents: bool,
    ) -> None:
        self._root = root
        self._walk = walk  # the confined root's walk below the opened root
        self._args = (parts, path, follow_final, create_parents)
        self._stack: list[int] = []

    def __enter__(self) -> Located:
        parts, path, follow_final, create_parents = self._args
        try:
            root_fd = os.open(self._root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise file_error_from_os_error(exc, path, operation="open") from exc
        stack = self._stack
        stack.append(root_fd)
        try:
            name, final = self._walk(stack, parts, path, follow_final, create_parents)
        except BaseException:
            self._close()
            raise
        return Located(dir_fd=stack[-1], name=name, path=path, final=final)

    def __exit__(self, *_: object) -> None:
        self._close()

    def _close(self) -> None:
        stack = self._stack
        while stack:
            os.close(stack.pop())


def open_directory_below(dir_fd: int, parts: list[str]) -> int:
    """Open the directory ``parts`` below ``dir_fd`` without following any symbolic link."""
    fd = os.dup(dir_fd)
    try:
        for part in parts:
            child = os.open(part, _DIRECTORY_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd
