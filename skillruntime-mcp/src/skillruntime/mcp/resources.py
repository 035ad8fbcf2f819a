"""The ``skill://`` resources: each configured skill's ``SKILL.md`` and its prepared files.

URI scheme: ``skill://<skill name>/<path inside the skill>``, the path percent-encoded per
segment (``skill://text-stats/SKILL.md``, ``skill://text-stats/scripts/run.sh``). ``SKILL.md``
of every configured skill is always listed (read from the host copy until the skill is
prepared, then from the runtime). Once the ``skill`` tool has prepared a skill, every regular
file of its runtime copy is listed too and read through the runtime's file system, so the
client sees exactly what the commands see.
"""

from __future__ import annotations

import asyncio
import base64
import mimetypes
import posixpath
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from mcp import types

from .conversations import ServeConfig, ServedConversation

__all__ = [
    "MAX_LISTED_FILES",
    "MAX_RESOURCE_BYTES",
    "SCHEME",
    "ResourceUriError",
    "list_skill_resources",
    "parse_skill_uri",
    "read_skill_resource",
    "skill_uri",
]

SCHEME = "skill"
SKILL_FILE = "SKILL.md"
MAX_LISTED_FILES = 1000
"""Files listed per prepared skill."""
MAX_RESOURCE_BYTES = 4 * 1024 * 1024
"""Largest resource read (bytes); a larger file is refused."""


class ResourceUriError(ValueError):
    """A resource URI that is not a well-formed ``skill://`` URI inside one skill."""


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


async def list_skill_resources(conversation: ServedConversation) -> list[types.Resource]:
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
        prepared = tools.prepared_skill(name)
        if prepared is None:
            continue
        files = await (await conversation.runtime.get_file_system()).list_files(
            prepared.base_path, limit=MAX_LISTED_FILES
        )
        for info in files:
            relative = posixpath.relpath(info.path, prepared.base_path)
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
    prepared = conversation.tools.prepared_skill(name)
    if prepared is None:
        host = config.skill(name)
        if relative != SKILL_FILE or host is None:
            raise LookupError(
                f"skill {name!r} is not prepared yet: only {SKILL_FILE} can be read until the "
                "skill tool has loaded it"
            )
        data = await asyncio.to_thread(_read_host_file, Path(host.base_path) / SKILL_FILE, uri)
        return _contents(uri, relative, data)
    files = await conversation.runtime.get_file_system()
    data = await files.read_bytes(posixpath.join(prepared.base_path, relative), MAX_RESOURCE_BYTES)
    return _contents(uri, relative, data)
