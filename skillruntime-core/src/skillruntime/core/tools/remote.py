"""Remote-first skills in a turn (``docs/agent-turn.md``, "Remote first").

A source that also implements :class:`RemoteFirstSource` (e.g. an OpenViking source) is
activated in a :class:`~skillruntime.core.tools.turn.SkillTurn` from its ``SKILL.md`` and manifest
only: nothing of the package is downloaded and nothing is prepared in the runtime. The package is
materialized (``load`` → prepare → ``metadata.requires`` check → turn copy) on the first tool
call that needs a local file of it; a ``read`` of one of its files before that is served from the
server (``read_resource``). An instruction-only skill therefore never downloads its package or
touches the runtime. Outside a turn, sources are loaded in full as before.

**Revision pinning**: activation pins the revision the model read (the
source's :attr:`RemoteFirstSource.signature`, kept with the turn's skill). Materialization and
remote reads serve that revision only; when the server's skill has changed since, the call is
refused with ``SKILL_REVISION_CHANGED`` and the skill is dropped from the turn, so the next
``skill`` call reads its current instructions (and pins them) before anything of the new
revision runs. Materialization failures keep the source's code as the ``cause`` of
``SKILL_MATERIALIZATION_FAILED`` (:func:`materialization_error`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..models import Skill
from .files import MAX_LINE_LENGTH, MAX_READ_BYTES
from .resources import ResourceError
from .skill import failure_code

__all__ = [
    "SKILL_MATERIALIZATION_FAILED",
    "SKILL_REVISION_CHANGED",
    "RemoteFirstSource",
    "format_text_read",
    "materialization_error",
    "revision_changed",
]

SKILL_MATERIALIZATION_FAILED = "SKILL_MATERIALIZATION_FAILED"
"""A remote skill's package could not be made local (the source's code is the ``cause``)."""
SKILL_REVISION_CHANGED = "SKILL_REVISION_CHANGED"
"""The remote skill changed since it was activated in this turn; invoke it again."""


@runtime_checkable
class RemoteFirstSource(Protocol):
    """A skill source that can be activated before its package is downloaded."""

    def load_instructions(self) -> Skill:
        """The skill with only ``SKILL.md`` on the host; checks access and revision and pins
        the revision read (:attr:`signature`) until the turn ends. Called again, it reads the
        skill anew and pins the current revision."""
        ...

    @property
    def signature(self) -> str | None:
        """The fingerprint of the pinned revision (``None`` before :meth:`load_instructions`)."""
        ...

    @property
    def package_files(self) -> frozenset[str]:
        """The package's file paths (known once :meth:`load_instructions` ran)."""
        ...

    def load(self) -> Skill:
        """The whole package on the host, of the pinned revision only: an error whose ``code``
        is ``SKILL_REVISION_CHANGED`` when the server holds another one."""
        ...

    def read_resource(self, path: str) -> bytes:
        """One verified file of the package, read remotely; of the pinned revision only (an
        error with ``code`` ``SKILL_REVISION_CHANGED`` otherwise)."""
        ...


def materialization_error(name: str, content: str, cause: BaseException | None) -> ResourceError:
    """The refusal of a tool call whose remote skill ``name`` could not be materialized:
    ``content`` is the activation's ``Error: …`` text and ``cause`` the source's (or
    runtime's) exception. A changed revision is refused as ``SKILL_REVISION_CHANGED``; anything
    else as ``SKILL_MATERIALIZATION_FAILED`` with the cause's stable code as ``cause``."""
    code = failure_code(cause)
    message = content.removeprefix("Error: ")
    if code is not None:
        message = message.removeprefix(f"{code}: ")
    if code == SKILL_REVISION_CHANGED:
        return revision_changed(name, message)
    return ResourceError(SKILL_MATERIALIZATION_FAILED, message, cause=code)


def revision_changed(name: str, detail: object) -> ResourceError:
    """The ``SKILL_REVISION_CHANGED`` refusal of a call that needed remote skill ``name``
    after its revision changed; ``detail`` (a message or the source's error) says how."""
    message = str(detail).removeprefix(f"[{SKILL_REVISION_CHANGED}] ")
    return ResourceError(
        SKILL_REVISION_CHANGED,
        f"skill {name!r} changed on the server since it was activated in this turn "
        f"({message}); invoke the skill again to read its current instructions",
    )


def format_text_read(location: str, data: bytes, offset: int | None, limit: int | None) -> str:
    """A ``read`` result for remote text: numbered lines from ``offset`` (1-based), at most
    ``limit`` (default 2000) lines, each cut to :data:`~.files.MAX_LINE_LENGTH` characters;
    files over :data:`~.files.MAX_READ_BYTES` are refused like the ``read`` tool refuses them."""
    if len(data) > MAX_READ_BYTES:
        return (
            f"Error: File is larger than {MAX_READ_BYTES // (1024 * 1024)} MiB: {location}. "
            "Read a smaller part with bash instead."
        )
    lines = data.decode("utf-8", errors="replace").splitlines()
    start = max((offset or 1) - 1, 0)
    shown = lines[start : start + (limit or 2000)]
    header = f"File: {location}\n"
    if not lines:
        return header + "(empty file)\n"
    if start >= len(lines):
        return header + f"(the file has {len(lines)} lines; offset {offset} is past its end)\n"
    body = "".join(f"{start + index + 1:6d}\t{_cut(line)}\n" for index, line in enumerate(shown))
    return header + f"Showing lines {start + 1}-{start + len(shown)} of {len(lines)}\n\n" + body


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE_LENGTH else line[:MAX_LINE_LENGTH] + "... (line truncated)"
