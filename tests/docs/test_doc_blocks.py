"""Every ```python block of README.md and docs/ runs as written.

Pages are found by globbing, so a new page is tested without touching this file. The blocks of
one page run in order in one namespace (a later block may use what an earlier one defined), in a
fresh temporary working directory holding a copy of ``examples/`` (``HOME`` and ``TMPDIR`` point
inside it too, so nothing a block writes lands outside the test's directory). A block that needs
a server names its setup in an HTML comment on the line before it, e.g.::

    <!-- doc-setup: opensandbox_double -->
    ```python
    ...
    ```

Each name is a fixture in ``tests/docs/conftest.py`` returning the names to define before the
block (and setting the environment variables the block's client reads); the comment is
invisible in rendered Markdown. Tracebacks point at the Markdown file and line.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp  # noqa: F401  (see below)
import pytest

from skillruntime.core.plugins.registry import reset_plugin_manager

# The MCP SDK's stdio client takes ``errlog=sys.stderr`` as a default bound when ``mcp`` is first
# imported. Importing it here, at collection, keeps that default on the real stream: a first import
# inside a click ``CliRunner`` (which swaps ``sys.stderr`` for an object without a file descriptor)
# would make every later stdio client in the process fail to start its server.

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_BLOCK = re.compile(
    r"^(?:<!--\s*doc-setup:(?P<setup>[^>]*)-->\n)?```python\n(?P<code>.*?)^```\s*$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class DocBlock:
    """One ```python block: where it starts, its code and the setups it names."""

    page: Path
    line: int
    code: str
    setups: tuple[str, ...]


def doc_blocks(page: Path) -> list[DocBlock]:
    """The python blocks of ``page`` in order."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in _BLOCK.finditer(text):
        line = text.count("\n", 0, match.start("code")) + 1
        setups = tuple((match.group("setup") or "").split())
        blocks.append(DocBlock(page, line, match.group("code"), setups))
    return blocks


def _pages_with_blocks() -> list[Path]:
    return [page for page in PAGES if doc_blocks(page)]


def test_the_pages_are_found_and_hold_blocks() -> None:
    names = {page.relative_to(ROOT).as_posix() for page in _pages_with_blocks()}
    assert {"README.md", "docs/tools.md", "docs/plugins.md"} <= names


def test_block_extraction_keeps_lines_and_setups(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# T\n\n```python\na = 1\n```\n\ntext\n<!-- doc-setup: one two -->\n```python\nb = a\n```\n"
    )
    first, second = doc_blocks(page)
    assert (first.line, first.code, first.setups) == (4, "a = 1\n", ())
    assert (second.line, second.code, second.setups) == (10, "b = a\n", ("one", "two"))


def _run_blocks(
    blocks: list[DocBlock],
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    directory: Path,
    scratch: Path,
) -> None:
    """Run ``blocks`` in order in one namespace, in ``directory`` (given a copy of ``examples/``);
    ``HOME`` and ``TMPDIR`` point into ``scratch``."""
    shutil.copytree(ROOT / "examples", directory / "examples")
    monkeypatch.chdir(directory)
    # Defaults under ~ and temporary files stay inside this test's directory too.
    monkeypatch.setenv("HOME", str(scratch / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    environment = dict(os.environ)  # a block may export variables, as a reader would
    namespace: dict[str, Any] = {"__name__": "__doc_block__"}
    try:
        for block in blocks:
            for setup in block.setups:
                namespace.update(request.getfixturevalue(setup))
            padded = "\n" * (block.line - 1) + block.code
            # dont_inherit: the block runs as a reader's script would, without this module's
            # ``from __future__ import annotations`` (which would hide a name used too early).
            exec(compile(padded, str(block.page), "exec", dont_inherit=True), namespace)
    finally:
        os.environ.clear()
        os.environ.update(environment)
        reset_plugin_manager()
        for value in namespace.values():
            close = getattr(value, "close", None)
            if callable(close) and type(value).__module__.startswith("skillruntime."):
                closing = close()
                if inspect.iscoroutine(closing):  # an async runtime a block left open
                    asyncio.run(closing)


@pytest.mark.parametrize(
    "page", _pages_with_blocks(), ids=lambda page: page.relative_to(ROOT).as_posix()
)
def test_python_blocks_run(
    page: Path,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _run_blocks(doc_blocks(page), request, monkeypatch, tmp_path, tmp_path)


STANDALONE_PAGES = ["docs/openai-agents.md"]
"""Pages whose every block also runs alone, as a reader who copies just that block runs it, and
writes nothing into its working directory (a clone of the repository, where it would be left as
an untracked file)."""


@pytest.mark.parametrize("page", STANDALONE_PAGES)
def test_each_block_runs_alone_and_leaves_the_working_directory_clean(
    page: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    blocks = doc_blocks(ROOT / page)
    assert blocks
    for index, block in enumerate(blocks):
        clone = tmp_path / f"block-{index}" / "clone"
        scratch = tmp_path / f"block-{index}" / "scratch"
        clone.mkdir(parents=True)
        scratch.mkdir()
        with monkeypatch.context() as patch:
            _run_blocks([block], request, patch, clone, scratch)
        left = sorted(path.name for path in clone.iterdir())
        assert left == ["examples"], f"{page}:{block.line} left {left} in the working directory"
