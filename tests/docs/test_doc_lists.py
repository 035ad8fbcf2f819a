"""What the docs say about the repository agrees with the repository.

- Every ``pip install`` line of a shell block in README.md and docs/ works from a clone as written:
  a local path names an existing distribution folder, and a distribution of this repository named
  by its bare project name (not on an index yet) stands only on a line marked
  ``# once published``.
- The list of distributions is one list: every folder holding a ``pyproject.toml`` with a
  ``[project]`` table appears in the README's and docs/architecture.md's tables, in the
  CHANGELOG's header, and the architecture page's count in words matches.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_SHELL_BLOCK = re.compile(r"^```(?:bash|console|sh|shell)\n(?P<code>.*?)^```\s*$", re.M | re.S)
_INSTALL_COMMAND = re.compile(r"^\s*(?:\$ )?(?:\S*/)?pip install\b")
_COUNT_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip


def distributions() -> dict[str, str]:
    """Project name -> folder name, for every distribution of the repository."""
    found = {}
    for pyproject in sorted(ROOT.glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project")
        if isinstance(project, dict):
            found[str(project["name"])] = pyproject.parent.name
    return found


def install_lines() -> list[tuple[str, int, str]]:
    """``(page, line number, line)`` of every ``pip install`` line in a shell block."""
    lines = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in _SHELL_BLOCK.finditer(text):
            first = text.count("\n", 0, block.start("code")) + 1
            for offset, line in enumerate(block.group("code").splitlines()):
                if _INSTALL_COMMAND.match(line):
                    lines.append((page.relative_to(ROOT).as_posix(), first + offset, line))
    return lines


def _requirement_name(argument: str) -> str:
    return re.split(r"[\[<>=!~;@ ]", argument, maxsplit=1)[0]


def test_install_lines_are_found() -> None:
    pages = {page for page, _, _ in install_lines()}
    assert {"README.md", "docs/deepagents.md", "docs/openai-agents.md"} <= pages


@pytest.mark.parametrize(
    ("page", "number", "line"), install_lines(), ids=lambda value: str(value)[:40]
)
def test_install_lines_work_from_a_clone(page: str, number: int, line: str) -> None:
    command, _, comment = line.partition("#")
    words = shlex.split(command[command.index("pip install") + len("pip install") :])
    arguments = [word for word in words if not word.startswith("-")]
    assert arguments, f"{page}:{number}: nothing to install"
    ours = distributions()
    for argument in arguments:
        name = _requirement_name(argument)
        if name.startswith(("./", "../", "/")):
            folder = (ROOT / name).resolve()
            assert folder.parent == ROOT, f"{page}:{number}: {argument} leaves the repository"
            assert folder.name in ours.values(), (
                f"{page}:{number}: {argument} is no distribution folder of the repository"
            )
        elif name in ours:
            assert "once published" in comment, (
                f"{page}:{number}: {name} is not on an index yet; from a clone it is "
                f"./{ours[name]} (or mark the line '# once published')"
            )


def _table_names(text: str) -> set[str]:
    return set(re.findall(r"^\| `(skillruntime-[a-z-]+)` \|", text, re.M))


def test_the_distribution_lists_agree_with_the_repository() -> None:
    names = set(distributions())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert _table_names(readme) == names
    assert _table_names(architecture) == names
    count = re.search(r"One repository holds (\w+) distributions", architecture)
    assert count is not None
    assert _COUNT_WORDS[count.group(1)] == len(names)
    header = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8").split("\n## ", 1)[0]
    listed = {
        "skillruntime" + suffix if suffix.startswith("-") else suffix
        for suffix in re.findall(r"`(skillruntime-[a-z-]+|-[a-z-]+)`", header)
    }
    assert listed == names
