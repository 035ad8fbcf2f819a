"""Reading Agent Skills: parse and validate ``SKILL.md`` and load one skill.

A skill is a directory holding a ``SKILL.md`` whose first line is ``---``, followed by YAML
frontmatter, a closing line ``---`` and a free-form Markdown body. The frontmatter is read with
PyYAML's safe loader (UTF-8, a byte-order mark and CRLF line ends tolerated) **without implicit
typing**: every scalar keeps its source text (``name: yes`` is the string ``"yes"``, ``version:
1.10`` the string ``"1.10"``), as the specification's reference validator reads it; only an empty
plain value (``license:``) is null, and an explicit tag (``!!int 5``) is honoured. Lists and
nested mappings parse as usual. The frontmatter is checked against the Agent Skills rules:
``name`` (1–64 of ``a-z``, ``0-9`` and ``-``, no leading or trailing ``-``, no ``--``, equal to
the directory name), ``description`` (1–1024 characters) and the optional ``license``,
``compatibility`` (≤ 500 characters), ``metadata`` (a mapping) and ``allowed-tools`` (a
space-separated string or a list of strings). Other top-level keys are kept in
:attr:`Skill.frontmatter`; they are warnings, and errors in strict mode (the specification allows
no other key).

Loading is lenient by default: every problem is logged as a warning and the skill is still loaded,
unless it has no usable ``name`` or ``description``, in which case it is skipped (``None``);
``discover_skills(..., skip_invalid=True)`` also leaves out skills with errors. With
``strict=True`` any problem of level ``"error"`` raises :class:`InvalidSkillError` (a
:class:`SkillValidationError`) listing every problem found; warnings never raise.

skillruntime reads two sections of ``metadata`` itself: ``metadata.skillruntime.bootstrap`` (the
commands that prepare a skill, see :func:`skill_bootstrap_commands`; every runtime runs them
through :func:`resolve_skill_config`) and ``metadata.requires``
(``bins`` and ``env`` a skill needs, checked by the tools inside the runtime).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from ..errors import InvalidSkillError, SkillProblem, SkillValidationError
from ..models import (
    Skill,
    _bootstrap_problems,
    _kind,
    _show,
    resolve_skill_config,
    skill_bootstrap_commands,
)
from .allowed_tools import split_allowed_tools

__all__ = [
    "COMPATIBILITY_MAX_LENGTH",
    "DESCRIPTION_MAX_LENGTH",
    "KNOWN_FRONTMATTER_KEYS",
    "MAX_SKILL_MD_BYTES",
    "NAME_MAX_LENGTH",
    "SKILL_FILE_NAME",
    "InvalidSkillError",
    "SkillProblem",
    "load_skill",
    "parse_skill_markdown",
    "resolve_skill_config",
    "skill_bootstrap_commands",
    "skill_frontmatter",
    "validate_skill_directory",
]

logger = logging.getLogger(__package__)

SKILL_FILE_NAME = "SKILL.md"
"""The file that makes a directory a skill."""

MAX_SKILL_MD_BYTES = 1024 * 1024
"""Largest ``SKILL.md`` accepted (1 MiB); a bigger file is an error, never read whole."""

NAME_MAX_LENGTH = 64
DESCRIPTION_MAX_LENGTH = 1024
COMPATIBILITY_MAX_LENGTH = 500

_SPEC_KEYS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")

KNOWN_FRONTMATTER_KEYS = frozenset(_SPEC_KEYS)
"""Top-level frontmatter keys of the Agent Skills specification (the only ones strict accepts)."""

_KNOWN_KEYS_TEXT = ", ".join(_SPEC_KEYS)

_OPENING = re.compile(r"---[ \t]*(?:\r\n|\n|\r)")
_CLOSING = re.compile(r"^---[ \t]*(?:\r\n|\n|\r|\Z)", re.MULTILINE)
_NAME_CHARACTERS = re.compile(r"[a-z0-9-]+")

Level = Literal["error", "warning"]


class _Problems:
    """Collects the problems of one skill under one path label."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.items: list[SkillProblem] = []

    def error(self, message: str) -> None:
        self.items.append(SkillProblem("error", message, self.path))

    def warning(self, message: str) -> None:
        self.items.append(SkillProblem("warning", message, self.path))

    @property
    def has_errors(self) -> bool:
        return any(p.level == "error" for p in self.items)


# ----------------------------------------------------------------------------- parsing


def parse_skill_markdown(
    text: str,
    base_path: str,
    *,
    directory_name: str | None = None,
    strict: bool = False,
) -> Skill | None:
    """Parse ``SKILL.md`` text of the skill located at ``base_path``.

    ``directory_name``, when given, must equal the skill's ``name``. Lenient (default): problems
    are logged as warnings and ``None`` is returned when the skill has no usable name or
    description. Strict: errors raise :class:`InvalidSkillError` listing every problem.
    """
    problems = _Problems(os.path.join(base_path, SKILL_FILE_NAME))
    skill = _analyse(text, base_path, directory_name, problems, strict=strict)
    return _finish(problems, skill, strict=strict)


def skill_frontmatter(text: str) -> dict[str, Any] | None:
    """The frontmatter mapping of ``SKILL.md`` text, read exactly as loading reads it (scalars
    keep their text), or ``None`` when there is no readable frontmatter mapping. Never raises
    for content and logs nothing."""
    problems = _Problems(SKILL_FILE_NAME)
    parts = _split(text, problems)
    if parts is None:
        return None
    data = _load_yaml(parts[0], problems)
    return None if data is None else {str(key): value for key, value in data.items()}


def _split(text: str, problems: _Problems) -> tuple[str, str] | None:
    """``(frontmatter source, body)`` of ``SKILL.md`` text; ``None`` (with an error) when the
    frontmatter is not delimited as required."""
    text = text.removeprefix("\ufeff")
    opening = _OPENING.match(text)
    if opening is None:
        if text.rstrip(" \t") == "---":
            problems.error("the frontmatter opened on line 1 is never closed: add a line '---'")
        else:
            problems.error(
                "SKILL.md must start with a line '---' that opens the YAML frontmatter "
                "(name and description)"
            )
        return None
    closing = _CLOSING.search(text, opening.end())
    if closing is None:
        problems.error(
            "the frontmatter opened on line 1 is never closed: add a line that is exactly '---' "
            "after it"
        )
        return None
    return text[opening.end() : closing.start()], text[closing.end() :]


def _analyse(
    text: str, base_path: str, directory_name: str | None, problems: _Problems, *, strict: bool
) -> Skill | None:
    parts = _split(text, problems)
    if parts is None:
        return None
    data = _load_yaml(parts[0], problems)
    body = parts[1]
    if data is None:
        return None
    frontmatter = _check_keys(data, problems, strict=strict)
    name = _check_name(frontmatter, directory_name, problems)
    description = _check_description(frontmatter, problems)
    _check_optional_fields(frontmatter, problems)
    if name is None or description is None:
        return None
    return Skill(
        name=name,
        description=description,
        base_path=base_path,
        frontmatter=frontmatter,
        body=body,
    )


class _Loader(yaml.SafeLoader):
    """The safe loader without YAML 1.1 implicit typing: a plain scalar is its text.

    PyYAML would read ``yes``/``no``/``on``/``off`` as booleans, ``2048``, ``017``, ``0x1f`` and
    ``1:30`` as integers, ``1.10`` as ``1.1``, ``2026-01-05`` as a date and ``null``/``~`` as
    ``None``, losing what the author wrote. Only the empty plain scalar stays null (there is no
    text to keep); explicit tags and quoting behave as usual. Duplicate keys and aliases are
    found on the node tree before construction.
    """

    yaml_implicit_resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]] = {
        "": [("tag:yaml.org,2002:null", re.compile(r"\A\Z"))]
    }


def _load_yaml(source: str, problems: _Problems) -> Mapping[Any, Any] | None:
    loader = _Loader(source)
    try:
        node = loader.get_single_node()
        if node is not None and _check_nodes(node, problems, set()):
            problems.error(
                "the frontmatter uses a YAML alias ('*name'): anchors and aliases are not "
                "supported in SKILL.md, write the value out"
            )
            return None
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "invalid YAML"
        where = f"line {mark.line + 2}, column {mark.column + 1}" if mark else "unknown position"
        problems.error(f"the frontmatter is not valid YAML at SKILL.md {where}: {what}")
        return None
    except yaml.YAMLError as exc:
        problems.error(f"the frontmatter is not valid YAML: {type(exc).__name__}")
        return None
    finally:
        loader.dispose()
    if data is None:
        problems.error("the frontmatter is empty: it needs at least 'name' and 'description'")
        return None
    if not isinstance(data, Mapping):
        problems.error(
            f"the frontmatter must be a YAML mapping of keys to values, not {_kind(data)}"
        )
        return None
    return data


def _check_nodes(node: yaml.Node, problems: _Problems, seen: set[int]) -> bool:
    """Report duplicate mapping keys; return True when an alias is found.

    The composer returns the anchored node itself for every alias, so a node met twice is an
    alias. Aliases are refused because they let a few bytes expand into a huge value (or a
    cycle) when the frontmatter is later serialised.
    """
    if id(node) in seen:
        return True
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        keys: set[str] = set()
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = str(key_node.value)
                if key in keys:
                    problems.error(
                        f"key {_show(key)} appears twice in one mapping at SKILL.md line "
                        f"{key_node.start_mark.line + 2}; only the last one would count"
                    )
                keys.add(key)
            elif _check_nodes(key_node, problems, seen):
                return True
            if _check_nodes(value_node, problems, seen):
                return True
    elif isinstance(node, yaml.SequenceNode):
        return any(_check_nodes(item, problems, seen) for item in node.value)
    return False


def _check_keys(data: Mapping[Any, Any], problems: _Problems, *, strict: bool) -> dict[str, Any]:
    """Copy the frontmatter with string keys; an unknown key is a warning, an error if strict."""
    frontmatter: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(key, str):
            problems.error(f"frontmatter key {_show(key)} must be a string, not {_kind(key)}")
        elif key not in KNOWN_FRONTMATTER_KEYS:
            if strict:
                problems.error(
                    f"unknown frontmatter key {_show(key)}: the Agent Skills specification "
                    f"allows only {_KNOWN_KEYS_TEXT}; move it under 'metadata' or drop it"
                )
            else:
                problems.warning(
                    f"unknown frontmatter key {_show(key)} (not in the Agent Skills "
                    "specification; kept as is)"
                )
        frontmatter[str(key)] = value
    return frontmatter


def _check_name(
    frontmatter: Mapping[str, Any], directory_name: str | None, problems: _Problems
) -> str | None:
    """Report every broken name rule; return the name when it is usable (a non-empty string)."""
    if "name" not in frontmatter or frontmatter["name"] is None:
        problems.error("'name' is missing: add e.g. 'name: my-skill' matching the directory name")
        return None
    name = frontmatter["name"]
    if not isinstance(name, str):
        problems.error(f"'name' must be a string, not {_kind(name)}")
        return None
    if not name:
        problems.error("'name' must not be empty")
        return None
    shown = _show(name)
    if len(name) > NAME_MAX_LENGTH:
        problems.error(f"'name' is {len(name)} characters; at most {NAME_MAX_LENGTH} are allowed")
    if not _NAME_CHARACTERS.fullmatch(name):
        problems.error(
            f"'name' {shown} may contain only lowercase letters a-z, digits 0-9 and hyphens"
        )
    if name.startswith("-") or name.endswith("-"):
        problems.error(f"'name' {shown} must not start or end with a hyphen")
    if "--" in name:
        problems.error(f"'name' {shown} must not contain two hyphens in a row ('--')")
    if directory_name is not None and name != directory_name:
        problems.error(
            f"'name' {shown} does not match its directory name {_show(directory_name)}: "
            "rename the directory or the skill"
        )
    return name


def _check_description(frontmatter: Mapping[str, Any], problems: _Problems) -> str | None:
    """Report description problems; return the stripped description when usable."""
    if "description" not in frontmatter or frontmatter["description"] is None:
        problems.error("'description' is missing: say what the skill does and when to use it")
        return None
    description = frontmatter["description"]
    if not isinstance(description, str):
        problems.error(f"'description' must be a string, not {_kind(description)}")
        return None
    stripped = description.strip()
    if not stripped:
        problems.error("'description' must not be empty")
        return None
    if len(stripped) > DESCRIPTION_MAX_LENGTH:
        problems.error(
            f"'description' is {len(stripped)} characters; at most {DESCRIPTION_MAX_LENGTH} "
            "are allowed: shorten it (agents choose skills by their descriptions)"
        )
    return stripped


def _check_optional_fields(frontmatter: Mapping[str, Any], problems: _Problems) -> None:
    if "license" in frontmatter and not isinstance(frontmatter["license"], str):
        problems.error(f"'license' must be a string, not {_kind(frontmatter['license'])}")
    if "compatibility" in frontmatter:
        compatibility = frontmatter["compatibility"]
        if not isinstance(compatibility, str):
            problems.error(f"'compatibility' must be a string, not {_kind(compatibility)}")
        elif not compatibility.strip():
            problems.error("'compatibility' must not be empty when present")
        elif len(compatibility) > COMPATIBILITY_MAX_LENGTH:
            problems.error(
                f"'compatibility' is {len(compatibility)} characters; at most "
                f"{COMPATIBILITY_MAX_LENGTH} are allowed"
            )
    if "allowed-tools" in frontmatter:
        _check_allowed_tools(frontmatter["allowed-tools"], problems)
    if "metadata" in frontmatter:
        metadata = frontmatter["metadata"]
        if not isinstance(metadata, Mapping):
            problems.error(f"'metadata' must be a mapping, not {_kind(metadata)}")
        else:
            _check_metadata(metadata, problems)


def _check_allowed_tools(value: Any, problems: _Problems) -> None:
    if isinstance(value, str | list):
        try:
            split_allowed_tools(value)
        except ValueError as exc:
            problems.error(str(exc))
    if isinstance(value, str):
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                problems.error(
                    f"'allowed-tools' entry {index + 1} must be a non-empty string, "
                    f"not {_kind(item)}"
                )
        return
    problems.error(
        "'allowed-tools' must be a space-separated string (e.g. 'Bash(git:*) Read') or a list "
        f"of strings, not {_kind(value)}"
    )


def _check_metadata(metadata: Mapping[Any, Any], problems: _Problems) -> None:
    for key in metadata:
        if not isinstance(key, str):
            problems.warning(f"'metadata' key {_show(key)} should be a string")
    runtime_section = metadata.get("skillruntime")
    if runtime_section is not None:
        if not isinstance(runtime_section, Mapping):
            problems.error(
                f"'metadata.skillruntime' must be a mapping, not {_kind(runtime_section)}"
            )
        elif "bootstrap" in runtime_section:
            for message in _bootstrap_problems(runtime_section["bootstrap"]):
                problems.error(message)
    requires = metadata.get("requires")
    if requires is not None:
        if not isinstance(requires, Mapping):
            problems.warning(f"'metadata.requires' should be a mapping, not {_kind(requires)}")
            return
        for field in ("bins", "env"):
            listed = requires.get(field)
            if listed is not None and not (
                isinstance(listed, list) and all(isinstance(i, str) and i for i in listed)
            ):
                problems.warning(f"'metadata.requires.{field}' should be a list of strings")


# ---------------------------------------------------------------------- files on disk


def _skill_directory(path: Path) -> Path:
    """The skill directory for ``path`` (a skill directory or its ``SKILL.md``)."""
    if path.name == SKILL_FILE_NAME and not path.is_dir():
        return path.parent
    return path


def _read_skill(directory: Path, *, strict: bool) -> tuple[_Problems, Skill | None]:
    """Read and analyse the skill in ``directory`` (absolute); never raises for content."""
    skill_md = directory / SKILL_FILE_NAME
    problems = _Problems(str(skill_md))
    if not directory.is_dir():
        problems.path = str(directory)
        what = "does not exist" if not directory.exists() else "is not a directory"
        problems.error(f"the skill directory {what}")
        return problems, None
    if skill_md.is_symlink():
        problems.error(
            "SKILL.md is a symbolic link; links are never followed when a skill is copied, so "
            "the prepared copy would have no SKILL.md: replace the link with the file"
        )
        return problems, None
    if not skill_md.is_file():
        problems.error(_missing_skill_md(directory))
        return problems, None
    try:
        with skill_md.open("rb") as handle:
            raw = handle.read(MAX_SKILL_MD_BYTES + 1)
    except OSError as exc:
        problems.error(f"SKILL.md cannot be read: {exc.strerror or type(exc).__name__}")
        return problems, None
    if len(raw) > MAX_SKILL_MD_BYTES:
        problems.error(
            f"SKILL.md is larger than {MAX_SKILL_MD_BYTES} bytes (1 MiB): keep the instructions "
            "short and move details into files under references/"
        )
        return problems, None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.error(
            f"SKILL.md is not UTF-8 (invalid byte at offset {exc.start}): save it as UTF-8"
        )
        return problems, None
    return problems, _analyse(text, str(directory), directory.name, problems, strict=strict)


def _missing_skill_md(directory: Path) -> str:
    try:
        near = [n for n in os.listdir(directory) if n.lower() == SKILL_FILE_NAME.lower()]
    except OSError:
        near = []
    if near:
        return f"no SKILL.md in the skill directory (found {near[0]!r}: rename it to SKILL.md)"
    return "no SKILL.md in the skill directory"


def _finish(
    problems: _Problems, skill: Skill | None, *, strict: bool, skip_invalid: bool = False
) -> Skill | None:
    if strict and problems.has_errors:
        raise InvalidSkillError(problems.items)
    for problem in problems.items:
        logger.warning("%s", problem)
    if skill is None:
        logger.warning(
            "skipping the skill at %s: it has no usable name or description", problems.path
        )
    elif skip_invalid and problems.has_errors:
        errors = sum(p.level == "error" for p in problems.items)
        logger.warning(
            "skipping the skill at %s: it has %d error(s), listed above", problems.path, errors
        )
        return None
    return skill


def load_skill(
    path: str | os.PathLike[str],
    *,
    strict: bool = False,
    unknown_keys: Literal["warn", "error"] | None = None,
) -> Skill | None:
    """Load the skill at ``path``: a skill directory or its ``SKILL.md``.

    :attr:`Skill.base_path` is the absolute skill directory. Lenient (default): problems are
    logged as warnings and ``None`` is returned when the skill is unusable (no ``SKILL.md``, no
    valid frontmatter, no name or description). Strict: errors raise :class:`InvalidSkillError`.
    ``unknown_keys`` says what a top-level key outside the specification is — ``"error"`` or
    ``"warn"``; by default an error exactly when ``strict``. Skill sources load with
    ``strict=True, unknown_keys="warn"``: a broken skill is refused, while a skill written for
    another agent (``when_to_use``, ``user-invocable``…) still loads.
    A ``path`` that does not exist raises :class:`SkillValidationError` in both modes.
    """
    given = Path(path)
    if not given.exists():
        raise SkillValidationError(f"Skill path does not exist: {given}")
    directory = _skill_directory(given)
    if not directory.is_dir():
        raise SkillValidationError(
            f"Not a skill: {given} (expected a skill directory or its {SKILL_FILE_NAME})"
        )
    keys_strict = strict if unknown_keys is None else unknown_keys == "error"
    problems, skill = _read_skill(directory.resolve(), strict=keys_strict)
    return _finish(problems, skill, strict=strict)


def validate_skill_directory(
    path: str | os.PathLike[str], *, strict: bool = False
) -> list[SkillProblem]:
    """Every problem of the skill at ``path`` (a directory or its ``SKILL.md``), errors and
    warnings alike; an empty list means the skill is valid. ``strict=True`` applies the
    specification exactly: a top-level key it does not define is an error, not a warning.
    Never raises for content problems, and reports a missing directory as a problem too. Logs
    nothing."""
    directory = _skill_directory(Path(path))
    problems, _ = _read_skill(
        directory.resolve() if directory.is_dir() else directory, strict=strict
    )
    return list(problems.items)


# --------------------------------------------------------------------------- helpers
