"""Skills for the SDK's ``Skills`` capability, staged through skillruntime's ``prepare``.

:class:`PreparedSkillSource` is a ``LazySkillSource``: the capability lists the configured skills
in the agent's instructions and gives the model a ``load_skill`` tool; loading a skill prepares it
in the session's runtime (content-addressed copy under the conversation's ``skills/``, bootstrap
commands run once, an unchanged skill never sent twice), so skills work in a remote sandbox
exactly as on the host. :func:`skills_capability` builds the capability.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping
from pathlib import Path

from agents.sandbox.capabilities.skills import LazySkillSource, SkillMetadata, Skills
from agents.sandbox.errors import SkillsConfigError
from agents.sandbox.session.base_sandbox_session import BaseSandboxSession
from agents.sandbox.types import User
from agents.sandbox.workspace_paths import SandboxPathGrant
from pydantic import PrivateAttr

from skillruntime.core.models import Skill, SkillPreparationRequest, SkillRuntimeConfig
from skillruntime.core.skills import discover_skills, load_skill

from .sandbox import _inner

__all__ = ["PreparedSkillSource", "load_skills", "skills_capability"]


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
        relative to the workspace when it lies inside it."""
        skill = next((item for item in self.skills if item.name == skill_name), None)
        if skill is None:
            raise SkillsConfigError(
                message="skill not found",
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


def skills_capability(
    skills: Iterable[Skill | str | os.PathLike[str]],
    *,
    configs: Mapping[str, SkillRuntimeConfig] | None = None,
    skills_path: str = "skills",
) -> Skills:
    """The SDK ``Skills`` capability over :class:`PreparedSkillSource` (lazy: ``load_skill``)."""
    source = PreparedSkillSource(load_skills(skills), configs)
    return Skills(lazy_from=source, skills_path=skills_path)
