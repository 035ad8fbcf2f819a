"""Immutable value types of the SPI: skills, configs, execution requests/results, file info.

All models are pydantic v2 and frozen. Mappings are copied on construction, so a caller's dict
is never shared with (or changed by) a model. Environment values are excluded from ``repr``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ._allowed_tools import split_allowed_tools
from .errors import SkillPrepareError, SkillValidationError

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "ENV_NAME_PATTERN",
    "SHELL_RESERVED_NAMES",
    "BootstrapCommand",
    "FileInfo",
    "Skill",
    "SkillExecutionRequest",
    "SkillExecutionResult",
    "SkillPreparationRequest",
    "SkillRuntimeConfig",
    "validate_environment",
]

DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024
"""Default per-stream output bound of :class:`SkillExecutionRequest` (1 MiB)."""

ENV_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""Environment variable names accepted anywhere in skillruntime."""

SHELL_RESERVED_NAMES: frozenset[str] = frozenset(
    {
        # read-only in bash: assigning or exporting them fails the command
        "BASHOPTS",
        "BASH_VERSINFO",
        "EUID",
        "PPID",
        "SHELLOPTS",
        "UID",
        # set by bash itself: a given value is ignored or replaced
        "BASH",
        "BASHPID",
        "BASH_ARGC",
        "BASH_ARGV",
        "BASH_COMMAND",
        "BASH_EXECUTION_STRING",
        "BASH_LINENO",
        "BASH_SOURCE",
        "BASH_SUBSHELL",
        "BASH_VERSION",
        "DIRSTACK",
        "EPOCHREALTIME",
        "EPOCHSECONDS",
        "FUNCNAME",
        "GROUPS",
        "HISTCMD",
        "LINENO",
        "RANDOM",
        "SECONDS",
        "SRANDOM",
    }
)
"""Environment names refused everywhere: bash's read-only variables and the variables bash sets
itself, so a value given for them would make a command fail or silently not arrive."""


_UNENCODABLE = (
    "cannot be encoded as UTF-8: it holds a lone surrogate outside U+DC80..U+DCFF (the range "
    "that stands for bytes that are not UTF-8)"
)


def _encodable(text: str) -> bool:
    """Whether ``text`` has bytes to stand for: it encodes as UTF-8 with ``surrogateescape``, as
    every runtime sends commands, paths and environment values (a lone surrogate outside
    U+DC80..U+DCFF, which a JSON ``\\udXXX`` escape can carry, stands for nothing)."""
    try:
        text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return True


def validate_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """Return a copy of ``environment`` after checking names (never values appear in errors).

    Names must match :data:`ENV_NAME_PATTERN` and must not be one of
    :data:`SHELL_RESERVED_NAMES`; the error names the variable, never its value.
    """
    result: dict[str, str] = {}
    for name, value in environment.items():
        if not isinstance(name, str) or not ENV_NAME_PATTERN.fullmatch(name):
            raise ValueError(
                f"environment variable name {name!r} is invalid: names must match "
                "[A-Za-z_][A-Za-z0-9_]*"
            )
        if name in SHELL_RESERVED_NAMES:
            raise ValueError(
                f"environment variable {name} cannot be set: bash keeps it read-only or sets it "
                "itself, so commands would fail or not see the value"
            )
        if not isinstance(value, str):
            raise ValueError(f"environment variable {name} must have a string value")
        if "\x00" in value:
            raise ValueError(f"environment variable {name} must not contain a NUL character")
        if not _encodable(value):
            raise ValueError(f"environment variable {name} {_UNENCODABLE}")
        result[name] = value
    return result


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


class Skill(_Frozen):
    """A skill: its ``SKILL.md`` metadata and body plus the directory it lives in.

    ``base_path`` is the skill root directory (not the ``SKILL.md`` file). For a skill loaded from
    disk it is a host path; for a skill returned by :meth:`SkillRuntime.prepare` it is a path inside
    that runtime. ``frontmatter`` holds every frontmatter key as parsed from YAML.
    """

    name: str = Field(min_length=1)
    description: str = ""
    base_path: str = Field(min_length=1)
    frontmatter: dict[str, Any] = Field(default_factory=dict)
    body: str = ""

    def with_base_path(self, base_path: str) -> Skill:
        """Return a new skill identical to this one but located at ``base_path``."""
        return self.model_copy(update={"base_path": base_path}, deep=True)

    @property
    def allowed_tools(self) -> tuple[str, ...] | None:
        """The ``allowed-tools`` entries, or ``None`` when the skill does not restrict tools.

        Split by :func:`~skillruntime.core.skills.allowed_tools.split_allowed_tools` (whitespace and
        commas outside parentheses), exactly as the tool policy reads them; raises
        :class:`ValueError` for unbalanced parentheses.
        """
        return split_allowed_tools(self.frontmatter.get("allowed-tools"))

    @property
    def metadata(self) -> dict[str, Any]:
        """The ``metadata`` mapping of the frontmatter (empty when absent or not a mapping)."""
        raw = self.frontmatter.get("metadata")
        return dict(raw) if isinstance(raw, dict) else {}


class BootstrapCommand(_Frozen):
    """A command run once in the prepared skill root after the skill is copied/uploaded."""

    command: str = Field(min_length=1)
    timeout_seconds: float = Field(default=300.0, gt=0)

    @field_validator("command")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("bootstrap command must not be blank")
        if "\x00" in value:
            raise ValueError("bootstrap command must not contain a NUL character")
        return value


class SkillRuntimeConfig(_Frozen):
    """Per-skill runtime configuration: environment for every command and bootstrap steps.

    A skill's own bootstrap commands (``metadata.skillruntime.bootstrap`` in its ``SKILL.md``)
    always run when it is prepared, first; ``bootstrap`` adds commands run after them. With
    ``declared_bootstrap=False`` the declared commands are left out, so ``bootstrap`` replaces
    them (an empty ``bootstrap`` then runs nothing). The rule lives in
    :func:`~skillruntime.core.skills.resolve_skill_config`, which
    :meth:`SkillPreparationRequest.config_for` applies for every runtime.
    """

    environment: dict[str, str] = Field(default_factory=dict, repr=False)
    bootstrap: tuple[BootstrapCommand, ...] = ()
    declared_bootstrap: bool = True

    @field_validator("environment", mode="before")
    @classmethod
    def _check_environment(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return validate_environment(value)
        return value


class SkillPreparationRequest(_Frozen):
    """A batch of skills to prepare, with optional configs keyed by skill name."""

    skills: tuple[Skill, ...]
    configs: dict[str, SkillRuntimeConfig] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _configs_reference_known_skills(self) -> SkillPreparationRequest:
        names = {skill.name for skill in self.skills}
        unknown = sorted(name for name in self.configs if name not in names)
        if unknown:
            raise ValueError(
                "configs reference skills that are not in the request: " + ", ".join(unknown)
            )
        return self

    def config_for(self, skill: Skill) -> SkillRuntimeConfig:
        """The config ``skill`` is prepared with: the one given for it (an empty one when none
        was given) resolved against the bootstrap commands the skill declares, by
        :func:`~skillruntime.core.skills.resolve_skill_config`. The result lists every bootstrap
        command to run, in order, and has ``declared_bootstrap=False``, so resolving it again
        changes nothing.

        Raises :class:`~skillruntime.core.errors.SkillPrepareError` when the skill's
        ``metadata.skillruntime`` section is malformed (nothing is prepared).
        """
        try:
            return resolve_skill_config(skill, self.configs.get(skill.name))
        except SkillValidationError as exc:
            raise SkillPrepareError(
                f"Cannot prepare skill '{skill.name}': {exc}", skill_name=skill.name
            ) from exc


class SkillExecutionRequest(_Frozen):
    """One shell command to run in a runtime.

    ``working_directory`` of ``None`` means the runtime's default working directory.
    ``max_output_bytes`` bounds each of stdout and stderr separately.
    """

    command: str
    working_directory: str | None = None
    timeout_seconds: float = Field(default=120.0, gt=0)
    environment: dict[str, str] = Field(default_factory=dict, repr=False)
    max_output_bytes: int = Field(default=DEFAULT_MAX_OUTPUT_BYTES, ge=1024)

    @field_validator("command")
    @classmethod
    def _command_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("command must not be empty")
        if "\x00" in value:
            raise ValueError("command must not contain a NUL character")
        if not _encodable(value):
            raise ValueError(f"command {_UNENCODABLE}")
        return value

    @field_validator("working_directory")
    @classmethod
    def _cwd_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("working_directory must not be blank (use None for the default)")
        if value is not None and not _encodable(value):
            raise ValueError(f"working_directory {_UNENCODABLE}")
        return value

    @field_validator("environment", mode="before")
    @classmethod
    def _check_environment(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return validate_environment(value)
        return value


class SkillExecutionResult(_Frozen):
    """The normalised result of a command.

    A non-zero ``exit_code`` is a result, not an error. On timeout ``timed_out`` is true,
    ``exit_code`` is ``-1`` and the output produced before the kill is kept. When a stream went
    over the bound its head and tail are kept around a marker and its ``*_truncated`` flag is set.
    """

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    duration_seconds: float = Field(default=0.0, ge=0)
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def ok(self) -> bool:
        """True when the command finished in time with exit code 0."""
        return self.exit_code == 0 and not self.timed_out


class FileInfo(_Frozen):
    """Metadata of one runtime path.

    ``path`` is the full runtime path. ``size`` is in bytes (0 for directories or when unknown),
    ``modified_time`` seconds since the epoch (``None`` when unknown). ``is_special`` is true for
    an entry that is neither a regular file nor a directory (FIFO, socket, device): reads refuse
    it with :class:`~skillruntime.core.errors.NotRegularFileError` and walks skip it.
    """

    path: str
    is_directory: bool
    size: int = Field(default=0, ge=0)
    modified_time: float | None = None
    is_executable: bool = False
    is_special: bool = False

    @property
    def name(self) -> str:
        """The last component of ``path``."""
        stripped = self.path.rstrip("/")
        return stripped.rsplit("/", 1)[-1] if stripped else "/"


# ------------------------------------------------------------------- bootstrap metadata
# The rule of a skill's declared bootstrap (``metadata.skillruntime.bootstrap``) lives with the
# models so :meth:`SkillPreparationRequest.config_for` applies it without reaching up into
# ``skills``; :mod:`skillruntime.core.skills.spec` serves the same names.

_SHOWN = 60


def _show(value: Any) -> str:
    """A short, quoted rendering of a name or key for messages (never a long value)."""
    text = repr(value) if isinstance(value, str) else repr(str(value))
    return text if len(text) <= _SHOWN else text[: _SHOWN - 4] + "...'"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


def _bootstrap_problems(value: Any) -> list[str]:
    where = "'metadata.skillruntime.bootstrap'"
    if not isinstance(value, list):
        return [f"{where} must be a list of commands, not {_kind(value)}"]
    messages: list[str] = []
    for index, item in enumerate(value, start=1):
        if isinstance(item, str):
            if not item.strip():
                messages.append(f"{where} entry {index} is an empty command")
            continue
        if isinstance(item, Mapping):
            command = item.get("command")
            extra = set(item) - {"command", "timeout_seconds"}
            if not isinstance(command, str) or not command.strip():
                messages.append(f"{where} entry {index} needs a non-empty 'command' string")
            if "timeout_seconds" in item and _seconds(item["timeout_seconds"]) is None:
                messages.append(f"{where} entry {index} 'timeout_seconds' must be a number > 0")
            if extra:
                keys = ", ".join(sorted(_show(k) for k in extra))
                messages.append(f"{where} entry {index} has unknown keys: {keys}")
            continue
        messages.append(
            f"{where} entry {index} must be a command string or a mapping with 'command' and "
            f"'timeout_seconds', not {_kind(item)}"
        )
    return messages


def _seconds(value: Any) -> float | None:
    """A positive finite number of seconds from YAML text (``"30"``, ``"1.5"``) or a number."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        seconds = float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def skill_bootstrap_commands(skill: Skill) -> tuple[BootstrapCommand, ...]:
    """The bootstrap commands a skill declares under ``metadata.skillruntime.bootstrap``.

    Each entry is a command string or a mapping ``{command, timeout_seconds}``; they run in order
    in the prepared skill root. Returns ``()`` when the skill declares none; raises
    :class:`SkillValidationError` when the section is malformed.
    """
    section = skill.metadata.get("skillruntime")
    if section is None:
        return ()
    if not isinstance(section, Mapping):
        raise SkillValidationError(
            f"Skill '{skill.name}': 'metadata.skillruntime' must be a mapping"
        )
    if "bootstrap" not in section:
        return ()
    raw = section["bootstrap"]
    messages = _bootstrap_problems(raw)
    if messages:
        raise SkillValidationError(f"Skill '{skill.name}': " + "; ".join(messages))
    # Checked above: each item is a command string or a {command[, timeout_seconds]} mapping.
    return tuple(
        BootstrapCommand(command=item) if isinstance(item, str) else _bootstrap_command(item)
        for item in raw
    )


def resolve_skill_config(
    skill: Skill, config: SkillRuntimeConfig | None = None
) -> SkillRuntimeConfig:
    """The config ``skill`` is prepared with: its declared bootstrap and the given ``config``.

    This is the one rule of every entry point, applied by
    :meth:`SkillPreparationRequest.config_for` for every runtime:

    - the commands the skill declares (:func:`skill_bootstrap_commands`) run first, then the
      ``bootstrap`` commands of ``config`` (which *add* to them);
    - ``config.declared_bootstrap=False`` leaves the declared commands out: ``config.bootstrap``
      *replaces* them;
    - the environment is ``config``'s (a skill declares none).

    The result lists every command to run and has ``declared_bootstrap=False``, so resolving it
    again returns it unchanged. Raises :class:`SkillValidationError` when the skill's
    ``metadata.skillruntime`` section is malformed (only when the declared commands are used).
    """
    given = config if config is not None else SkillRuntimeConfig()
    if not given.declared_bootstrap:
        return given
    return SkillRuntimeConfig(
        environment=given.environment,
        bootstrap=skill_bootstrap_commands(skill) + given.bootstrap,
        declared_bootstrap=False,
    )


def _bootstrap_command(item: Mapping[str, Any]) -> BootstrapCommand:
    if "timeout_seconds" not in item:
        return BootstrapCommand(command=item["command"])
    seconds = _seconds(item["timeout_seconds"])
    assert seconds is not None  # checked by _bootstrap_problems
    return BootstrapCommand(command=item["command"], timeout_seconds=seconds)
