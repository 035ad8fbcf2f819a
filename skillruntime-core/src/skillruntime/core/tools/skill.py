"""The ``skill`` tool: lists the configured skills and activates one on first use.

Activation prepares the skill in the runtime (once per tool set, even under concurrent calls),
checks its ``metadata.requires`` inside the runtime, and then applies its ``allowed-tools``
policy. A failure at any step is returned as an error and nothing is cached, so the next call
retries. Building the tools prepares nothing and creates no sandbox.

Skills come from :class:`SkillSource` objects. :class:`LoadedSkillSource` wraps a
:class:`~skillruntime.core.models.Skill` already loaded from disk; an artifact store plugs in by
providing its own source whose :meth:`SkillSource.load` materialises the skill directory lazily.

The listing of the skills in the tool description is bounded: :func:`skills_xml` keeps it within
a character budget (:data:`DEFAULT_LISTING_BUDGET`) by shortening the longest descriptions first,
never dropping a skill's name or location, and says how many descriptions it shortened.
"""

from __future__ import annotations

import logging
from html import escape
from typing import Protocol, runtime_checkable

from .._moved import moved_names
from ..models import Skill, SkillPreparationRequest, SkillRuntimeConfig

__all__ = [
    "DEFAULT_DESCRIPTION_TEMPLATE",
    "DEFAULT_LISTING_BUDGET",
    "SKILLS_PLACEHOLDER",
    "LoadedSkillSource",
    "SkillSource",
    "activation_text",
    "failure_code",
    "failure_text",
    "listing_description",
    "preparation_request",
    "single_prepared",
    "skills_xml",
]

logger = logging.getLogger(__name__)

DEFAULT_LISTING_BUDGET = 16_000
"""Characters the ``<available_skills>`` listing may take (about 4 000 tokens) by default."""

SKILLS_PLACEHOLDER = "{available_skills}"
"""The placeholder a custom ``skill`` description template must contain exactly once."""

DEFAULT_DESCRIPTION_TEMPLATE = """Execute a skill within the main conversation.

<skills_instructions>
When users ask you to perform tasks, check whether any of the available skills below can help
complete the task more effectively. Skills provide specialized capabilities, instructions and
scripts.

How to use skills:
- Invoke a skill with this tool using the skill name only (no arguments), e.g. command: "pdf".
- When you invoke a skill you will see
  <command-message>The "{name}" skill is loading</command-message>.
- The response starts with the runtime name and the base directory of the skill inside the
  configured runtime, followed by the skill's instructions. Resolve the skill's relative paths
  (scripts/, references/, assets/) against that base directory.
- Only use the runtime-backed tools bash, read, write, edit, ls, glob and grep for the skill's
  work; they run in the same runtime as the skill. Never assume a host path.
- When publish_file is available, use it by default as the final delivery step for files the user
  asked for and give the user the returned URL, never an internal path. Do not publish temporary
  or intermediate files unless asked.
- A skill may restrict the tools available after it is invoked (its allowed-tools).
</skills_instructions>

<available_skills>
{available_skills}
</available_skills>

Only use skills listed in <available_skills>. Do not invoke a skill that is already running."""


@runtime_checkable
class SkillSource(Protocol):
    """Where a configured skill comes from.

    ``name``, ``description`` and ``location`` are shown to the model before any activation;
    a source may also have an ``origin`` string saying where the skill comes from (shown as the
    listing's ``source`` attribute; the OpenViking sources say ``openviking_user`` or
    ``openviking_shared``).
    :meth:`load` is called on the skill's first activation (under that skill's lock, so at most
    one call at a time per source) and again after a failed activation; it returns the skill with
    ``base_path`` a host directory ready to be prepared into the runtime.
    """

    @property
    def name(self) -> str:
        """The skill name the model invokes."""
        ...

    @property
    def description(self) -> str:
        """One-paragraph description shown in the ``skill`` tool description."""
        ...

    @property
    def location(self) -> str:
        """Where the skill comes from (a directory, an artifact URI), for the listing."""
        ...

    def load(self) -> Skill:
        """The skill, with its files available on the host at ``base_path``."""
        ...


class LoadedSkillSource:
    """A source over a :class:`Skill` that is already loaded."""

    def __init__(self, skill: Skill) -> None:
        self._skill = skill

    @property
    def name(self) -> str:
        return self._skill.name

    @property
    def description(self) -> str:
        """The skill's description with its ``when_to_use`` folded in (see
        :func:`listing_description`)."""
        return listing_description(self._skill)

    @property
    def location(self) -> str:
        return self._skill.base_path

    @property
    def skill(self) -> Skill:
        """The wrapped skill."""
        return self._skill

    def load(self) -> Skill:
        return self._skill


def listing_description(skill: Skill) -> str:
    """What the listing shows for ``skill``: its description, and on a line of its own
    ``When to use: …`` when the frontmatter has a (Claude Code style) ``when_to_use`` string."""
    when = skill.frontmatter.get("when_to_use")
    if isinstance(when, str) and when.strip():
        return f"{skill.description}\nWhen to use: {' '.join(when.split())}"
    return skill.description


def skills_xml(sources: list[SkillSource], budget: int | None = DEFAULT_LISTING_BUDGET) -> str:
    """The ``<skill>`` entries of ``sources`` in configured order, XML-escaped, in ``budget``
    characters. A source with an ``origin`` attribute (a remote source: ``openviking_user``,
    ``openviking_shared``) is listed as ``<skill source="<origin>">`` (``docs/tools.md``, "skill").

    When the full listing is longer than ``budget``, every description longer than a common
    limit is cut to that limit (ending in ``…``), the limit being the largest that fits; a last
    line says how many of the descriptions were shortened. Names and locations are never cut, so
    a budget too small for them alone gives empty descriptions and a listing longer than the
    budget. ``budget=None`` lists everything in full; a negative budget raises ``ValueError``.
    """
    if budget is not None and budget < 0:
        raise ValueError(f"the listing budget must be at least 0 characters, not {budget}")
    names = [escape(source.name) for source in sources]
    locations = [escape(source.location) for source in sources]
    descriptions = [source.description for source in sources]
    tags = [_skill_tag(source) for source in sources]

    def render(limit: int | None) -> str:
        entries = [
            f"{tag}\n"
            f"<name>{name}</name>\n"
            f"<description>{escape(_shorten(text, limit))}</description>\n"
            f"<location>{location}</location>\n"
            "</skill>"
            for tag, name, text, location in zip(tags, names, descriptions, locations, strict=True)
        ]
        if limit is not None:
            cut = sum(len(text) > limit for text in descriptions)
            entries.append(
                f"(The descriptions of {cut} of {len(descriptions)} skills were shortened to "
                "fit the listing; invoke a skill to read its full instructions.)"
            )
        return "\n".join(entries)

    full = render(None)
    if budget is None or len(full) <= budget:
        return full
    low, high = 0, max(len(text) for text in descriptions)
    while low < high:  # the largest limit whose listing fits (0 when none does)
        middle = (low + high + 1) // 2
        if len(render(middle)) <= budget:
            low = middle
        else:
            high = middle - 1
    listing = render(low)
    logger.info(
        "the skill listing of %d skills is %d characters, over its budget of %d: descriptions "
        "cut to %d characters (%d shortened)",
        len(sources),
        len(full),
        budget,
        low,
        sum(len(text) > low for text in descriptions),
    )
    return listing


def _skill_tag(source: SkillSource) -> str:
    """``<skill source="…">`` for a source that says where it comes from (an ``origin``
    string, e.g. ``openviking_user``/``openviking_shared``), else ``<skill>``."""
    origin = getattr(source, "origin", None)
    if isinstance(origin, str) and origin:
        return f'<skill source="{escape(origin, quote=True)}">'
    return "<skill>"


def _shorten(text: str, limit: int | None) -> str:
    """``text`` when it has at most ``limit`` characters, else its head ending in ``…``."""
    if limit is None or len(text) <= limit:
        return text
    if limit == 0:
        return ""
    return text[: limit - 1].rstrip() + "…"


def failure_code(error: BaseException | None) -> str | None:
    """The stable code an error carries (its ``code`` attribute when that is an upper-case
    ``SKILL_*``-style word, as ``VikingStoreError`` has), else ``None``."""
    code = getattr(error, "code", None)
    if isinstance(code, str) and code and code.replace("_", "").isalnum() and code.isupper():
        return code
    return None


def failure_text(what: str, error: BaseException) -> str:
    """``Error: <CODE>: <what> failed: <message>`` for an error with a stable code (the code
    also leaves the message's ``[CODE]`` prefix), else ``Error: <what> failed: <message>``."""
    code = failure_code(error)
    message = str(error) or type(error).__name__
    if code is None:
        return f"Error: {what} failed: {message}"
    return f"Error: {code}: {what} failed: {message.removeprefix(f'[{code}] ')}"


def activation_text(runtime_name: str, prepared: Skill) -> str:
    """The ``skill`` tool's result for an activated skill."""
    return (
        f"Runtime: {runtime_name}\n"
        f"Base directory for this skill: {prepared.base_path}\n\n"
        f"{prepared.body.lstrip(chr(10))}"
    )


def preparation_request(skill: Skill, config: SkillRuntimeConfig | None) -> SkillPreparationRequest:
    """The request preparing one activated skill (with its config, if any)."""
    return SkillPreparationRequest(
        skills=(skill,), configs={skill.name: config} if config is not None else {}
    )


def single_prepared(result: list[Skill]) -> Skill:
    """The one runtime skill a preparation of one skill returns (checked)."""
    if len(result) != 1 or not isinstance(result[0], Skill):
        raise RuntimeError("SkillRuntime.prepare must return one runtime skill per skill")
    return result[0]


__getattr__ = moved_names(
    __name__, dict.fromkeys(("SkillActivator", "skill_tool"), "skillruntime.core.tools.activator")
)
"""``SkillActivator`` and ``skill_tool`` moved to :mod:`skillruntime.core.tools.activator`,
served with a :class:`DeprecationWarning`."""
