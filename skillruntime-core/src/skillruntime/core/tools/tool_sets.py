"""What :class:`~skillruntime.core.tools.toolset.SkillTools` and
:class:`~skillruntime.core.tools.async_toolset.AsyncSkillTools` share: checking the configured
skills, and the read-only view of a tool set (configured and active skills, the tools the active
policies allow, SDK tool definitions, closing the sources).

The two sets differ only in how a tool runs (a sync handler, or an awaited one) and in their
activators; both activators answer the :class:`Activations` questions this view asks.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from ..files.publishing import FilePublisher
from ..models import Skill, SkillPreparationRequest, SkillRuntimeConfig
from ..skills import discover_skills, load_skill
from .adapters import to_anthropic_tools, to_openai_responses_tools, to_openai_tools
from .base import SkillTool
from .policy import SkillPolicy, effective_allowed_tools, refusal_reason
from .sdk_shapes import AnthropicTool, OpenAIChatTool, OpenAIResponsesTool
from .skill import SKILLS_PLACEHOLDER, LoadedSkillSource, SkillSource, skills_xml

__all__ = [
    "Activations",
    "SkillInput",
    "ToolSetView",
    "checked_configs",
    "checked_template",
    "configured_sources",
]

logger = logging.getLogger(__name__)

SkillInput = Skill | SkillSource | str | os.PathLike[str]
"""A configured skill: a loaded :class:`Skill`, a :class:`SkillSource`, or a host directory —
either one skill (it holds ``SKILL.md``) or a root whose skill subdirectories are all used."""

ToolT = TypeVar("ToolT", bound=SkillTool)


class Activations(Protocol):
    """What a tool set's activator tells its view."""

    @property
    def names(self) -> list[str]:
        """Configured skill names, in configured order."""

    def active_policies(self) -> list[SkillPolicy]:
        """The policies of the active skills."""

    def active_names(self) -> list[str]:
        """Active skill names, in activation order."""

    def prepared(self, name: str) -> Skill | None:
        """The runtime copy of skill ``name`` once prepared."""

    def reset(self) -> None:
        """Forget the activations; prepared copies are kept."""


def sources_from(item: SkillInput) -> list[SkillSource]:
    """The skill sources one configured ``item`` stands for (a root gives all its skills)."""
    if isinstance(item, Skill):
        return [LoadedSkillSource(item)]
    if isinstance(item, str | os.PathLike):
        path = Path(item)
        if (path / "SKILL.md").is_file():
            skill = load_skill(path)
            if skill is None:
                raise ValueError(f"The skill at {path} could not be loaded (see the warnings)")
            return [LoadedSkillSource(skill)]
        if not path.is_dir():
            raise ValueError(f"Skill directory does not exist: {path}")
        return [LoadedSkillSource(skill) for skill in discover_skills(path)]
    if isinstance(item, SkillSource):
        return [item]
    raise TypeError(f"Unsupported skill input: {type(item).__name__}")


def configured_sources(skills: Iterable[SkillInput]) -> dict[str, SkillSource]:
    """The configured skills by name. Raises :class:`ValueError` for an empty or repeated name
    and for a loaded skill whose ``allowed-tools`` policy does not parse."""
    sources: dict[str, SkillSource] = {}
    for item in skills:
        for source in sources_from(item):
            name = source.name.strip()
            if not name:
                raise ValueError("A skill source has an empty name")
            if name in sources:
                raise ValueError(f"Two configured skills are named '{name}'")
            if isinstance(source, LoadedSkillSource):
                SkillPolicy.from_skill(source.skill)
            sources[name] = source
    return sources


def checked_configs(
    configs: Mapping[str, SkillRuntimeConfig] | None, sources: Mapping[str, SkillSource]
) -> dict[str, SkillRuntimeConfig]:
    """``configs`` as a dict, once every name is a configured skill and every config is valid
    in a preparation request (:class:`ValueError` otherwise)."""
    checked = dict(configs or {})
    unknown = sorted(name for name in checked if name not in sources)
    if unknown:
        raise ValueError(f"configs reference unknown skills: {', '.join(unknown)}")
    for name, config in checked.items():
        SkillPreparationRequest(skills=(Skill(name=name, base_path="."),), configs={name: config})
    return checked


def checked_template(description_template: str) -> str:
    """``description_template`` once it holds the skills placeholder exactly once."""
    if description_template.count(SKILLS_PLACEHOLDER) != 1:
        raise ValueError(f"description_template must contain {SKILLS_PLACEHOLDER} exactly once")
    return description_template


class ToolSetView(Generic[ToolT]):
    """The members both tool sets expose over their tools and their activator.

    Subclasses set ``_tools`` (every tool by name, in listing order), ``_always_allowed`` and
    ``_sources``, and answer :meth:`_activations`.
    """

    _tools: dict[str, ToolT]
    _always_allowed: frozenset[str]
    _sources: dict[str, SkillSource]
    _configs: dict[str, SkillRuntimeConfig]
    _listing: tuple[str, int | None]
    exclusive: bool
    publisher: FilePublisher | None

    def _configure(
        self,
        kind: str,
        runtime: object,
        skills: Iterable[SkillInput],
        *,
        configs: Mapping[str, SkillRuntimeConfig] | None,
        publisher: FilePublisher | None,
        description_template: str,
        always_allowed: Collection[str],
        listing_budget: int | None,
        exclusive: bool,
    ) -> str:
        """Check and keep what both tool sets are built from (``kind``: the class, for the
        error); returns the ``skill`` tool's description. Raises :class:`ValueError` for
        ``exclusive`` without an exclusive runtime, a template without its placeholder, and
        unknown or invalid configs."""
        if exclusive and not getattr(runtime, "exclusive", False):
            raise ValueError(
                f"{kind}(exclusive=True) needs a runtime built with exclusive=True "
                "(a conversation with a conversation store)"
            )
        checked_template(description_template)
        self.exclusive = exclusive
        self.publisher = publisher
        self._sources = configured_sources(skills)
        self._configs = checked_configs(configs, self._sources)
        self._always_allowed = frozenset(always_allowed)
        self._listing = (description_template, listing_budget)
        return description_template.replace(
            SKILLS_PLACEHOLDER, skills_xml(list(self._sources.values()), listing_budget)
        )

    def _activations(self) -> Activations:
        raise NotImplementedError

    def _guard(self, tool: str, arguments: Mapping[str, Any]) -> str | None:
        return refusal_reason(
            tool, arguments, self._activations().active_policies(), self._always_allowed
        )

    @property
    def always_allowed(self) -> frozenset[str]:
        """Tool names every policy lets through (by default just ``skill``)."""
        return self._always_allowed

    @property
    def skill_names(self) -> list[str]:
        """Configured skill names, in configured order."""
        return self._activations().names

    @property
    def active_skills(self) -> list[str]:
        """Names of the skills activated so far, in activation order."""
        return self._activations().active_names()

    def prepared_skill(self, name: str) -> Skill | None:
        """The runtime copy of skill ``name`` once the ``skill`` tool prepared it."""
        return self._activations().prepared(name)

    def reset_activations(self) -> None:
        """Forget activated skills (e.g. at the start of a new task); prepared copies are kept."""
        self._activations().reset()

    @property
    def all_tools(self) -> list[ToolT]:
        """Every tool of this set, whatever the active skills allow."""
        return list(self._tools.values())

    @property
    def tools(self) -> list[ToolT]:
        """The tools the active skills allow now; rebuild tool definitions from this each turn."""
        allowed = effective_allowed_tools(
            list(self._tools), self._activations().active_policies(), self._always_allowed
        )
        return [self._tools[name] for name in allowed]

    def get(self, name: str) -> ToolT | None:
        """The tool called ``name`` (allowed or not), or ``None``."""
        return self._tools.get(name)

    def _unknown_tool(self, name: str) -> str:
        return f"Error: Unknown tool: {name}. Available tools: " + ", ".join(
            item.name for item in self.tools
        )

    def openai_tools(self, *, strict: bool = False) -> list[OpenAIChatTool]:
        """Tool definitions for OpenAI Chat Completions ``tools=`` (``strict`` as in
        :func:`~skillruntime.core.tools.adapters.to_openai_tools`)."""
        return to_openai_tools(self.tools, strict=strict)

    def openai_responses_tools(self, *, strict: bool = False) -> list[OpenAIResponsesTool]:
        """Tool definitions for the OpenAI Responses API ``tools=``."""
        return to_openai_responses_tools(self.tools, strict=strict)

    def anthropic_tools(self) -> list[AnthropicTool]:
        """Tool definitions for the Anthropic Messages API ``tools=``."""
        return to_anthropic_tools(self.tools)

    def _close_sources(self, failure: BaseException | None = None) -> None:
        """Close every closable source, even when one fails; then raise ``failure`` or the
        first failure."""
        for source in self._sources.values():
            closer = getattr(source, "close", None)
            if callable(closer):
                try:
                    closer()
                except Exception as exc:  # the others still need closing
                    failure = failure or exc
        if failure is not None:
            raise failure
