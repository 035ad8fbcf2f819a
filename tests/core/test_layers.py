"""Every import inside core points down a layer, and no two modules of core import each other.

The test reads every module of ``skillruntime.core`` with :mod:`ast` and takes every import into
account: module level, under ``if TYPE_CHECKING:`` and inside functions. A module that no layer
claims fails the test (a new module must be placed), as does an import of a higher layer.
"""

from __future__ import annotations

import ast
import fnmatch
from dataclasses import dataclass
from pathlib import Path

import pytest

import skillruntime.core

CORE = "skillruntime.core"
CORE_DIR = Path(skillruntime.core.__file__).parent

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # the ground: versions, lazy exports, value types, the exception hierarchy
    ("ground", ("_version", "_lazy", "_moved", "errors", "_allowed_tools", "models")),
    # Agent Skills on disk: SKILL.md, discovery, upload policy, walking and digests
    ("skills", ("skills", "skills.*")),
    # audit events and spans: told by the layers above where to send events
    ("observability", ("observability", "observability.*")),
    # the file-system SPI, its derived operations, search, globbing, publishing
    ("files", ("files", "files.*")),
    # workspace snapshots: manifests, the sandbox listing, pure planning, the snapshot stores
    ("snapshots", ("snapshots", "snapshots.*")),
    # the runtime SPI, base classes, rules, workspaces, bridges, bounded output, closing
    ("runtime", ("runtime", "runtime.*")),
    # hook specifications, the registry, the runtime factory, listings, options
    ("plugins", ("plugins", "plugins.*")),
    # the skillruntime command and its shared error and progress helpers
    ("cli", ("cli", "cli.*")),
    # artifact stores (and their command group)
    ("artifacts", ("artifacts", "artifacts.*")),
    # conversation stores, leases, the one-writer guards, sweeps (and their command group)
    ("conversations", ("conversations", "conversations.*")),
    # workspace snapshots and restores through a runtime's public SPI, and the automatic ones
    # kept in a conversation's record
    ("durability", ("durability", "durability.*")),
    # the model-facing tools and the agent turn
    ("tools", ("tools", "tools.*")),
    # the conformance kit
    ("testing", ("testing", "testing.*")),
    # the package itself: lazy re-exports of the public names
    ("facade", ("",)),
)
"""Core's layers, lowest first: a module may import its own layer and the ones before it."""

ENTRY_POINT_LOADERS = {
    "plugins.registry": "loads the modules of the `skillruntime` entry-point group on first use",
    "cli.app": "imports a `skillruntime.cli` entry point only when its command runs",
    "_lazy": "imports the module of a lazily exported name on first access",
    "_moved": "imports the new home of a moved module or name when the old one is asked for",
}
"""The deliberate exception: modules that import by name at run time (never by an import
statement), so that start-up loads no plugin and no module it does not use."""


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    line: int
    where: str  # "module", "TYPE_CHECKING" or "function"


def _module_names() -> dict[str, Path]:
    names = {}
    for path in sorted(CORE_DIR.rglob("*.py")):
        parts = list(path.relative_to(CORE_DIR).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


MODULES = _module_names()


def _absolute(importer: str, is_package: bool, level: int, module: str | None) -> str:
    base = f"{CORE}.{importer}".rstrip(".").split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _core_module(absolute: str) -> str | None:
    """The core module an absolute name refers to (a name imported from a module counts as that
    module), or None outside core."""
    if absolute != CORE and not absolute.startswith(CORE + "."):
        return None
    name = absolute[len(CORE) + 1 :]
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def _imports(name: str, source: str | None = None) -> list[Import]:
    path = MODULES[name]
    is_package = path.name == "__init__.py"
    text = path.read_text(encoding="utf-8") if source is None else source
    found: list[Import] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                inner = "function"
            elif isinstance(child, ast.If) and _is_type_checking(child.test) and where == "module":
                inner = "TYPE_CHECKING"
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = (
                    _absolute(name, is_package, child.level, child.module)
                    if child.level
                    else child.module or ""
                )
                # ``from pkg import module`` imports the module, ``from module import name`` it
                targets = [f"{base}.{alias.name}" for alias in child.names]
            for target in targets:
                module = _core_module(target)
                if module is not None and module != name:
                    found.append(Import(name, module, child.lineno, inner))
            visit(child, inner)

    visit(ast.parse(text), "module")
    return found


def layer_of(name: str) -> int:
    """Index of the layer that claims module ``name`` (by its name relative to core)."""
    for index, (_layer, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            return index
    raise LookupError(name)


def _label(name: str) -> str:
    return f"{CORE}.{name}".rstrip(".")


def test_every_module_of_core_has_a_layer() -> None:
    unplaced = []
    for name in MODULES:
        try:
            layer_of(name)
        except LookupError:
            unplaced.append(_label(name))
    assert not unplaced, f"modules in no layer (add them to LAYERS): {unplaced}"


def test_a_module_in_no_layer_is_refused() -> None:
    with pytest.raises(LookupError):
        layer_of("no_such_concept.module")


def upward_imports() -> list[str]:
    """Every import of core that reaches a higher layer, as readable lines."""
    upward = []
    for name in MODULES:
        for found in _imports(name):
            if layer_of(found.target) > layer_of(name):
                upward.append(
                    f"{_label(name)}:{found.line} ({found.where}) imports "
                    f"{_label(found.target)}: {LAYERS[layer_of(name)][0]} -> "
                    f"{LAYERS[layer_of(found.target)][0]}"
                )
    return upward


def test_no_import_points_up_a_layer() -> None:
    upward = upward_imports()
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def _cycles() -> list[list[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name in MODULES:
        graph[name].update(found.target for found in _imports(name))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                connect(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(_label(member) for member in component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return components


def test_no_two_modules_of_core_import_each_other() -> None:
    cycles = _cycles()
    assert not cycles, f"modules that import each other (directly or around a loop): {cycles}"


def _imports_by_name(name: str) -> bool:
    """Whether module ``name`` imports at run time: ``import_module`` or ``__import__`` of a
    computed name, or ``.load()`` of an entry point (in a module that reads entry points)."""
    source = MODULES[name].read_text(encoding="utf-8")
    reads_entry_points = "importlib.metadata" in source
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            function = ast.unparse(node.func)
            computed = bool(node.args) and not isinstance(node.args[0], ast.Constant)
            if function.endswith(("import_module", "__import__")) and computed:
                return True
            loads = isinstance(node.func, ast.Attribute) and node.func.attr == "load"
            if reads_entry_points and loads and not node.args and not node.keywords:
                return True
    return False


def test_only_the_named_entry_point_loaders_import_by_name() -> None:
    by_name = {name for name in MODULES if _imports_by_name(name)}
    assert by_name == set(ENTRY_POINT_LOADERS)


def test_the_layer_check_sees_type_checking_and_function_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from ..models import Skill\n"
        "if TYPE_CHECKING:\n"
        "    from ..plugins.registry import hookimpl\n"
        "def later():\n"
        "    from ..tools import turn\n"
    )
    found = {(item.target, item.where) for item in _imports("files.spi", source)}
    assert found == {
        ("models", "module"),
        ("plugins.registry", "TYPE_CHECKING"),
        ("tools.turn", "function"),
    }
    assert layer_of("plugins.registry") > layer_of("files.spi")
    assert layer_of("tools.turn") > layer_of("files.spi")
