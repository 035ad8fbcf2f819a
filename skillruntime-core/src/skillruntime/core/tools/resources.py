"""Resource resolution: paths in tool arguments that name a file of an active skill.

Rules (``docs/agent-turn.md``, "Paths in tool arguments"), applied by
:class:`~skillruntime.core.tools.turn.SkillTurn` once at least one skill is active in the turn:

==========================================  =====================================================
Input                                       Result
==========================================  =====================================================
``workspace:<relative path>``               the workspace path, prefix removed (escapes refused)
canonical ``viking://…`` URI                the prepared copy of that file, if the URI is inside
                                            an active skill and in its file list; a configured
                                            but inactive skill's URI → ``SKILL_NOT_ACTIVE``;
                                            any other → ``SKILL_RESOURCE_NOT_FOUND``
relative path of exactly one active skill   rewritten to that skill's prepared copy
relative path of several active skills      ``SKILL_RESOURCE_AMBIGUOUS`` (use the URI)
relative path of a workspace file           unchanged
absolute path, ``http(s)://``, ``data:``    unchanged
any other relative path                     ``SKILL_RESOURCE_NOT_FOUND``
``..``, ``%2e``/``%2f``/``%5c``, ``\\``,    ``SKILL_RESOURCE_NOT_FOUND`` (refused, never
control characters, ``~``                   normalised away)
==========================================  =====================================================

Which arguments are local-file inputs is declared per tool (:data:`DEFAULT_RESOURCE_INPUTS`),
as JSON Pointers (RFC 6901) where ``*`` matches every key of an object or item of a list. Output
arguments (``write``'s and ``edit``'s ``file_path``) are not inputs and are never rewritten.
In a ``bash`` command, the path-like words are resolved: words with a ``/``, words with a
resource suffix (``.py``, ``.md``, …) and the first argument of an interpreter (``python``,
``sh``, ``cat``, …); redirection targets, options, words with shell expansions and inline code
(``sh -c '...'``, substitutions) are left alone. The words come from the bash grammar and each is
rewritten in place, so text inside another word is never changed.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .simple_command import command_word_spans

__all__ = [
    "DEFAULT_RESOURCE_INPUTS",
    "SKILL_NOT_ACTIVE",
    "SKILL_RESOURCE_AMBIGUOUS",
    "SKILL_RESOURCE_NOT_FOUND",
    "ActiveResources",
    "ResourceError",
    "ResourceKind",
    "ResourceResolver",
    "expand_pointer",
    "unsafe_relative_path",
    "validate_resource_inputs",
]

SKILL_RESOURCE_NOT_FOUND = "SKILL_RESOURCE_NOT_FOUND"
SKILL_RESOURCE_AMBIGUOUS = "SKILL_RESOURCE_AMBIGUOUS"
SKILL_NOT_ACTIVE = "SKILL_NOT_ACTIVE"

ResourceKind = Literal["local_file", "local_directory"]

DEFAULT_RESOURCE_INPUTS: Mapping[str, Mapping[str, ResourceKind]] = {
    "read": {"/file_path": "local_file"},
    "ls": {"/path": "local_directory"},
    "glob": {"/path": "local_directory"},
    "grep": {"/path": "local_directory"},
    "publish_file": {"/file_path": "local_file"},
}
"""The local-file inputs of this package's tools (``bash`` is handled by command parsing)."""

WORKSPACE_PREFIX = "workspace:"

_PASS_SCHEMES = ("http://", "https://", "data:", "file://")
_ENCODED = re.compile(r"%(2e|2f|5c|00)", re.IGNORECASE)
_SUFFIXES = frozenset(
    {
        *(".py", ".sh", ".bash", ".md", ".txt", ".json", ".yaml", ".yml", ".toml", ".csv"),
        *(".tsv", ".js", ".mjs", ".ts", ".rb", ".pl", ".r", ".sql", ".html", ".xml", ".ini"),
        *(".cfg", ".conf", ".pdf", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".docx", ".xlsx"),
        *(".pptx", ".zip", ".tar", ".gz", ".bin"),
    }
)
_INTERPRETERS = frozenset(
    {
        *("python", "python3", "bash", "sh", "zsh", "dash", "node", "ruby", "perl", "cat"),
        *("source", ".", "less", "head", "tail", "Rscript"),
    }
)
_WILDCARD = "*"
_INLINE_CODE_OPTIONS = frozenset({"-c", "-e", "-m", "--command", "--eval"})
_SAFE_REPLACEMENT = re.compile(r"[A-Za-z0-9_./@%+=:,-]+")
_EXPANSION = re.compile(r"[$`*?\[\]{}~]")


class ResourceError(ValueError):
    """A path in the arguments could not be resolved; :attr:`code` is the stable code and
    :attr:`cause` the code of the underlying failure, when it has one (e.g. the skill store's
    ``SKILL_UNAVAILABLE`` behind ``SKILL_MATERIALIZATION_FAILED``)."""

    def __init__(self, code: str, message: str, *, cause: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.cause = cause


@dataclass(frozen=True)
class ActiveResources:
    """One active skill as resolution sees it.

    ``uri`` is where the skill comes from (its listing location: a directory or a canonical
    ``viking://`` root); ``base_path`` is the runtime path of its prepared copy; ``files`` are its
    files as relative POSIX paths (``SKILL.md``, ``scripts/run.sh``, …).
    """

    name: str
    uri: str
    base_path: str
    files: frozenset[str]
    materialize: Callable[[], str] | None = field(default=None, compare=False)
    """For a skill not materialized yet: makes its files local and returns the base path."""

    def base(self) -> str:
        """The runtime base path, materializing the skill first if needed."""
        return self.materialize() if self.materialize is not None else self.base_path

    @property
    def canonical_root(self) -> str | None:
        """The ``viking://`` root URI, for a remote skill."""
        return self.uri.rstrip("/") if self.uri.startswith("viking://") else None

    def has(self, path: str, kind: ResourceKind) -> bool:
        """Whether ``path`` (relative, normalised) is a file — or, for a directory input, a
        directory — of this skill."""
        if path in self.files:
            return True
        if kind == "local_directory":
            prefix = path.rstrip("/") + "/"
            return path in ("", ".") or any(item.startswith(prefix) for item in self.files)
        return False


def unsafe_relative_path(path: str) -> str | None:
    """Why ``path`` may not name a resource (``None`` when it is a safe relative path).

    Refused: empty paths, absolute paths, ``..`` segments, backslashes, control characters,
    ``~``, and percent-encoded dots, slashes, backslashes or NULs.
    """
    if not path or not path.strip():
        return "the path is empty"
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in path):
        return "the path holds a control character"
    if "\\" in path:
        return "the path holds a backslash"
    if _ENCODED.search(path):
        return "the path holds a percent-encoded escape"
    if path.startswith(("/", "~")):
        return "the path is not relative"
    if ".." in path.split("/"):
        return "the path leaves its root ('..')"
    return None


_KINDS: frozenset[str] = frozenset({"local_file", "local_directory"})


def validate_resource_inputs(
    inputs: Mapping[str, Mapping[str, ResourceKind]],
) -> dict[str, dict[str, ResourceKind]]:
    """A checked copy of ``resource_inputs`` (tool name → JSON Pointer → kind).

    Raises :class:`ValueError` naming the offending entry when ``inputs`` is not a mapping of
    tool names to mappings, a pointer is not a string starting with ``/`` (RFC 6901; the empty
    pointer, the whole arguments object, is no string input either) or a kind is not
    ``"local_file"`` or ``"local_directory"``.
    """
    if not isinstance(inputs, Mapping):
        raise ValueError(
            f"resource_inputs must map tool names to {{pointer: kind}}, not {type(inputs).__name__}"
        )
    checked: dict[str, dict[str, ResourceKind]] = {}
    for tool, pointers in inputs.items():
        if not isinstance(tool, str) or not isinstance(pointers, Mapping):
            raise ValueError(
                f"resource_inputs[{tool!r}] must map JSON Pointers to kinds, "
                f"not {type(pointers).__name__}"
            )
        entry: dict[str, ResourceKind] = {}
        for pointer, kind in pointers.items():
            if not isinstance(pointer, str) or not pointer.startswith("/"):
                raise ValueError(
                    f"resource_inputs[{tool!r}]: {pointer!r} is not a JSON Pointer to an "
                    "argument: it must start with '/' (e.g. '/file_path')"
                )
            if kind not in _KINDS:
                raise ValueError(
                    f"resource_inputs[{tool!r}][{pointer!r}]: kind {kind!r} is not "
                    "'local_file' or 'local_directory'"
                )
            entry[pointer] = kind
        checked[tool] = entry
    return checked


def _normalise(path: str) -> str:
    """A safe relative path without ``./`` segments or doubled slashes."""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    return "/".join(parts)


def expand_pointer(document: Any, pointer: str) -> list[tuple[tuple[str | int, ...], Any]]:
    """The ``(location, value)`` pairs a JSON Pointer with ``*`` wildcards selects.

    ``""`` selects the document; ``*`` every key of an object or index of a list; ``~0``/``~1``
    escape ``~`` and ``/``. Missing members select nothing. Raises :class:`ValueError` for a
    pointer that does not start with ``/``.
    """
    if pointer == "":
        return [((), document)]
    if not pointer.startswith("/"):
        raise ValueError(f"a JSON Pointer starts with '/': {pointer!r}")
    steps = [step.replace("~1", "/").replace("~0", "~") for step in pointer[1:].split("/")]
    found: list[tuple[tuple[str | int, ...], Any]] = [((), document)]
    for step in steps:
        following: list[tuple[tuple[str | int, ...], Any]] = []
        for location, node in found:
            if isinstance(node, Mapping):
                keys: Iterable[str] = list(node) if step == _WILDCARD else [step]
                following.extend(((*location, key), node[key]) for key in keys if key in node)
            elif isinstance(node, list):
                if step == _WILDCARD:
                    following.extend(((*location, i), item) for i, item in enumerate(node))
                elif step.isdigit() and int(step) < len(node):
                    following.append(((*location, int(step)), node[int(step)]))
        found = following
    return found


def _assign(document: Any, location: Sequence[str | int], value: Any) -> None:
    node = document
    for step in location[:-1]:
        node = node[step]
    node[location[-1]] = value


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


class ResourceResolver:
    """Resolves paths against the active skills of a turn and the workspace.

    ``skills`` are the active skills; ``inactive_roots`` maps the canonical root URIs of
    configured but inactive skills to their names (their URIs get ``SKILL_NOT_ACTIVE``);
    ``workspace_has(path)`` says whether a relative path exists in the workspace (relative to
    the call's working directory). :attr:`referenced` collects the URIs of the skills whose
    resources were resolved.
    """

    def __init__(
        self,
        skills: Sequence[ActiveResources],
        workspace_has: Callable[[str], bool],
        *,
        inactive_roots: Mapping[str, str] | None = None,
    ) -> None:
        self._skills = list(skills)
        self._workspace_has = workspace_has
        self._inactive_roots = dict(inactive_roots or {})
        self.referenced: list[str] = []

    def _refer(self, skill: ActiveResources) -> None:
        if skill.uri not in self.referenced:
            self.referenced.append(skill.uri)

    # -------------------------------------------------------------------- one path

    def resolve(self, value: str, kind: ResourceKind = "local_file") -> str:
        """The path ``value`` stands for (see the module's table); raises :class:`ResourceError`."""
        if value.startswith(WORKSPACE_PREFIX):
            path = value[len(WORKSPACE_PREFIX) :]
            reason = unsafe_relative_path(path)
            if reason is not None:
                raise ResourceError(
                    SKILL_RESOURCE_NOT_FOUND, f"unsafe workspace path {value!r}: {reason}"
                )
            return _normalise(path) or "."
        if value.startswith("viking://"):
            return self._resolve_uri(value, kind)
        if value.startswith(_PASS_SCHEMES) or value.startswith("/"):
            return value
        reason = unsafe_relative_path(value)
        if reason is not None:
            raise ResourceError(SKILL_RESOURCE_NOT_FOUND, f"refused path {value!r}: {reason}")
        path = _normalise(value)
        matches = [skill for skill in self._skills if skill.has(path, kind)]
        if len(matches) > 1:
            uris = ", ".join(f"{skill.uri.rstrip('/')}/{path}" for skill in matches)
            raise ResourceError(
                SKILL_RESOURCE_AMBIGUOUS,
                f"{value!r} is a file of several active skills; name one of: {uris}",
            )
        if matches:
            self._refer(matches[0])
            base = matches[0].base()
            return posixpath.join(base, path) if path else base
        if self._workspace_has(path):
            return value
        raise ResourceError(
            SKILL_RESOURCE_NOT_FOUND,
            f"{value!r} is no file of an active skill and not in the workspace "
            f"(write 'workspace:{value}' for a workspace path)",
        )

    def _resolve_uri(self, uri: str, kind: ResourceKind) -> str:
        for skill in self._skills:
            root = skill.canonical_root
            if root is None or not (uri == root or uri.startswith(root + "/")):
                continue
            relative = uri[len(root) + 1 :]
            reason = unsafe_relative_path(relative) if relative else None
            if reason is not None:
                raise ResourceError(SKILL_RESOURCE_NOT_FOUND, f"refused URI {uri!r}: {reason}")
            path = _normalise(relative)
            if path and not skill.has(path, kind):
                raise ResourceError(
                    SKILL_RESOURCE_NOT_FOUND, f"{uri!r} is not in the manifest of {skill.name}"
                )
            self._refer(skill)
            base = skill.base()
            return posixpath.join(base, path) if path else base
        for root, name in self._inactive_roots.items():
            if uri == root or uri.startswith(root.rstrip("/") + "/"):
                raise ResourceError(
                    SKILL_NOT_ACTIVE, f"skill {name!r} is not active in this turn; activate it"
                )
        raise ResourceError(SKILL_RESOURCE_NOT_FOUND, f"{uri!r} belongs to no active skill")

    def locate(
        self, value: str, kind: ResourceKind = "local_file"
    ) -> tuple[ActiveResources, str] | None:
        """The active skill and relative path ``value`` names, without materializing anything
        (``None`` for workspace paths, absolute paths and URLs); raises like :meth:`resolve`."""
        if value.startswith(WORKSPACE_PREFIX) or value.startswith(_PASS_SCHEMES):
            return None
        if value.startswith("/"):
            return None
        probe = ResourceResolver(
            [
                ActiveResources(skill.name, skill.uri, skill.uri, skill.files)
                for skill in self._skills
            ],
            self._workspace_has,
            inactive_roots=self._inactive_roots,
        )
        resolved = probe.resolve(value, kind)
        for skill in self._skills:
            inside = resolved == skill.uri or resolved.startswith(skill.uri + "/")
            if inside and probe.referenced == [skill.uri]:
                return skill, resolved[len(skill.uri) + 1 :]
        return None

    # ------------------------------------------------------------------ arguments

    def resolve_arguments(
        self, arguments: Mapping[str, Any], inputs: Mapping[str, ResourceKind]
    ) -> dict[str, Any]:
        """A copy of ``arguments`` with every declared string input resolved."""
        resolved: dict[str, Any] = _copy(arguments)
        for pointer, kind in inputs.items():
            for location, value in expand_pointer(resolved, pointer):
                if isinstance(value, str) and location:
                    _assign(resolved, location, self.resolve(value, kind))
        return resolved

    # -------------------------------------------------------------------- command

    def resolve_command(self, command: str) -> str:
        """``command`` with its path-like words resolved and rewritten.

        The words are those of the simple commands of the command's structure, read with the
        bash grammar (:func:`~.simple_command.command_word_spans`): each resolved word is
        replaced where it stands, quoted if needed, so the same text elsewhere — inside inline
        code (``sh -c '...'``), a substitution or another word — is never touched. A command the
        grammar cannot read is returned unchanged (the bash policy and the shell report it).
        Raises :class:`ResourceError` for a word that fails resolution.
        """
        commands = command_word_spans(command)
        if commands is None:
            return command
        rewrites: list[tuple[int, int, str]] = []
        for words in commands:
            program = ""
            before: str | None = ""
            for index, word in enumerate(words):
                previous, before = before, word.value
                token = word.value
                if token is None:
                    continue
                if index == 0:
                    program = posixpath.basename(token)
                    if not self._path_like(token, interpreter_argument=False):
                        continue
                elif previous in _INLINE_CODE_OPTIONS and program in _INTERPRETERS:
                    program = ""  # ``sh -c 'code'``: code, not a path
                    continue
                if (
                    any(char.isspace() for char in token)
                    or token.startswith("-")
                    or _EXPANSION.search(token)
                    or "=" in token
                    or not self._path_like(token, interpreter_argument=program in _INTERPRETERS)
                ):
                    continue
                target = self.resolve(token)
                if target != token:
                    rewrites.append((word.start, word.end, target))
                if index > 0:
                    program = ""  # only the interpreter's first argument is taken as a path
        return self._rewrite(command, rewrites)

    @staticmethod
    def _path_like(token: str, *, interpreter_argument: bool) -> bool:
        if token.startswith(WORKSPACE_PREFIX) or token.startswith("viking://"):
            return True
        if token.startswith(_PASS_SCHEMES) or token.startswith("/"):
            return False
        if "/" in token or interpreter_argument:
            return True
        suffix = posixpath.splitext(token)[1].lower()
        return suffix in _SUFFIXES

    @staticmethod
    def _rewrite(command: str, rewrites: Sequence[tuple[int, int, str]]) -> str:
        """``command`` with each ``(start, end, target)`` span replaced by ``target`` as one
        word (quoted when it is not made of safe characters only)."""
        parts: list[str] = []
        position = 0
        for start, end, target in sorted(rewrites):
            word = target if _SAFE_REPLACEMENT.fullmatch(target) else shlex.quote(target)
            parts.extend((command[position:start], word))
            position = end
        parts.append(command[position:])
        return "".join(parts)
