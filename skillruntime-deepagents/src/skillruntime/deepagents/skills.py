""":class:`RuntimeSkills`: skills for deepagents' skills middleware, prepared in the runtime.

deepagents' ``SkillsMiddleware`` reads skills through the backend from *source directories* laid
out as ``<source>/<skill-name>/SKILL.md``; it never copies a skill into a sandbox, so with a remote
sandbox the skill's scripts are not there (deepagents issue #1862). :class:`RuntimeSkills` closes
that gap with skillruntime's ``prepare``:

1. On first access to :attr:`SkillRuntimeBackend.skill_sources
   <skillruntime.deepagents.backend.SkillRuntimeBackend.skill_sources>` it writes, through the
   runtime's file system, one ``<source>/<name>/SKILL.md`` per skill holding the skill's
   frontmatter (so the middleware lists name and description) and a short body saying that reading
   the file activates the skill. Nothing is uploaded yet.
2. When the agent reads one of those files (deepagents' ``read_file`` tool, as its skills prompt
   tells it to), the backend prepares that skill in the runtime — once; the runtime's digest cache
   makes a repeat free and concurrent first reads upload once — and answers with the skill's real
   instructions, preceded by the prepared directory: ``This skill is prepared in the runtime at
   <base_path> …``. The stub is rewritten with that text, so later reads and downloads agree.
3. The agent then runs the skill's scripts from the prepared directory with ``execute``; they are
   really there, in the local workspace, the OpenSandbox container or the AIO sandbox.

The source directory is read-only through the backend (``write``, ``edit`` and ``upload_files``
refuse it with ``permission_denied``). Skills come from host directories, already loaded
:class:`~skillruntime.core.models.Skill` objects, or any skill source of skillruntime (an artifact
store or Viking lease resolved to a local directory first).
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

from deepagents.backends.protocol import ReadResult

from skillruntime.core.errors import SkillRuntimeError, SkillValidationError
from skillruntime.core.models import Skill, SkillPreparationRequest, SkillRuntimeConfig
from skillruntime.core.skills import load_skill

from .reading import LineWindow, error_code

if TYPE_CHECKING:
    from .backend import SkillRuntimeBackend

__all__ = ["DEFAULT_SOURCE_DIRECTORY", "RuntimeSkills", "activation_text"]

logger = logging.getLogger(__name__)

DEFAULT_SOURCE_DIRECTORY: Final = ".skills"
"""Source directory name, below the runtime's default working directory, when none is given."""

_STUB_BODY: Final = (
    "# {name}\n\n"
    "This skill is not prepared in the runtime yet. Read this file (read_file) to activate it:\n"
    "the answer is the skill's full instructions and the directory holding its files.\n"
)


def activation_text(skill: Skill, prepared: Skill) -> str:
    """The ``SKILL.md`` an agent reads once ``skill`` is prepared at ``prepared.base_path``."""
    base = prepared.base_path
    note = (
        f"This skill is prepared in the runtime at `{base}`. Its files (scripts/, references/, "
        f"assets/, …) are there: run its commands from that directory (for example "
        f"`cd {base} && …`) and read its files below it. Paths in the instructions are relative "
        f"to `{base}`.\n\n"
    )
    return _frontmatter(skill) + note + skill.body.lstrip("\n")


def _frontmatter(skill: Skill) -> str:
    # JSON is YAML: the middleware parses this with yaml.safe_load, whatever the values hold.
    fields = dict(skill.frontmatter)
    fields["name"] = skill.name
    fields["description"] = skill.description
    return "---\n" + json.dumps(fields, ensure_ascii=True, default=str) + "\n---\n"


def _usable_name(name: str) -> bool:
    return bool(name) and name not in {".", ".."} and "/" not in name and "\0" not in name


class RuntimeSkills:
    """The skills an agent may activate, prepared in the backend's runtime on first use.

    ``skills``: skill directories (or their ``SKILL.md``) on this host, or loaded
    :class:`~skillruntime.core.models.Skill` objects; a path that is not a usable skill raises
    :class:`~skillruntime.core.errors.SkillValidationError`. ``configs`` gives a skill's
    :class:`~skillruntime.core.models.SkillRuntimeConfig` (environment, bootstrap commands) by
    name; the bootstrap commands the skill declares (``metadata.skillruntime.bootstrap``) run
    when it is prepared, before the config's own (the rule of
    :func:`~skillruntime.core.skills.resolve_skill_config`). ``source_path``: the runtime
    directory that receives the ``<name>/SKILL.md`` entries (default: ``.skills`` below the
    runtime's default working directory). Two skills with one name: the last one wins, as in
    deepagents' layered sources.
    """

    def __init__(
        self,
        skills: Iterable[Skill | str | os.PathLike[str]],
        *,
        configs: Mapping[str, SkillRuntimeConfig] | None = None,
        source_path: str | None = None,
    ) -> None:
        loaded: dict[str, Skill] = {}
        for item in skills:
            skill = item if isinstance(item, Skill) else load_skill(item)
            if skill is None:
                raise SkillValidationError(f"Not a usable skill: {item}")
            if not _usable_name(skill.name):
                raise SkillValidationError(f"Skill name cannot be a directory name: {skill.name!r}")
            loaded[skill.name] = skill
        if source_path is not None and not source_path.startswith("/"):
            raise ValueError("source_path must be an absolute runtime path")
        self._skills = loaded
        self._configs = dict(configs or {})
        self._source_path = posixpath.normpath(source_path) if source_path else None
        self._lock = threading.Lock()
        self._skill_locks: dict[str, threading.Lock] = {name: threading.Lock() for name in loaded}
        self._installed: str | None = None
        self._prepared: dict[str, Skill] = {}

    @property
    def names(self) -> list[str]:
        """The skill names, in order."""
        return list(self._skills)

    @property
    def source_path(self) -> str | None:
        """The source directory in the runtime, once installed (or when given)."""
        return self._installed or self._source_path

    def prepared(self, name: str) -> Skill | None:
        """The prepared copy of skill ``name`` (its ``base_path`` is a runtime path), or ``None``
        while it was not activated."""
        return self._prepared.get(name)

    def install(self, backend: SkillRuntimeBackend) -> str:
        """Write the ``<source>/<name>/SKILL.md`` entries (once) and return the source path."""
        with self._lock:
            if self._installed is not None:
                return self._installed
            source = self._source_path or posixpath.join(
                backend.runtime.default_working_directory, DEFAULT_SOURCE_DIRECTORY
            )
            fs = backend.runtime.get_file_system()
            for name, skill in self._skills.items():
                stub = _frontmatter(skill) + _STUB_BODY.format(name=name)
                fs.write_text(posixpath.join(source, name, "SKILL.md"), stub)
            self._installed = source
            logger.info("offered %d skills to deepagents at %s", len(self._skills), source)
            return source

    def _stub_name(self, path: str) -> str | None:
        source = self.source_path
        if source is None or not isinstance(path, str) or not path.startswith("/"):
            return None
        normalised = posixpath.normpath(path)
        parent, leaf = posixpath.split(normalised)
        if leaf != "SKILL.md" or posixpath.dirname(parent) != source:
            return None
        name = posixpath.basename(parent)
        return name if name in self._skills else None

    def is_stub(self, path: str) -> bool:
        """True when ``path`` is the ``SKILL.md`` entry of one of these skills."""
        return self._stub_name(path) is not None

    def is_read_only(self, path: str) -> bool:
        """True for the source directory and everything below it."""
        source = self.source_path
        if source is None:
            return False
        normalised = posixpath.normpath(path)
        return normalised == source or normalised.startswith(source.rstrip("/") + "/")

    def prepare(self, backend: SkillRuntimeBackend, name: str) -> Skill:
        """Prepare skill ``name`` in the backend's runtime (once) and rewrite its entry with the
        activation text; the prepared skill."""
        skill = self._skills[name]
        with self._skill_locks[name]:
            prepared = self._prepared.get(name)
            if prepared is not None:
                return prepared
            config = self._configs.get(name)
            request = SkillPreparationRequest(
                skills=(skill,), configs={name: config} if config is not None else {}
            )
            prepared = backend.runtime.prepare(request)[0]
            source = self.install(backend)
            backend.runtime.get_file_system().write_text(
                posixpath.join(source, name, "SKILL.md"), activation_text(skill, prepared)
            )
            self._prepared[name] = prepared
            logger.info("activated skill %s at %s", name, prepared.base_path)
            return prepared

    def activate_on_read(
        self, backend: SkillRuntimeBackend, path: str, offset: int = 0, limit: int = 2000
    ) -> ReadResult | None:
        """The ``read`` answer for a skill's entry (preparing it first), or ``None`` when ``path``
        is not one. A failed preparation is reported as the read's error, never raised."""
        name = self._stub_name(path)
        if name is None:
            return None
        try:
            prepared = self.prepare(backend, name)
        except SkillRuntimeError as exc:
            logger.warning("activating skill %s failed: %s", name, type(exc).__name__)
            return ReadResult(
                error=f"File '{path}': skill {name} could not be prepared: {error_code(exc)}"
            )
        text = activation_text(self._skills[name], prepared).encode("utf-8")
        window = LineWindow(offset=offset, limit=limit, size=len(text))
        window.feed(text)
        window.finish()
        return window.result(path)
