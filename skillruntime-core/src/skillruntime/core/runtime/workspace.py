"""Conversation workspaces: id and root rules, and the path scoping of the scoped file systems.

A conversation's workspace is ``<conversations_root>/<conversation_id>``; relative paths resolve
under it and a path that leaves it is rejected *before any backend call*. This is a path boundary
for the framework's own file API and working directory, not a security sandbox: a command run in
the workspace can still reach anything its user can.

The wrappers themselves, ``ScopedFileSystem`` and ``AsyncScopedFileSystem``, live in
:mod:`.scoped` and :mod:`.async_scoped` (``ScopedFileSystem`` is still served here, with a
:class:`DeprecationWarning`).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._moved import moved_names
from ..errors import InvalidPathError, RuntimeClosedError, WorkspaceEscapeError

if TYPE_CHECKING:
    pass

__all__ = [
    "CONVERSATION_ID_PATTERN",
    "ConversationWorkspace",
    "PathScope",
    "resolve_against",
    "validate_conversation_id",
    "validate_conversations_root",
    "validate_remote_root",
]

CONVERSATION_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""Valid conversation ids: 1–128 characters, ``[A-Za-z0-9][A-Za-z0-9._-]*``."""


def validate_conversation_id(conversation_id: str) -> str:
    """Return ``conversation_id`` if it is valid, else raise :class:`ValueError` saying why."""
    if not isinstance(conversation_id, str) or not CONVERSATION_ID_PATTERN.fullmatch(
        conversation_id
    ):
        raise ValueError(
            "conversation_id must be 1-128 characters of letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit (got {conversation_id!r})"
        )
    return conversation_id


def validate_conversations_root(root: str) -> str:
    """Return the normalised absolute POSIX ``root``; ``/`` and relative roots are refused."""
    if not isinstance(root, str) or not root.startswith("/"):
        raise ValueError(f"conversations_root must be an absolute path (got {root!r})")
    normalised = posixpath.normpath(root)
    if normalised.startswith("//"):
        normalised = "/" + normalised.lstrip("/")
    if normalised == "/":
        raise ValueError("conversations_root must not be '/'")
    if "\x00" in normalised:
        raise ValueError("conversations_root must not contain a NUL character")
    return normalised


def validate_remote_root(root: str) -> str:
    """:func:`validate_conversations_root` for a runtime's ``remote_root`` argument.

    Raises :class:`ValueError` naming ``remote_root`` when ``root`` is relative or ``/``.
    """
    try:
        return validate_conversations_root(root)
    except ValueError as exc:
        raise ValueError(f"remote_root must be an absolute path other than '/': {exc}") from exc


class ConversationWorkspace:
    """The directory of one conversation and the rules for paths inside it."""

    def __init__(self, conversations_root: str, conversation_id: str) -> None:
        self.conversations_root = validate_conversations_root(conversations_root)
        self.conversation_id = validate_conversation_id(conversation_id)
        self.directory = posixpath.join(self.conversations_root, self.conversation_id)
        self.skills_directory = posixpath.join(self.directory, "skills")

    def __repr__(self) -> str:
        return f"ConversationWorkspace({self.directory!r})"

    def contains(self, path: str) -> bool:
        """True when the normalised absolute ``path`` is the workspace or lies inside it."""
        return path == self.directory or path.startswith(self.directory + "/")

    def resolve(self, path: str) -> str:
        """Map ``path`` (relative to the workspace, or absolute) to a normalised absolute path.

        Raises :class:`WorkspaceEscapeError` when the result is outside the workspace.
        """
        if not isinstance(path, str) or not path.strip():
            raise ValueError("path must not be empty")
        if "\x00" in path:
            raise WorkspaceEscapeError("path must not contain a NUL character")
        joined = path if path.startswith("/") else posixpath.join(self.directory, path)
        normalised = posixpath.normpath(joined)
        if normalised.startswith("//"):
            normalised = "/" + normalised.lstrip("/")
        if not self.contains(normalised):
            raise WorkspaceEscapeError(
                f"Path {path!r} is outside the conversation workspace {self.directory}"
            )
        return normalised


def resolve_against(base_directory: str, path: str) -> str:
    """``path`` made absolute against ``base_directory`` (lexically, POSIX rules).

    An absolute ``path`` is only normalised; a relative one is joined to ``base_directory`` first.
    Used where a runtime has no conversation workspace, so that relative paths mean the same
    thing for its file system and its commands: relative to the default working directory.
    """
    if not isinstance(path, str) or not path.strip():
        raise ValueError("path must not be empty")
    if "\x00" in path:
        raise WorkspaceEscapeError("path must not contain a NUL character")
    normalised = posixpath.normpath(posixpath.join(base_directory, path))
    if normalised.startswith("//"):
        normalised = "/" + normalised.lstrip("/")
    return normalised


def local_real_path_checker(workspace: ConversationWorkspace) -> Callable[[str], str]:
    """A checker for host workspaces: resolves symlinks and refuses real paths outside.

    The workspace directory itself is resolved too, so a root reached through a symlink works.
    """

    def check(path: str) -> str:
        try:
            real_root = str(Path(workspace.directory).resolve())
            real = str(Path(path).resolve())
        except (RuntimeError, OSError) as exc:  # a symlink loop; RecursionError: too deep
            raise InvalidPathError(
                f"Path {path[:200]!r} cannot be resolved: {type(exc).__name__}", path=path
            ) from exc
        if real != real_root and not real.startswith(real_root.rstrip("/") + "/"):
            raise WorkspaceEscapeError(
                f"Path {path!r} leads outside the conversation workspace through a symbolic link"
            )
        return path

    return check


class PathScope:
    """The path rules of a scoped file system, shared by the sync and async wrappers.

    ``is_closed`` is consulted before every call (``RuntimeClosedError`` once it returns true);
    ``workspace`` (optional) scopes paths; without one, ``base_directory`` (optional, an absolute
    path: the runtime's default working directory) is where relative paths resolve, so the file
    system and commands agree on them. ``check_real_path`` (optional) is applied to the scoped
    path before delegation, e.g. to refuse symlinks that lead out of a host workspace.
    """

    def __init__(
        self,
        *,
        workspace: ConversationWorkspace | None = None,
        is_closed: Callable[[], bool] = lambda: False,
        check_real_path: Callable[[str], str] | None = None,
        runtime_name: str = "runtime",
        base_directory: str | None = None,
    ) -> None:
        if base_directory is not None and not base_directory.startswith("/"):
            raise ValueError(f"base_directory must be absolute (got {base_directory!r})")
        self._workspace = workspace
        self._base_directory = base_directory
        self._is_closed = is_closed
        self._check_real_path = check_real_path
        self._runtime_name = runtime_name

    def path(self, path: str) -> str:
        """The backend path of ``path``; raises before any backend call when it is refused."""
        if self._is_closed():
            raise RuntimeClosedError(f"The {self._runtime_name} runtime is closed")
        if self._workspace is not None:
            path = self._workspace.resolve(path)
        elif self._base_directory is not None:
            path = resolve_against(self._base_directory, path)
        if self._check_real_path is not None:
            path = self._check_real_path(path)
        return path

    def deletable(self, path: str) -> str:
        """Like :meth:`path`, and the workspace directory itself is refused."""
        resolved = self.path(path)
        if self._workspace is not None and resolved == self._workspace.directory:
            raise WorkspaceEscapeError("The conversation workspace itself cannot be deleted")
        return resolved


def scoped_audit_fields(
    audit: Mapping[str, Any] | None, runtime_name: str, workspace: ConversationWorkspace | None
) -> dict[str, Any]:
    """The audit fields of a scoped file system's events: ``audit`` when given, else the
    runtime name and the workspace's conversation id."""
    if audit is not None:
        return dict(audit)
    return {
        "runtime": runtime_name,
        "conversation_id": workspace.conversation_id if workspace is not None else None,
    }


__getattr__ = moved_names(__name__, {"ScopedFileSystem": "skillruntime.core.runtime.scoped"})
"""``ScopedFileSystem`` moved to :mod:`skillruntime.core.runtime.scoped`: served with a
:class:`DeprecationWarning`."""
