"""``skillruntime skills validate`` and ``skillruntime skills list``: check and list skills.

Both take skill directories or roots that hold skill directories. ``validate`` prints every
problem of every skill and the files the upload policy would leave out; ``list`` skips invalid
skills with a warning, as ``exec`` does, and explains an empty result when skills hide in hidden
folders.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import click

from .errors import CliError

__all__ = ["skills_group"]


@click.group("skills")
def skills_group() -> None:
    """Check and list skill directories (folders with a SKILL.md)."""


def _hidden_hint(root: Path) -> str | None:
    """How to use the skills in ``root``'s hidden folders, or ``None`` when it has none."""
    from ..skills import hidden_skill_folders

    hidden = hidden_skill_folders(root)
    if not hidden:
        return None
    names = ", ".join(f"{folder.name}/" for folder in hidden)
    roots = " ".join(str(root / folder.name) for folder in hidden)
    return (
        f"Hint: hidden folders under {root} hold skills ({names}) and hidden folders are not "
        f"searched; give them as roots: skillruntime skills list {roots}"
    )


def _skill_targets(path: Path) -> list[Path] | None:
    """The skill directories to validate for ``path``: ``[path]`` when it is a skill (or a
    ``SKILL.md``), its skill subdirectories when it is a root, ``None`` when it holds neither."""
    from ..skills import SKILL_FILE_NAME, skill_directories

    if not path.is_dir() or os.path.lexists(path / SKILL_FILE_NAME):
        return [path]
    return skill_directories(path) or None


@skills_group.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--strict",
    is_flag=True,
    help="Apply the Agent Skills specification exactly: a frontmatter key it does not define "
    "is an error, not a warning.",
)
def skills_validate(paths: Sequence[Path], strict: bool) -> None:
    """Check skills against the Agent Skills rules.

    Each PATH is a skill directory (or its SKILL.md), or a root whose subdirectories are skills:
    every skill under it is checked. Prints each problem and each file the upload policy leaves
    out; exits with status 1 when any problem is an error (warnings alone pass).

    \b
    Examples:
      skillruntime skills validate skills/pdf skills/csv
      skillruntime skills validate --strict skills
    """
    from ..skills import validate_skill_directory
    from ..skills.files import skipped_skill_files

    errors = 0
    for path in paths:
        targets = _skill_targets(path)
        if targets is None:
            errors += 1
            click.echo(
                f"{path}: error: no SKILL.md in this directory and no skill directories below it"
            )
            hint = _hidden_hint(path)
            if hint:
                click.echo(hint, err=True)
            continue
        for target in targets:
            problems = validate_skill_directory(target, strict=strict)
            if not problems:
                click.echo(f"{target}: ok")
            for problem in problems:
                errors += problem.level == "error"
                click.echo(f"{problem.path}: {problem.level}: {problem.message}")
            directory = target.parent if target.name == "SKILL.md" else target
            if directory.is_dir():
                for skipped in skipped_skill_files(directory):
                    click.echo(
                        f"{directory}: not copied: {skipped.relative_path} ({skipped.reason})"
                    )
    if errors:
        raise CliError(f"{errors} error(s) found")


@skills_group.command("list")
@click.argument(
    "roots", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path)
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.option(
    "--lenient",
    is_flag=True,
    help="Also list skills that break a rule of the specification (a description over 1024 "
    "characters, ...); their problems are still printed as warnings.",
)
def skills_list(roots: Sequence[Path], as_json: bool, lenient: bool) -> None:
    """List the skills found under each ROOT: name, description and path.

    A ROOT is a skill directory or a directory whose subdirectories are skills. Invalid skills
    (those `skillruntime skills validate` reports errors for) are skipped with a warning on
    stderr and a hint on how to fix them, unless --lenient is given. When nothing is found, a
    hint names hidden folders that hold skills.
    """
    from ..skills import discover_skills

    skills = [skill for root in roots for skill in discover_skills(root, skip_invalid=not lenient)]
    if not lenient:
        hint = _skipped_hint(roots, {skill.base_path for skill in skills})
        if hint:
            click.echo(hint, err=True)
    rows = [
        {"name": skill.name, "description": skill.description, "path": skill.base_path}
        for skill in sorted(skills, key=lambda s: (s.name, s.base_path))
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    elif rows:
        width = max(len(row["name"]) for row in rows)
        for row in rows:
            click.echo(f"{row['name']:<{width}}  {row['path']}")
            if row["description"]:
                click.echo(f"{'':<{width}}  {_one_line(row['description'])}")
    else:
        click.echo(f"No skills found under {', '.join(str(root) for root in roots)}")
    if not rows:
        for root in roots:
            hint = _hidden_hint(root)
            if hint:
                click.echo(hint, err=True)


def _skipped_hint(roots: Sequence[Path], listed: set[str]) -> str | None:
    """How to fix or still list the skills under ``roots`` that were skipped as invalid."""
    from ..skills import skill_directories

    skipped = [
        directory
        for root in roots
        for directory in skill_directories(root)
        if str(directory) not in listed
    ]
    if not skipped:
        return None
    where = " ".join(str(root) for root in roots)
    return (
        f"Hint: {len(skipped)} invalid skill(s) skipped (see the warnings above): fix them "
        f"(skillruntime skills validate {where} lists every problem), or pass --lenient to "
        "list them anyway"
    )


def _one_line(text: str, limit: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
