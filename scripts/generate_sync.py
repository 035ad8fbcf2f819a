"""Generate the sync face of a distribution's async modules with ``unasync``.

The async module is the source; its sync twin is written from it, never by hand. Each
distribution that has twins lists them in ``<distribution>/unasync.toml``::

    [[file]]
    source = "src/skillruntime/aio/async_client.py"
    target = "src/skillruntime/aio/client.py"

    [replacements]          # token -> token, on top of unasync's own (AsyncIterator, ...)
    AsyncAioClient = "AioClient"
    "httpx.AsyncClient" = "httpx.Client"   # a dotted name is matched as one

A generated file is the source with ``async``/``await`` removed and the replacements applied to
names (also as whole words inside docstrings and comments), after the marked regions are
resolved: the lines between ``# unasync: async`` and the next ``# unasync: sync`` or
``# unasync: end`` are dropped; the lines between ``# unasync: sync`` and ``# unasync: end``
are comments in the async source and are uncommented, at the indentation of the region's
opening marker (so a sync block header may replace an async one: the comments after an
``async with ...:`` line sit at its body's indentation, as ruff formats them). It starts with
a header saying it is generated, and is put through ``ruff check --fix`` and ``ruff format``
so that it is stable (the fix also drops the imports only the async face uses); a generated
file that ruff still finds fault with is an error.

Usage: ``python scripts/generate_sync.py [--check] [DISTRIBUTION_DIR ...]`` (default: every
``*/unasync.toml`` of the repository). With ``--check`` nothing is written: the exit status is 1
and the files that differ from their regeneration are named on stderr.
"""

from __future__ import annotations

import argparse
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

_MARKER = re.compile(r"^\s*# unasync: (async|sync|end)\s*$")
_COMMENTED = re.compile(r"^(\s*)# ?(.*)$")


class MarkerError(ValueError):
    """A marked region is malformed (unbalanced, nested or a sync line not commented)."""


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


def resolve_markers(text: str) -> str:
    """The sync lines of ``text``: async-only regions dropped, sync-only ones uncommented."""
    out: list[str] = []
    state = "both"
    indent = ""
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        match = _MARKER.match(line)
        if match:
            kind = match.group(1)
            if kind == "async" and state != "both":
                raise MarkerError(f"line {number}: '# unasync: async' inside a region")
            if kind == "sync" and state == "sync":
                raise MarkerError(f"line {number}: '# unasync: sync' inside a sync region")
            if kind == "end" and state == "both":
                raise MarkerError(f"line {number}: '# unasync: end' outside a region")
            if state == "both":
                indent = line[: len(line) - len(line.lstrip())]
            state = {"async": "async", "sync": "sync", "end": "both"}[kind]
            continue
        if state == "async":
            continue
        if state == "sync":
            commented = _COMMENTED.match(line)
            if commented is None:
                if line.strip():
                    raise MarkerError(f"line {number}: a sync-only line must be a comment")
                out.append(line)
                continue
            content = commented.group(2)
            out.append((indent + content if content else "") + "\n")
            continue
        out.append(line)
    if state != "both":
        raise MarkerError("a marked region is not closed with '# unasync: end'")
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
