"""Discovering skills: the skill directories under a root, read and selected by name.

A root is either a skill directory itself or a directory whose immediate, non-hidden
subdirectories holding a ``SKILL.md`` are skills; symbolic links are never followed. Each
directory is read with the rules of :mod:`skillruntime.core.skills.spec`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import SkillValidationError
from ..models import Skill, _show
from .spec import SKILL_FILE_NAME, _finish, _Problems, _read_skill

__all__ = ["discover_skills", "hidden_skill_folders", "skill_directories"]

logger = logging.getLogger(__package__)


@dataclass(frozen=True, slots=True)
class _Candidate:
    directory: Path
    problems: _Problems
    skill: Skill | None

    @property
    def key(self) -> str:
        """The name used for selection: the skill's name, or its directory's when unusable."""
        return self.skill.name if self.skill is not None else self.directory.name


def _existing_root(root: str | os.PathLike[str]) -> Path:
    base = Path(root)
    if not base.exists():
        raise SkillValidationError(f"Skills root does not exist: {base}")
    if not base.is_dir():
        raise SkillValidationError(f"Skills root is not a directory: {base}")
    return base.resolve()


def skill_directories(root: str | os.PathLike[str]) -> list[Path]:
    """The directories :func:`discover_skills` reads under ``root`` (absolute, sorted by name).

    ``[root]`` when ``root`` holds a ``SKILL.md``, else its immediate, non-hidden subdirectories
    that hold one; symbolic links are never followed. A missing or non-directory ``root`` raises
    :class:`SkillValidationError`.
    """
    return _candidate_directories(_existing_root(root))


def hidden_skill_folders(root: str | os.PathLike[str]) -> list[Path]:
    """Hidden subdirectories of ``root`` (``.curated/``, ``.system/``) that hold skills, sorted.

    Discovery ignores hidden entries; this names the ones it would miss: a hidden directory that
    is a skill (``.x/SKILL.md``) or that holds skill directories (``.x/pdf/SKILL.md``). Empty
    when ``root`` is itself a skill. Symbolic links are never followed; unreadable directories
    are left out. A missing or non-directory ``root`` raises :class:`SkillValidationError`.
    """
    base = _existing_root(root)
    if os.path.lexists(base / SKILL_FILE_NAME):
        return []
    return [
        Path(entry.path)
        for entry in _scan(base)
        if entry.name.startswith(".")
        and entry.is_dir(follow_symlinks=False)
        and _holds_skills(Path(entry.path))
    ]


def _holds_skills(directory: Path) -> bool:
    """True when ``directory`` is a skill or has a subdirectory that is one (links not followed)."""
    return os.path.lexists(directory / SKILL_FILE_NAME) or any(
        child.is_dir(follow_symlinks=False)
        and os.path.lexists(os.path.join(child.path, SKILL_FILE_NAME))
        for child in _scan(directory)
    )


def _scan(directory: Path) -> list[os.DirEntry[str]]:
    """The entries of ``directory`` sorted by name; empty when it cannot be read."""
    try:
        with os.scandir(directory) as entries:
            return sorted(entries, key=lambda e: e.name)
    except OSError:
        return []


def _candidate_directories(root: Path) -> list[Path]:
    if os.path.lexists(root / SKILL_FILE_NAME):
        return [root]
    found: list[Path] = []
    with os.scandir(root) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                if os.path.isdir(entry.path):
                    logger.warning(
                        "not following symbolic link %s in skills root %s: copy the skill "
                        "directory there instead",
                        entry.name,
                        root,
                    )
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            if os.path.lexists(os.path.join(entry.path, SKILL_FILE_NAME)):
                found.append(Path(entry.path))
            else:
                logger.debug("ignoring %s in skills root %s: it has no SKILL.md", entry.name, root)
    return found


def discover_skills(
    root: str | os.PathLike[str],
    *,
    names: Iterable[str] | None = None,
    strict: bool = False,
    skip_invalid: bool = False,
) -> list[Skill]:
    """Find the skills under ``root``, sorted by name.

    ``root`` is either a skill directory itself (it holds a ``SKILL.md``) or a directory whose
    immediate subdirectories holding a ``SKILL.md`` are skills; hidden entries are ignored (see
    :func:`hidden_skill_folders`) and symbolic links are never followed (a linked skill directory
    is skipped with a warning). ``names`` selects skills by name: a name that is not found raises
    :class:`SkillValidationError` listing the names that exist; only the selected skills'
    problems are logged or, with ``strict=True``, raised. ``skip_invalid=True`` leaves out, with a
    warning, every lenient skill that has a problem of level ``"error"`` (what
    :func:`validate_skill_directory` reports as invalid) instead of loading it anyway. Two skills
    with the same name raise in both modes. A missing or non-directory ``root`` raises
    :class:`SkillValidationError`.
    """
    base = _existing_root(root)
    candidates = []
    for directory in _candidate_directories(base):
        problems, skill = _read_skill(directory, strict=strict)
        candidates.append(_Candidate(directory, problems, skill))
    _reject_duplicates([c for c in candidates if not (skip_invalid and c.problems.has_errors)])
    selected = candidates
    if names is not None:
        wanted = {names} if isinstance(names, str) else set(names)
        selected = [c for c in candidates if c.key in wanted]
        missing = wanted - {c.key for c in selected}
        if missing:
            available = ", ".join(sorted({c.key for c in candidates})) or "none"
            raise SkillValidationError(
                f"No skill named {', '.join(sorted(missing))} under {base}; available: {available}"
            )
    skills = [
        skill
        for candidate in selected
        if (
            skill := _finish(
                candidate.problems, candidate.skill, strict=strict, skip_invalid=skip_invalid
            )
        )
        is not None
    ]
    return sorted(skills, key=lambda s: s.name)


def _reject_duplicates(candidates: Sequence[_Candidate]) -> None:
    by_name: dict[str, list[Path]] = {}
    for candidate in candidates:
        if candidate.skill is not None:
            by_name.setdefault(candidate.skill.name, []).append(candidate.directory)
    clashes = {name: dirs for name, dirs in by_name.items() if len(dirs) > 1}
    if clashes:
        details = "; ".join(
            f"{_show(name)} in {', '.join(str(d) for d in dirs)}"
            for name, dirs in sorted(clashes.items())
        )
        raise SkillValidationError(f"Skill names must be unique; found duplicates: {details}")
