"""What the docs say about the repository agrees with the repository.

- Every ``pip install`` line of a shell block in README.md and docs/ works from a clone as written:
  a local path names an existing distribution folder, and a distribution of this repository named
  by its bare project name (not on an index yet) stands only on a line marked
  ``# once published``.
- The list of distributions is one list: every folder holding a ``pyproject.toml`` with a
  ``[project]`` table appears in the README's and docs/architecture.md's tables, in the
  CHANGELOG's header, and the architecture page's count in words matches.
- The architecture table's "depends on" column names each distribution's own required
  dependencies and no other's.
- The lists of sweep reapers and of exclusive runtimes (cli.md, conversation-stores.md, async.md)
  name every installed runtime that has one.
- The README's runtime picker has a row for every installed runtime, and its quick start says
  that the second command is the contributors' full suite and what it needs.
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


_DEPENDENCY_ALIASES = {"skillruntime-core": "core", "tree-sitter-bash": "bash grammar"}
"""How the architecture table names a dependency that it does not spell as its project name."""


def _dependencies(folder: str) -> set[str]:
    """The project names of a distribution's required dependencies, lower-cased."""
    project = tomllib.loads((ROOT / folder / "pyproject.toml").read_text(encoding="utf-8"))
    return {_requirement_name(item).lower() for item in project["project"]["dependencies"]}


def _names(text: str, candidates: set[str]) -> set[str]:
    """The candidates that ``text`` names as whole words (``tree-sitter`` is not in
    ``tree-sitter-bash``)."""
    return {
        name
        for name in candidates
        if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE)
    }


def test_the_architecture_table_lists_each_distribution_s_own_dependencies() -> None:
    """Its "depends on" column names every required dependency of the row's distribution and
    no dependency that only another distribution has (it once gave AIO `requests`, which only
    the viking client uses; AIO is on httpx)."""
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = dict(
        re.findall(
            r"^\| `(skillruntime-[a-z-]+)` \|(?:[^|\n]*\|){2}([^|\n]*)\|", architecture, re.M
        )
    )
    folders = distributions()
    assert set(rows) == set(folders)
    declared = {name: _dependencies(folder) for name, folder in folders.items()}
    everyone = set().union(*declared.values()) - set(_DEPENDENCY_ALIASES)
    for name, column in rows.items():
        own = declared[name]
        missing = {
            dependency
            for dependency in own
            if _DEPENDENCY_ALIASES.get(dependency, dependency) not in column.lower()
        }
        assert not missing, f"{name}: the table leaves out {sorted(missing)}"
        foreign = _names(column, everyone) - own
        assert not foreign, f"{name}: the table lists {sorted(foreign)}, not a dependency of it"


_DISPLAY_NAMES = {"local": "local", "opensandbox": "OpenSandbox", "aio": "AIO", "docker": "Docker"}
"""How the pages name each runtime in prose."""


def _paragraph(page: str, start: str) -> str:
    """The paragraph of ``docs/<page>`` that begins with ``start`` (up to the blank line)."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    index = text.index(start)
    end = text.find("\n\n", index)
    return text[index : end if end != -1 else len(text)]


def test_every_installed_reaper_is_in_the_reaper_lists() -> None:
    """The lists of sweep reapers name every runtime that installs one (Docker was missing)."""
    from skillruntime.core.plugins.registry import available_conversation_reapers

    reapers = set(available_conversation_reapers())
    assert {"local", "opensandbox", "docker"} <= reapers
    lists = {
        "cli.md --runtime": _paragraph("cli.md", "| `--runtime NAME` | only conversations"),
        "conversation-stores.md hook": _paragraph("conversation-stores.md", "Reapers come from"),
        "conversation-stores.md destroy": _paragraph("conversation-stores.md", "* For each idle"),
        "async.md": _paragraph("async.md", "Expiry sweeps (`skillruntime conversations sweep`)"),
    }
    for where, text in lists.items():
        missing = {name for name in reapers if f"`{name}`" not in text}
        assert not missing, f"{where} leaves out the reapers {sorted(missing)}"


def test_every_runtime_that_takes_exclusive_is_in_the_exclusive_lists() -> None:
    """The lists of exclusive runtimes name every runtime whose options have ``exclusive``."""
    from skillruntime.core.plugins.registry import available_runtimes

    exclusive = {
        name
        for name, provider in available_runtimes().items()
        if "exclusive" in provider.options_model.model_fields
    }
    assert {"local", "opensandbox", "aio", "docker"} <= exclusive
    lists = {
        "conversation-stores.md": _paragraph(
            "conversation-stores.md", "Runtimes with a conversation take the lease"
        ),
        "async.md": _paragraph("async.md", "Exclusive conversations work the same way"),
    }
    for where, text in lists.items():
        missing = {name for name in exclusive if _DISPLAY_NAMES[name] not in text}
        assert not missing, f"{where} leaves out the exclusive runtimes {sorted(missing)}"


def _readme_section(title: str) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index(f"\n## {title}\n")
    end = readme.find("\n## ", start + 1)
    return readme[start : end if end != -1 else len(readme)]


def test_the_readme_helps_pick_among_every_runtime() -> None:
    """The picker table has a row for every installed runtime, and the diagram shows each."""
    from skillruntime.core.plugins.registry import available_runtimes

    runtimes = set(available_runtimes())
    picker = _readme_section("Which runtime do I pick")
    rows = set(re.findall(r"^\| `([a-z]+)` \|", picker, re.M))
    assert rows == runtimes
    [header] = [line for line in picker.splitlines() if line.startswith("| runtime |")]
    columns = header.count("|")
    for line in picker.splitlines():
        if line.startswith("| `"):
            assert line.count("|") == columns, line
    diagram = _readme_section("How it fits together")
    for name in runtimes:
        assert re.search(rf"^\s+.*\b{name}\b", diagram, re.M), name


def test_the_quick_start_says_the_second_command_is_the_contributors_suite() -> None:
    quick_start = _readme_section("Quick start")
    block = re.search(r"```bash\n(.*?)```", quick_start, re.S)
    assert block is not None
    lines = block.group(1).splitlines()
    assert lines[0].startswith("make demo")
    assert lines[-1] == "make test"
    preamble = " ".join(lines[1:-1])
    assert lines[1].startswith("# 2. for contributors: the full test suite")
    for need in ("PostgreSQL", "MariaDB", "root", "OpenViking"):
        assert need in preamble
