"""Agent Skills on disk: parse, validate, discover, and choose the files that are uploaded.

:mod:`.spec` parses and validates ``SKILL.md`` and loads one skill (with its bootstrap metadata);
:mod:`.discovery` finds the skills under a root; :mod:`.policy` is the :class:`UploadPolicy` of
names that never leave the host; :mod:`.files` walks a skill under that policy, computes its
content digest and copies it.
"""

from typing import TYPE_CHECKING

from skillruntime.core._lazy import lazy_attributes

if TYPE_CHECKING:
    from .discovery import discover_skills, hidden_skill_folders, skill_directories
    from .spec import (
        COMPATIBILITY_MAX_LENGTH,
        DESCRIPTION_MAX_LENGTH,
        KNOWN_FRONTMATTER_KEYS,
        MAX_SKILL_MD_BYTES,
        NAME_MAX_LENGTH,
        SKILL_FILE_NAME,
        InvalidSkillError,
        SkillProblem,
        load_skill,
        parse_skill_markdown,
        resolve_skill_config,
        skill_bootstrap_commands,
        skill_frontmatter,
        validate_skill_directory,
    )

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "discover_skills": ".discovery",
        "hidden_skill_folders": ".discovery",
        "skill_directories": ".discovery",
        "COMPATIBILITY_MAX_LENGTH": ".spec",
        "DESCRIPTION_MAX_LENGTH": ".spec",
        "KNOWN_FRONTMATTER_KEYS": ".spec",
        "MAX_SKILL_MD_BYTES": ".spec",
        "NAME_MAX_LENGTH": ".spec",
        "SKILL_FILE_NAME": ".spec",
        "InvalidSkillError": ".spec",
        "SkillProblem": ".spec",
        "load_skill": ".spec",
        "parse_skill_markdown": ".spec",
        "resolve_skill_config": ".spec",
        "skill_bootstrap_commands": ".spec",
        "skill_frontmatter": ".spec",
        "validate_skill_directory": ".spec",
    },
)

__all__ = [
    "COMPATIBILITY_MAX_LENGTH",
    "DESCRIPTION_MAX_LENGTH",
    "KNOWN_FRONTMATTER_KEYS",
    "MAX_SKILL_MD_BYTES",
    "NAME_MAX_LENGTH",
    "SKILL_FILE_NAME",
    "InvalidSkillError",
    "SkillProblem",
    "discover_skills",
    "hidden_skill_folders",
    "load_skill",
    "parse_skill_markdown",
    "resolve_skill_config",
    "skill_bootstrap_commands",
    "skill_directories",
    "skill_frontmatter",
    "validate_skill_directory",
]
