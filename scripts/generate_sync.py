"""Generate the sync face of a distribution's async modules with ``unasync``.

The async module is the source; its sync twin is written from it, never by hand. Each
distribution that has twins lists them in ``<distribution>/unasync.toml``::

    [[file]]
    source = "src/skillruntime/aio/async_client.py"
    target = "src/skillruntime/aio/client.py"

    [replacements]          # token -> token, on top of unasync's own (AsyncIterator, ...)
    AsyncAioClient = "AioClient"
    "httpx.AsyncClient" = "httpx.Client"   # a dotted name is matched as one

Code that differs between the faces is real Python in the async source, in ``if`` statements
whose line carries a marker comment (the form of psycopg's generator)::

    if True:  # unasync: async
        await self._pools.aclose()        # the async face only: dropped
    else:  # unasync: sync
        self._http.close()                # the sync face only: kept, dedented

    if False:  # unasync: sync
        import threading                  # the sync face only (no async counterpart)

The ``else:`` branch is optional (an async-only region); the ``else:`` of a marked ``if True:``
carries ``# unasync: sync`` itself and cannot be an ``elif``. A branch holds whole statements:
where the faces differ in a block header (``async with lock.get():`` against ``with lock:``), a
decorator or a signature, the source binds the differing part first (``lock = ...`` in each
branch, then ``async with lock:``) or defines both variants of the function in the branches.
A branch's lines are dedented to the ``if``'s indentation (the lines of a multi-line string
too, as a docstring wants). The sync face's docstring of a module, class or function is::

    '''The async face's docstring.'''

    if False:  # unasync: sync docstring
        '''The sync face's docstring.'''

right after the docstring it replaces (in a module, after it and the ``from __future__``
imports that follow it): both are strings the parser sees, the async one stays ``__doc__``.
In the async source both branches are parsed, compiled (checked here: ``yield from`` in an
``async def`` is an error even in the sync branch), formatted and linted; mypy skips the sync
branch (``always_true = ["True"]``, ``always_false = ["False"]`` in ``pyproject.toml``, as it
skips the else of ``if TYPE_CHECKING:``) and checks that code in the generated module. A lint
rule that only the sync face triggers is silenced with ``# noqa: RULE, RUF100`` (``RUF100`` for
the source, where the rule does not fire). The comment form of earlier versions (sync lines
commented out between ``# unasync: sync`` and ``# unasync: end``) is refused, as is a marker
anywhere else than on these lines, and a nested region.

A generated file is the source, its regions resolved, with ``async``/``await`` removed and the
replacements applied to names (also as whole words inside docstrings and comments). It starts
with a header saying it is generated, and is put through ``ruff check --fix`` and
``ruff format`` so that it is stable (the fix also drops the imports only the async face uses);
a generated file that ruff still finds fault with is an error.

Usage: ``python scripts/generate_sync.py [--check] [DISTRIBUTION_DIR ...]`` (default: every
``*/unasync.toml`` of the repository). With ``--check`` nothing is written: the exit status is 1
and the files that differ from their regeneration are named on stderr.
"""

from __future__ import annotations

import argparse
import ast
import io
import itertools
import re
import subprocess
import sys
import tempfile
import tokenize as std_tokenize
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import tokenize_rt  # type: ignore[import-untyped]
import unasync  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent

HEADER = (
    "# Generated from {source} by scripts/generate_sync.py: do not edit.\n"
    "# Edit the async source, then run `python scripts/generate_sync.py`.\n"
)

_MARKER = re.compile(r"#\s*unasync:\s*([^#]*?)\s*(?:#.*)?$")
_LEGACY = re.compile(r"^\s*#\s*unasync:\s*(async|sync|end)\s*$")
_ELSE = re.compile(r"^else\s*:")


class MarkerError(ValueError):
    """A marked region is malformed (misplaced, nested, or in the old comment form)."""


@dataclass(frozen=True)
class Twin:
    """One async source and the sync file generated from it (paths absolute)."""

    source: Path
    target: Path


@dataclass(frozen=True)
class Config:
    """A distribution's ``unasync.toml``: its twins and its token replacements."""

    twins: tuple[Twin, ...]
    replacements: Mapping[str, str]


def load_config(path: Path) -> Config:
    """Read ``path`` (an ``unasync.toml``); file paths are relative to its directory."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    base = path.parent
    twins = tuple(
        Twin(source=base / entry["source"], target=base / entry["target"])
        for entry in data.get("file", [])
    )
    return Config(twins=twins, replacements=dict(data.get("replacements", {})))


@dataclass(frozen=True)
class _Edit:
    """Lines ``first``..``last`` (1-based, inclusive) of the source replaced by ``lines``."""

    first: int
    last: int
    lines: tuple[str, ...]


def _markers(text: str) -> dict[int, str]:
    """The ``# unasync: ...`` comments of ``text`` by line; the old comment form is refused."""
    found: dict[int, str] = {}
    lines = text.splitlines()
    try:
        tokens = list(std_tokenize.generate_tokens(io.StringIO(text).readline))
    except (std_tokenize.TokenError, SyntaxError) as exc:
        raise MarkerError(f"the source does not tokenize: {exc}") from exc
    for token in tokens:
        if token.type != std_tokenize.COMMENT:
            continue
        match = _MARKER.match(token.string)
        if match is None:
            continue
        row = token.start[0]
        if _LEGACY.match(lines[row - 1]):
            raise MarkerError(
                f"line {row}: a marker comment on its own line is the old comment form of "
                "marked regions; write 'if True:  # unasync: async' ... "
                "'else:  # unasync: sync' with real code in both branches"
            )
        found[row] = match.group(1)
    return found


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _dedent(lines: Sequence[str], first: int, last: int, to: str) -> tuple[str, ...]:
    """Lines ``first``..``last`` of ``lines`` moved from their block's indentation to ``to``."""
    block = [lines[number - 1] for number in range(first, last + 1)]
    code = [line for line in block if line.strip()]
    if not code:
        return ()
    step = _indent(code[0])
    out: list[str] = []
    for offset, line in enumerate(block):
        if not line.strip():
            out.append("\n")
        elif line.startswith(step):
            out.append(to + line[len(step) :])
        else:
            raise MarkerError(
                f"line {first + offset}: less indented than the first line of its branch"
            )
    return tuple(out)


def _block_end(lines: Sequence[str], last: int, indent: str) -> int:
    """``last`` extended over the comment lines right after it that are indented deeper than
    ``indent`` (they belong to the block that ends at ``last``)."""
    while last < len(lines):
        line = lines[last]
        stripped = line.lstrip()
        if not stripped.startswith("#") or len(_indent(line)) <= len(indent):
            break
        last += 1
    return last


def _is_string(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _parents(tree: ast.AST) -> Iterator[tuple[ast.AST, list[ast.stmt]]]:
    """Every statement list of ``tree`` with the node holding it."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield node, body
        for handler in getattr(node, "handlers", ()):
            yield handler, handler.body
        for case in getattr(node, "cases", ()):
            yield case, case.body


def _docstring_edits(
    lines: Sequence[str], parent: ast.AST, body: list[ast.stmt], index: int, node: ast.If
) -> list[_Edit]:
    """The edits of an ``if False:  # unasync: sync docstring`` at ``body[index]``."""
    where = f"line {node.lineno}"
    if node.orelse or len(node.body) != 1 or not _is_string(node.body[0]):
        raise MarkerError(f"{where}: a sync docstring is one string, without an else")
    before = body[:index]
    future = [
        stmt
        for stmt in before[1:]
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
    ]
    if (
        not before
        or not _is_string(before[0])
        or len(future) != len(before) - 1
        or (future and not isinstance(parent, ast.Module))
    ):
        raise MarkerError(
            f"{where}: a sync docstring must follow the docstring it replaces (in a module, "
            "after the 'from __future__' imports that follow it)"
        )
    docstring = before[0]
    end = docstring.end_lineno or docstring.lineno
    if lines[docstring.lineno - 1][: docstring.col_offset].strip():
        raise MarkerError(f"line {docstring.lineno}: a docstring must start its line")
    indent = _indent(lines[node.lineno - 1])
    first = node.lineno
    while first > 1 and not lines[first - 2].strip():
        first -= 1  # the blank lines that separate it go with it
    last = _block_end(lines, node.end_lineno or node.lineno, indent)
    replacement = _dedent(lines, node.lineno + 1, last, indent)
    return [_Edit(docstring.lineno, end, replacement), _Edit(first, last, ())]


def _region_edits(lines: Sequence[str], node: ast.If, marker: str, used: set[int]) -> list[_Edit]:
    """The edits of one marked ``if`` (``marker`` is the text after ``unasync:``)."""
    where = f"line {node.lineno}"
    test = node.test
    constant = test.value if isinstance(test, ast.Constant) else None
    indent = _indent(lines[node.lineno - 1])
    if node.body[0].lineno == node.lineno:
        raise MarkerError(f"{where}: a marked if's body starts on the next line")
    if marker == "async":
        if constant is not True:
            raise MarkerError(f"{where}: '# unasync: async' marks an 'if True:'")
        if not node.orelse:
            last = _block_end(lines, node.end_lineno or node.lineno, indent)
            return [_Edit(node.lineno, last, ())]
        body_end = node.body[-1].end_lineno or node.body[-1].lineno
        else_line = None
        for number in range(body_end + 1, node.orelse[0].lineno + 1):
            line = lines[number - 1]
            if _indent(line) == indent and line.strip():
                stripped = line.strip()
                if stripped.startswith("elif"):
                    raise MarkerError(f"line {number}: a marked if has no elif")
                if _ELSE.match(stripped):
                    else_line = number
                    break
        if else_line is None:
            raise MarkerError(f"{where}: the else of a marked if must be on its own line")
        if _marker_at(lines, else_line) != "sync":
            raise MarkerError(f"line {else_line}: the else of a marked if says '# unasync: sync'")
        used.add(else_line)
        first_sync = node.orelse[0]
        if first_sync.lineno == else_line:
            raise MarkerError(f"line {else_line}: the else's body starts on the next line")
        last = _block_end(lines, node.end_lineno or node.lineno, indent)
        return [_Edit(node.lineno, last, _dedent(lines, else_line + 1, last, indent))]
    if marker == "sync":
        if constant is not False or node.orelse:
            raise MarkerError(
                f"{where}: '# unasync: sync' marks an 'else:' or an 'if False:' without else"
            )
        last = _block_end(lines, node.end_lineno or node.lineno, indent)
        return [_Edit(node.lineno, last, _dedent(lines, node.lineno + 1, last, indent))]
    raise MarkerError(f"{where}: unknown marker '# unasync: {marker}'")


def _marker_at(lines: Sequence[str], number: int) -> str | None:
    match = _MARKER.search(lines[number - 1])
    return match.group(1) if match else None


def resolve_markers(text: str) -> str:
    """The sync lines of ``text``: each marked ``if`` replaced by its sync branch (dedented) or
    dropped, each sync docstring put in place of the docstring it follows."""
    markers = _markers(text)
    try:
        tree = ast.parse(text)
        compile(tree, "<async source>", "exec", dont_inherit=True)  # both branches, as Python
    except SyntaxError as exc:
        raise MarkerError(f"line {exc.lineno}: the source does not compile: {exc.msg}") from exc
    if not markers:
        return text
    lines = text.splitlines(keepends=True)
    used: set[int] = set()
    edits: list[_Edit] = []
    for parent, body in _parents(tree):
        for index, node in enumerate(body):
            marker = markers.get(node.lineno)
            if marker is None:
                continue
            if not isinstance(node, ast.If):
                raise MarkerError(f"line {node.lineno}: a marker belongs on an if or its else")
            used.add(node.lineno)
            if marker == "sync docstring":
                if not (isinstance(node.test, ast.Constant) and node.test.value is False):
                    raise MarkerError(f"line {node.lineno}: a sync docstring is 'if False:'")
                edits.extend(_docstring_edits(lines, parent, body, index, node))
            else:
                edits.extend(_region_edits(lines, node, marker, used))
    for number in sorted(set(markers) - used):
        raise MarkerError(
            f"line {number}: '# unasync: {markers[number]}' is not on a marked if or its else"
        )
    edits.sort(key=lambda edit: edit.first)
    for before, after in itertools.pairwise(edits):
        if after.first <= before.last:
            raise MarkerError(f"line {after.first}: marked regions are nested or overlap")
    out = list(lines)
    for edit in reversed(edits):
        out[edit.first - 1 : edit.last] = edit.lines
    return "".join(out)


def _join_dotted(tokens: list[tokenize_rt.Token], dotted: set[str]) -> list[tokenize_rt.Token]:
    """Merge each ``NAME . NAME ...`` run that spells a dotted replacement key into one token."""
    if not dotted:
        return tokens
    longest = max(key.count(".") for key in dotted)
    out: list[tokenize_rt.Token] = []
    i = 0
    while i < len(tokens):
        merged = False
        if tokens[i].name == "NAME":
            for parts in range(longest, 0, -1):
                end = i + 2 * parts + 1
                run = tokens[i:end]
                if len(run) != 2 * parts + 1:
                    continue
                if all(t.name == "NAME" for t in run[::2]) and all(t.src == "." for t in run[1::2]):
                    spelled = "".join(t.src for t in run)
                    if spelled in dotted:
                        out.append(run[0]._replace(src=spelled))
                        i = end
                        merged = True
                        break
        if not merged:
            out.append(tokens[i])
            i += 1
    return out


def _words(replacements: Mapping[str, str]) -> re.Pattern[str] | None:
    if not replacements:
        return None
    keys = sorted(replacements, key=len, reverse=True)
    return re.compile(r"(?<![\w.])(" + "|".join(re.escape(k) for k in keys) + r")(?!\w)")


def unasync_source(text: str, replacements: Mapping[str, str]) -> str:
    """``text`` (markers resolved) with ``async``/``await`` removed and names replaced."""
    rule = unasync.Rule("/", "/", additional_replacements=dict(replacements))
    tokens = tokenize_rt.src_to_tokens(text)
    tokens = _join_dotted(tokens, {key for key in replacements if "." in key})
    pattern = _words(rule.token_replacements)
    result: list[tokenize_rt.Token] = []
    for token in rule._unasync_tokens(tokens):
        if pattern is not None and token.name in ("STRING", "COMMENT", "FSTRING_MIDDLE"):
            words = pattern.sub(lambda m: rule.token_replacements[m.group(1)], token.src)
            result.append(token._replace(src=words))
        else:
            result.append(token)
    return str(tokenize_rt.tokens_to_src(result))


def _ruff(path: Path) -> None:
    """Make ``path`` stable: ``ruff check --fix`` (unused imports, import order) then
    ``ruff format``, with the repository's configuration."""
    ruff = Path(sys.executable).parent / "ruff"
    command = str(ruff) if ruff.exists() else "ruff"
    config = ["--config", str(ROOT / "pyproject.toml")]
    subprocess.run([command, "check", "--fix", "--quiet", *config, str(path)], check=True, cwd=ROOT)
    subprocess.run([command, "format", "--quiet", *config, str(path)], check=True, cwd=ROOT)


def generate(twin: Twin, replacements: Mapping[str, str]) -> str:
    """The text the sync file of ``twin`` must have."""
    with twin.source.open("rb") as handle:
        encoding, _ = std_tokenize.detect_encoding(handle.readline)
    text = twin.source.read_text(encoding=encoding)
    body = unasync_source(resolve_markers(text), replacements)
    header = HEADER.format(source=twin.source.name)
    # Beside the target, in its package, so that ruff classifies imports (first-party, same
    # package) and applies per-file settings exactly as it does to the target itself.
    handle, name = tempfile.mkstemp(
        prefix=f"_unasync_{twin.target.stem}_", suffix=".py", dir=twin.target.parent
    )
    path = Path(name)
    try:
        with open(handle, "w", encoding="utf-8") as scratch:
            scratch.write(header + body)
        _ruff(path)
        return path.read_text(encoding="utf-8")
    finally:
        path.unlink(missing_ok=True)


def configs(arguments: Sequence[str]) -> Iterator[Path]:
    """The ``unasync.toml`` files named by ``arguments`` (distribution directories), or all."""
    if arguments:
        for argument in arguments:
            yield (Path(argument).resolve() / "unasync.toml")
        return
    yield from sorted(ROOT.glob("*/unasync.toml"))


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate (or, with ``--check``, compare) every configured sync file; 1 on a difference."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail on a diff")
    parser.add_argument("distributions", nargs="*", help="distribution directories")
    options = parser.parse_args(argv)
    stale: list[Path] = []
    for config_path in configs(options.distributions):
        config = load_config(config_path)
        for twin in config.twins:
            expected = generate(twin, config.replacements)
            current = twin.target.read_text(encoding="utf-8") if twin.target.exists() else None
            if current == expected:
                continue
            if options.check:
                stale.append(twin.target)
            else:
                twin.target.write_text(expected, encoding="utf-8")
                print(f"generated {twin.target.relative_to(ROOT)}")  # noqa: T201
    for path in stale:
        print(  # noqa: T201
            f"{path.relative_to(ROOT)} differs from its async source: "
            "run python scripts/generate_sync.py",
            file=sys.stderr,
        )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
