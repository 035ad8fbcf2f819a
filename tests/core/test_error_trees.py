"""Each distribution's exceptions live in one ``errors`` module whose docstring draws their tree.

The tree is a literal block (after a line ending in ``::``): one class per line, indented four
columns per level (``├── ``, ``│   `` and ``└── `` count as indentation), its further bases in
parentheses after its name. The test reads it back and checks that every exception class the
module exports is drawn exactly once, under its first base and with its other bases named, so
the drawing cannot go stale when a class is added, moved or re-parented.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import re
from dataclasses import dataclass
from types import ModuleType

import pytest

ERROR_MODULES = [
    "skillruntime.core.errors",
    "skillruntime.aio.errors",
    "skillruntime.docker.errors",
    "skillruntime.opensandbox.errors",
    "skillruntime.mcp.errors",
    "skillruntime.viking.errors",
]
"""The errors module of every distribution that has exceptions of its own (skillruntime-local,
-openai-agents and -deepagents raise only core's)."""

_NODE = re.compile(r"^(?P<indent>[ │├└─]*)(?P<name>[A-Za-z_]\w*)(?:\s*\((?P<bases>[^)]*)\))?")


@dataclass(frozen=True)
class Node:
    name: str
    parent: str | None
    other_bases: tuple[str, ...]


def drawn_tree(doc: str) -> list[Node]:
    """The nodes of the first literal block of ``doc`` (its lines up to the next unindented one)."""
    lines = inspect.cleandoc(doc).splitlines()
    start = next(i for i, line in enumerate(lines) if line.rstrip().endswith("::")) + 1
    block: list[str] = []
    for line in lines[start:]:
        if line.strip() and not line.startswith(" "):
            break
        if line.strip():
            block.append(line)
    margin = min(len(line) - len(line.lstrip(" ")) for line in block)
    nodes: list[Node] = []
    stack: list[str] = []
    for line in block:
        match = _NODE.match(line[margin:])
        assert match is not None, f"not a tree line: {line!r}"
        depth, rest = divmod(len(match["indent"]), 4)
        assert rest == 0, f"misaligned tree line: {line!r}"
        assert depth <= len(stack), f"tree line deeper than its parent: {line!r}"
        del stack[depth:]
        bases = tuple(b.strip() for b in (match["bases"] or "").split(",") if b.strip())
        nodes.append(Node(match["name"], stack[-1] if stack else None, bases))
        stack.append(match["name"])
    return nodes


def _resolve(module: ModuleType, name: str) -> object:
    value = getattr(module, name, None)
    if value is None:
        value = getattr(builtins, name, None)
    assert value is not None, f"{name} drawn in the tree is neither in the module nor a builtin"
    return value


def exported_exceptions(module: ModuleType) -> dict[str, type[BaseException]]:
    return {
        name: value
        for name in module.__all__
        if isinstance(value := getattr(module, name), type) and issubclass(value, BaseException)
    }


@pytest.mark.parametrize("module_name", ERROR_MODULES)
def test_every_exported_exception_is_drawn_once_under_its_bases(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__doc__
    nodes = drawn_tree(module.__doc__)
    exported = exported_exceptions(module)
    assert exported, f"{module_name} exports no exception class"

    drawn = [node.name for node in nodes if node.name in exported]
    assert sorted(drawn) == sorted(exported), "the tree must draw each exported exception once"
    for node in nodes:
        cls = exported.get(node.name)
        if cls is None:
            continue  # a base from elsewhere (core, builtins) drawn as a root
        expected = [_resolve(module, name) for name in (node.parent, *node.other_bases) if name]
        assert set(cls.__bases__) == set(expected or [Exception]), (
            f"{node.name} is drawn under {node.parent} with {node.other_bases}, "
            f"but its bases are {[base.__name__ for base in cls.__bases__]}"
        )
        assert cls.__module__ == module_name, f"{node.name} is defined outside {module_name}"


def test_the_tree_reader_sees_levels_and_further_bases() -> None:
    doc = """Title.

    Text::

        Root
        ├── A (ValueError)
        │   └── B
        └── C (A, LookupError): text
        Other
    """
    assert drawn_tree(doc) == [
        Node("Root", None, ()),
        Node("A", "Root", ("ValueError",)),
        Node("B", "A", ()),
        Node("C", "Root", ("A", "LookupError")),
        Node("Other", None, ()),
    ]


@pytest.mark.parametrize(
    ("old_module", "name", "new_module"),
    [
        ("skillruntime.core.skills.spec", "InvalidSkillError", "skillruntime.core.errors"),
        ("skillruntime.core.skills.spec", "SkillProblem", "skillruntime.core.errors"),
        (
            "skillruntime.core.conversations.spi",
            "ConversationStoreError",
            "skillruntime.core.errors",
        ),
        ("skillruntime.core.conversations", "ConversationStoreError", "skillruntime.core.errors"),
        ("skillruntime.core.conversations.leases", "LeaseTimeoutError", "skillruntime.core.errors"),
        (
            "skillruntime.core.conversations.lease_rules",
            "LeaseLostError",
            "skillruntime.core.errors",
        ),
        ("skillruntime.core.artifacts.spi", "PackageRejectedError", "skillruntime.core.errors"),
        ("skillruntime.core.artifacts", "ArtifactNotFoundError", "skillruntime.core.errors"),
        ("skillruntime.core.plugins.registry", "RuntimeOptionsError", "skillruntime.core.errors"),
        ("skillruntime.core.files.linear_regex", "InvalidPatternError", "skillruntime.core.errors"),
        ("skillruntime.docker.commands", "CommandNotStartedError", "skillruntime.docker.errors"),
        (
            "skillruntime.opensandbox.command_plans",
            "CommandOutcomeUnknownError",
            "skillruntime.opensandbox.errors",
        ),
        (
            "skillruntime.opensandbox.commands",
            "CommandNotStartedError",
            "skillruntime.opensandbox.errors",
        ),
        ("skillruntime.mcp.resources", "ResourceUriError", "skillruntime.mcp.errors"),
        ("skillruntime.mcp", "ResourceUriError", "skillruntime.mcp.errors"),
    ],
)
def test_moved_exceptions_are_still_exported_by_their_old_modules(
    old_module: str, name: str, new_module: str
) -> None:
    old = importlib.import_module(old_module)
    assert getattr(old, name) is getattr(importlib.import_module(new_module), name)
