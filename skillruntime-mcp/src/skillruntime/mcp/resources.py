"""The ``skill://`` resources: each configured skill's ``SKILL.md`` and its prepared files.

URI scheme: ``skill://<skill name>/<path inside the skill>``, the path percent-encoded per
segment (``skill://text-stats/SKILL.md``, ``skill://text-stats/scripts/run.sh``). ``SKILL.md``
of every configured skill is always listed (read from the host copy until the skill is
prepared, then from the runtime). Once the ``skill`` tool has prepared a skill, every regular
file of its runtime copy is listed too and read through the runtime's file system, so the
client sees exactly what the commands see. A server resuming a conversation (a later process
on the same conversation id) finds the copies an earlier process prepared: a complete copy
(marked ready) in the conversation workspace's skills directory counts as prepared, so its
files are resources before the ``skill`` tool runs again in this process.
"""

from __future__ import annotations

import asyncio
import base64
import mimetypes
import posixpath
import re
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from mcp import types

from skillruntime.core.errors import SkillRuntimeError
from skillruntime.core.runtime.rules import scan_skill
from skillruntime.core.runtime.spi import ready_marker_path
from skillruntime.core.skills.files import prepared_directory_name
from skillruntime.core.skills.policy import DEFAULT_UPLOAD_POLICY

from .conversations import ServeConfig, ServedConversation
from .errors import ResourceUriError

__all__ = [
    "MAX_LISTED_FILES",
    "MAX_RESOURCE_BYTES",
    "SCHEME",
    "ResourceUriError",
    "list_skill_resources",
    "parse_skill_uri",
    "prepared_skill_directory",
    "read_skill_resource",
    "skill_uri",
]

SCHEME = "skill"
SKILL_FILE = "SKILL.md"
MAX_LISTED_FILES = 1000
"""Files listed per prepared skill."""
MAX_RESOURCE_BYTES = 4 * 1024 * 1024
"""Largest resource read (bytes); a larger file is refused."""


def skill_uri(name: str, relative: str) -> str:
    """The URI of file ``relative`` (a POSIX path inside the skill) of skill ``name``."""
    return f"{SCHEME}://{quote(name, safe='')}/{quote(relative, safe='/')}"


def parse_skill_uri(uri: str) -> tuple[str, str]:
    """``(skill name, relative path)`` of a ``skill://`` URI.

    The relative path is normalised and guaranteed to stay inside the skill: empty, ``.`` and
    ``..`` segments, backslashes, NUL characters, a query and a fragment are all refused with
    :class:`ResourceUriError`.
    """
    parts = urlsplit(uri)
    if parts.scheme != SCHEME or not parts.netloc:
        raise ResourceUriError(f"not a {SCHEME}:// resource URI: {uri!r}")
    if parts.query or parts.fragment:
        raise ResourceUriError(f"a {SCHEME}:// URI takes no query or fragment: {uri!r}")
    name = unquote(parts.netloc)
    segments = [unquote(segment) for segment in parts.path.split("/")[1:]]
    if not segments or any(
        segment in ("", ".", "..") or "/" in segment or "\\" in segment or "\x00" in segment
        for segment in segments
    ):
        raise ResourceUriError(f"{uri!r} does not name a file inside skill {name!r}")
    return name, "/".join(segments)


def _mime_type(relative: str) -> str:
    if relative.endswith(".md"):
        return "text/markdown"
    guessed, _ = mimetypes.guess_type(relative)
    return guessed or "application/octet-stream"


async def prepared_skill_directory(
    config: ServeConfig, conversation: ServedConversation, name: str
) -> str | None:
    """Runtime directory of skill ``name``'s prepared copy, or ``None`` when there is none.

    The copy the ``skill`` tool prepared in this process; else a complete copy an earlier
    process of the same conversation left in the workspace's skills directory (the one of the
    host skill's current content when several are there, else the only one).
    """
    prepared = conversation.tools.prepared_skill(name)
    if prepared is not None:
        return prepared.base_path
    workspace = conversation.workspace
    host = config.skill(name)
    if workspace is None or host is None:
        return None
    files = await conversation.runtime.get_file_system()
    try:
        entries = await files.list_directory(workspace.skills_directory)
    except (SkillRuntimeError, OSError):
        return None  # nothing prepared in this conversation yet
    marker = re.compile(re.escape(f".{prepared_directory_name(name, '')}") + r"[0-9a-f]{12}\.ready")
    ready = sorted(
        posixpath.basename(entry.path)[1 : -len(".ready")]
        for entry in entries
        if marker.fullmatch(posixpath.basename(entry.path))
    )
    if not ready:
        return None
    if len(ready) > 1:
        digest = (await asyncio.to_thread(scan_skill, host, DEFAULT_UPLOAD_POLICY)).digest
        current = prepared_directory_name(name, digest)
        if current not in ready:
            return None
        ready = [current]
    directory = posixpath.join(workspace.skills_directory, ready[0])
    if not await files.exists(ready_marker_path(directory)) or not await files.exists(directory):
        return None
    return directory


async def list_skill_resources(
    config: ServeConfig, conversation: ServedConversation
) -> list[types.Resource]:
    """The resources of ``conversation``: every ``SKILL.md``, and the prepared skills' files."""
    tools = conversation.tools
    resources: list[types.Resource] = []
    for name in tools.skill_names:
        resources.append(
            types.Resource(
                uri=skill_uri(name, SKILL_FILE),
                name=f"{name}/{SKILL_FILE}",
                description=f"Instructions of the {name} skill",
                mime_type="text/markdown",
            )
        )
        base = await prepared_skill_directory(config, conversation, name)
        if base is None:
            continue
        files = await (await conversation.runtime.get_file_system()).list_files(
            base, limit=MAX_LISTED_FILES
        )
        for info in files:
            relative = posixpath.relpath(info.path, base)
            if relative == SKILL_FILE or relative.startswith("../"):
                continue
            resources.append(
                types.Resource(
                    uri=skill_uri(name, relative),
                    name=f"{name}/{relative}",
                    mime_type=_mime_type(relative),
                    size=info.size,
                )
            )
    return resources


def _contents(
    uri: str, relative: str, data: bytes
) -> types.TextResourceContents | types.BlobResourceContents:
    mime_type = _mime_type(relative)
    try:
        return types.TextResourceContents(uri=uri, mime_type=mime_type, text=data.decode("utf-8"))
    except UnicodeDecodeError:
        return types.BlobResourceContents(
            uri=uri, mime_type=mime_type, blob=base64.b64encode(data).decode("ascii")
        )


def _read_host_file(path: Path, uri: str) -> bytes:
    if path.stat().st_size > MAX_RESOURCE_BYTES:
        raise LookupError(f"{uri} is larger than {MAX_RESOURCE_BYTES} bytes")
    return path.read_bytes()


async def read_skill_resource(
    config: ServeConfig, conversation: ServedConversation, uri: str
) -> types.TextResourceContents | types.BlobResourceContents:
    """The contents of ``uri``; raises :class:`ResourceUriError`, :class:`LookupError` or a
    :class:`~skillruntime.core.errors.SkillRuntimeError` file error when it cannot be read."""
    name, relative = parse_skill_uri(uri)
    if name not in conversation.tools.skill_names:
        raise LookupError(f"no configured skill is named {name!r}")
    base = await prepared_skill_directory(config, conversation, name)
    if base is None:
        host = config.skill(name)
        if relative != SKILL_FILE or host is None:
            raise LookupError(
                f"skill {name!r} is not prepared yet: only {SKILL_FILE} can be read until the "
                "skill tool has loaded it"
            )
        data = await asyncio.to_thread(_read_host_file, Path(host.base_path) / SKILL_FILE, uri)
        return _contents(uri, relative, data)
    files = await conversation.runtime.get_file_system()
    data = await files.read_bytes(posixpath.join(base, relative), MAX_RESOURCE_BYTES)
    return _contents(uri, relative, data)
