"""Plan the lowest-versions test environment from what the distributions declare.

Used by ``scripts/test-lowest.sh``; standard library only, so it runs before any environment
exists. Every folder of the repository root whose ``pyproject.toml`` has a ``[project]`` table is
a distribution; it is installed editable with all of its extras, so every declared dependency
(extras included) is resolved at the lowest version its bounds allow.

Subcommands:

``requirements``
    A requirements file installing every distribution: ``-e ./<folder>[extra,...]`` lines.
``floors``
    Every declared requirement with a lower bound, as ``name floor distribution`` lines.
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_FLOOR = re.compile(r">=\s*([0-9][^,;\s]*)|==\s*([0-9][^,;\s*]*)(?!\*)")


def normalize(name: str) -> str:
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(line: str) -> str | None:
    """The project name a requirement line names (``None`` for comments, options, blanks)."""
    text = line.split("#", 1)[0].strip()
    if not text or text.startswith("-"):
        return None
    match = _NAME.match(text)
    return normalize(match.group(1)) if match else None


def distributions() -> Iterator[tuple[Path, dict[str, object]]]:
    """``(folder, [project] table)`` of every distribution, sorted by folder name."""
    for pyproject in sorted(ROOT.glob("*/pyproject.toml")):
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        project = data.get("project")
        if isinstance(project, dict):
            yield pyproject.parent, project


def declared() -> Iterator[tuple[str, str]]:
    """``(requirement, distribution name)`` for every dependency, extras included."""
    for _, project in distributions():
        owner = str(project.get("name", "?"))
        dependencies = project.get("dependencies") or []
        assert isinstance(dependencies, list)
        for requirement in dependencies:
            yield str(requirement), owner
        extras = project.get("optional-dependencies", {}) or {}
        assert isinstance(extras, dict)
        for requirements in extras.values():
            for requirement in requirements:
                yield str(requirement), owner


def own_names() -> set[str]:
    """Normalized names of the distributions themselves."""
    return {normalize(str(project.get("name", ""))) for _, project in distributions()}


def requirements() -> list[str]:
    """Requirement lines installing every distribution editable with all of its extras."""
    lines: list[str] = []
    for folder, project in distributions():
        extras = project.get("optional-dependencies") or {}
        assert isinstance(extras, dict)
        suffix = f"[{','.join(sorted(extras))}]" if extras else ""
        lines.append(f"-e ./{folder.name}{suffix}")
    return lines


def floors() -> list[str]:
    """``name floor distribution`` for every declared requirement with a lower bound."""
    own = own_names()
    lines: list[str] = []
    for requirement, owner in declared():
        name = requirement_name(requirement)
        if name is None or name in own:
            continue
        spec = requirement.split(";", 1)[0]
        match = _FLOOR.search(spec)
        floor = (match.group(1) or match.group(2)) if match else "-"
        lines.append(f"{name} {floor} {owner}")
    return lines


def main(argv: list[str]) -> int:
    command, *rest = argv or [""]
    if command == "requirements" and not rest:
        out = requirements()
    elif command == "floors" and not rest:
        out = floors()
    else:
        sys.stderr.write(__doc__ or "")
        return 2
    sys.stdout.write("".join(f"{line}\n" for line in out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
