"""Skills for the SDK's ``Skills`` capability, staged through skillruntime's ``prepare``.

:class:`PreparedSkillSource` is a ``LazySkillSource``: the capability lists the configured skills
in the agent's instructions and gives the model a ``load_skill`` tool; loading a skill prepares it
in the session's runtime (content-addressed copy under the conversation's ``skills/``, bootstrap
commands run once, an unchanged skill never sent twice), so skills work in a remote sandbox
exactly as on the host. :func:`skills_capability` builds the capability, a
:class:`PreparedSkills`: its ``load_skill`` tool answers every failure the model can cause (a name
that is not configured, a bootstrap command that fails, malformed arguments) with a tool result
``{"status": "error", ...}`` instead of ending the run.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agents import FunctionTool, RunContextWrapper, Tool
from agents.sandbox.capabilities.skills import LazySkillSource, SkillMetadata, Skills
from agents.sandbox.errors import SandboxError, SkillsConfigError
from agents.sandbox.session.base_sandbox_session import BaseSandboxSession
from agents.sandbox.types import User
from agents.sandbox.workspace_paths import SandboxPathGrant
from pydantic import PrivateAttr

from skillruntime.core.errors import SkillRuntimeError
from skillruntime.core.models import Skill, SkillPreparationRequest, SkillRuntimeConfig
from skillruntime.core.skills import discover_skills, load_skill

from .sandbox import _inner

__all__ = ["PreparedSkillSource", "PreparedSkills", "load_skills", "skills_capability"]

logger = logging.getLogger(__name__)


def load_skills(items: Iterable[Skill | str | os.PathLike[str]]) -> list[Skill]:
    """Skills from :class:`Skill` objects and host directories (one skill, or a root of skills)."""
    skills: list[Skill] = []
    for item in items:
        if isinstance(item, Skill):
            skills.append(item)
            continue
        path = Path(item)
        if (path / "SKILL.md").is_file():
            skill = load_skill(path)
            if skill is None:
                raise ValueError(f"The skill at {path} could not be loaded (see the warnings)")
            skills.append(skill)
        elif path.is_dir():
            skills.extend(discover_skills(path))
        else:
            raise ValueError(f"Skill directory does not exist: {path}")
    return skills


class PreparedSkillSource(LazySkillSource):
    """Configured skills, prepared into the session's runtime when the model loads one.

    ``configs`` maps skill names to their runtime config; the bootstrap commands a skill's
    frontmatter declares (``metadata.skillruntime.bootstrap``) run when it is prepared, before
    the config's own (the rule of :func:`~skillruntime.core.skills.resolve_skill_config`).
    """

    # Private: the SDK clones capabilities attribute by attribute, which frozen models refuse.
    _skills: tuple[Skill, ...] = PrivateAttr(default=())
    _configs: dict[str, SkillRuntimeConfig] = PrivateAttr(default_factory=dict)

    def __init__(
        self,
        skills: Iterable[Skill] = (),
        configs: Mapping[str, SkillRuntimeConfig] | None = None,
    ) -> None:
        super().__init__()
        items = tuple(skills)
        names = [skill.name for skill in items]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"Two configured skills are named {duplicates[0]!r}")
        given = dict(configs or {})
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ValueError(f"configs reference unknown skills: {', '.join(unknown)}")
        self._skills = items
        self._configs = given

    @property
    def skills(self) -> tuple[Skill, ...]:
        """The configured skills, in order."""
        return self._skills

    def list_skill_metadata(
        self,
        *,
        skills_path: str,
        source_grants: tuple[SandboxPathGrant, ...] = (),
    ) -> list[SkillMetadata]:
        return [
            SkillMetadata(
                name=skill.name,
                description=skill.description or "No description provided.",
                path=Path(skills_path) / skill.name,
            )
            for skill in self.skills
        ]

    async def load_skill(
        self,
        *,
        skill_name: str,
        session: BaseSandboxSession,
        skills_path: str,
        user: str | User | None = None,
    ) -> dict[str, str]:
        """Prepare ``skill_name`` in the session's runtime; ``path`` is its prepared root,
        relative to the workspace when it lies inside it.

        A name that is not configured raises ``SkillsConfigError`` naming the configured skills;
        a failed preparation (a bootstrap command, the transport) raises the runtime's
        :class:`~skillruntime.core.errors.SkillRuntimeError`. :class:`PreparedSkills` turns both
        into tool results."""
        skill = next((item for item in self.skills if item.name == skill_name), None)
        if skill is None:
            available = ", ".join(item.name for item in self.skills) or "none"
            raise SkillsConfigError(
                message=f"Skill not found: {skill_name}. Available skills: {available}",
                context={"skill_name": skill_name, "skills_path": skills_path},
            )
        inner = _inner(session)
        config = self._configs.get(skill.name)
        request = SkillPreparationRequest(
            skills=(skill,), configs={skill.name: config} if config is not None else {}
        )
        (prepared,) = await inner.runtime.prepare(request)
        root = inner.state.manifest.root
        path = prepared.base_path
        if path == root or path.startswith(root.rstrip("/") + "/"):
            path = posixpath.relpath(path, root)
        return {"status": "loaded", "skill_name": skill.name, "path": path}


def _skill_name(arguments: str) -> str:
    """The ``skill_name`` of a ``load_skill`` call; ``ValueError`` when the arguments lack it."""
    try:
        parsed: Any = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"the arguments are not JSON ({exc.msg})") from None
    name = parsed.get("skill_name") if isinstance(parsed, dict) else None
    if not isinstance(name, str) or not name:
        raise ValueError('the arguments must be an object with a string "skill_name"')
    return name


def _failure_text(skill_name: str, session: BaseSandboxSession | None, exc: Exception) -> str:
    if isinstance(exc, SkillRuntimeError) and session is not None:
        # Only a skillruntime session's prepare raises these, so the session is one of ours.
        runtime = _inner(session).runtime.name
        return f"Error: preparing skill '{skill_name}' in the {runtime} runtime failed: {exc}"
    if isinstance(exc, SandboxError):
        return f"Error: {exc.message}"
    return f"Error: loading skill '{skill_name}' failed: {type(exc).__name__}: {exc}"


class PreparedSkills(Skills):
    """The SDK ``Skills`` capability whose ``load_skill`` tool never ends the run.

    The tool keeps the SDK's name, description and schema. Every failure of a call becomes its
    result, ``{"status": "error", "skill_name": ..., "error": "Error: ..."}``, which the model
    can act on: a skill that is not configured (the error lists the configured ones), a
    preparation that fails (a bootstrap command's exit code and output tail, a transport
    error), malformed arguments. The SDK's own ``Skills`` lets these escape ``Runner.run``.
    """

    def tools(self) -> list[Tool]:
        sdk_tools = super().tools()
        if not sdk_tools:
            return sdk_tools
        (sdk_tool,) = sdk_tools
        assert isinstance(sdk_tool, FunctionTool)

        async def invoke(_context: RunContextWrapper[Any], arguments: str) -> dict[str, str]:
            try:
                skill_name = _skill_name(arguments)
            except ValueError as exc:
                return {"status": "error", "skill_name": "", "error": f"Error: {exc}"}
            try:
                return await self.load_skill(skill_name)
            except Exception as exc:
                logger.warning("load_skill %s failed: %s", skill_name, type(exc).__name__)
                error = _failure_text(skill_name, self.session, exc)
                return {"status": "error", "skill_name": skill_name, "error": error}

        return [
            FunctionTool(
                name=sdk_tool.name,
                description=sdk_tool.description,
                params_json_schema=sdk_tool.params_json_schema,
                on_invoke_tool=invoke,
                strict_json_schema=sdk_tool.strict_json_schema,
            )
        ]


def skills_capability(
    skills: Iterable[Skill | str | os.PathLike[str]],
    *,
    configs: Mapping[str, SkillRuntimeConfig] | None = None,
    skills_path: str = "skills",
) -> PreparedSkills:
    """The ``Skills`` capability over :class:`PreparedSkillSource` (lazy: ``load_skill``), as a
    :class:`PreparedSkills` whose failures are tool results."""
    source = PreparedSkillSource(load_skills(skills), configs)
    return PreparedSkills(lazy_from=source, skills_path=skills_path)
