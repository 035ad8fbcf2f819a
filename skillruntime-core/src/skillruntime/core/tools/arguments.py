"""Argument models of the tools; their JSON Schemas are what the model sees.

Field names are snake_case. The camelCase spellings of the Java original (``filePath``,
``workingDirectory``, ``maxResult``, ``outputMode``, …) are accepted as aliases so prompts written
for it keep working. Unknown arguments are refused so a typo is reported rather than ignored.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

__all__ = [
    "BashArguments",
    "EditArguments",
    "GlobArguments",
    "GrepArguments",
    "LsArguments",
    "PublishFileArguments",
    "ReadArguments",
    "SkillArguments",
    "WriteArguments",
]


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class SkillArguments(_Arguments):
    command: str = Field(
        min_length=1,
        validation_alias=AliasChoices("command", "name", "skill"),
        description='The skill name (no arguments), e.g. "pdf" or "csv-report".',
    )


class BashArguments(_Arguments):
    command: str = Field(min_length=1, description="The shell command to run.")
    timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        validation_alias=AliasChoices("timeout_seconds", "timeout"),
        description="Timeout in seconds (default 120, at most 600; larger values are lowered).",
    )
    working_directory: str | None = Field(
        default=None,
        validation_alias=AliasChoices("working_directory", "workingDirectory", "cwd"),
        description="Runtime directory to run in (default: the runtime's working directory).",
    )


class ReadArguments(_Arguments):
    file_path: str = Field(
        min_length=1,
        validation_alias=AliasChoices("file_path", "filePath", "path"),
        description="Runtime path of the file (absolute, or relative to the working directory).",
    )
    offset: int | None = Field(
        default=None, ge=1, description="1-based number of the first line to show (default 1)."
    )
    limit: int | None = Field(
        default=None, ge=1, description="Number of lines to show (default 2000)."
    )


class WriteArguments(_Arguments):
    file_path: str = Field(
        min_length=1,
        validation_alias=AliasChoices("file_path", "filePath", "path"),
        description="Runtime path of the file to create or overwrite.",
    )
    content: str = Field(description="The complete new content of the file (UTF-8 text).")


class EditArguments(_Arguments):
    file_path: str = Field(
        min_length=1,
        validation_alias=AliasChoices("file_path", "filePath", "path"),
        description="Runtime path of the file to edit.",
    )
    old_string: str = Field(
        validation_alias=AliasChoices("old_string", "oldString"),
        description="Exact text to replace; must occur exactly once unless replace_all is true.",
    )
    new_string: str = Field(
        validation_alias=AliasChoices("new_string", "newString"),
        description="Replacement text (empty string deletes old_string).",
    )
    replace_all: bool = Field(
        default=False,
        validation_alias=AliasChoices("replace_all", "replaceAll"),
        description="Replace every occurrence instead of requiring a unique one.",
    )


class LsArguments(_Arguments):
    path: str | None = Field(
        default=None, description="Runtime directory to list (default: the working directory)."
    )
    depth: int | None = Field(
        default=None, ge=1, description="Levels to recurse (default 1, at most 100)."
    )
    max_results: int | None = Field(
        default=None,
        ge=1,
        validation_alias=AliasChoices("max_results", "maxResult", "maxResults"),
        description="Maximum entries shown (default 1000, at most 5000).",
    )


class GlobArguments(_Arguments):
    pattern: str = Field(
        min_length=1,
        description=(
            "Glob pattern. Without '/', it matches file names at any depth ('*.py'); with '/', it "
            "matches the path relative to the search root ('src/*.py'), and '**/' matches zero or "
            "more directories ('src/**/*.py'). '*' and '?' never cross '/'; '{a,b}' and '[...]' "
            "are supported."
        ),
    )
    path: str | None = Field(
        default=None, description="Runtime directory to search (default: the working directory)."
    )


class GrepArguments(_Arguments):
    pattern: str = Field(min_length=1, description="Python regular expression to search for.")
    path: str | None = Field(
        default=None,
        description="Runtime file or directory to search (default: the working directory).",
    )
    glob: str | None = Field(
        default=None, description="Only search files matching this glob (same rules as glob)."
    )
    type: str | None = Field(
        default=None,
        description="Only search files of this type: py, js, ts, java, go, rust, json, yaml, md, "
        "sh, html, css, csv, txt.",
    )
    output_mode: Literal["content", "files_with_matches", "count"] = Field(
        default="files_with_matches",
        validation_alias=AliasChoices("output_mode", "outputMode"),
        description="content: matching lines; files_with_matches: paths (default); count: "
        "matches per file.",
    )
    context_before: int | None = Field(
        default=None,
        ge=0,
        validation_alias=AliasChoices("context_before", "contextBefore", "-B"),
        description="Lines of context before each match (content mode).",
    )
    context_after: int | None = Field(
        default=None,
        ge=0,
        validation_alias=AliasChoices("context_after", "contextAfter", "-A"),
        description="Lines of context after each match (content mode).",
    )
    context: int | None = Field(
        default=None,
        ge=0,
        validation_alias=AliasChoices("context", "-C"),
        description="Lines of context before and after (overrides the other two).",
    )
    show_line_numbers: bool = Field(
        default=True,
        validation_alias=AliasChoices("show_line_numbers", "showLineNumbers", "-n"),
        description="Show line numbers in content mode (default true).",
    )
    case_insensitive: bool = Field(
        default=False,
        validation_alias=AliasChoices("case_insensitive", "caseInsensitive", "-i"),
        description="Match case-insensitively.",
    )
    multiline: bool = Field(
        default=False,
        description="Match across lines: the pattern runs over the whole file and '.' matches "
        "newlines.",
    )
    head_limit: int | None = Field(
        default=None,
        ge=1,
        validation_alias=AliasChoices("head_limit", "headLimit"),
        description="Return at most this many result entries (lines, paths or counts).",
    )
    offset: int = Field(
        default=0, ge=0, description="Skip this many result entries first (for paging)."
    )


class PublishFileArguments(_Arguments):
    file_path: str = Field(
        min_length=1,
        validation_alias=AliasChoices("file_path", "filePath", "path"),
        description="Exact runtime path of an existing regular file; do not invent a host path.",
    )
    file_name: str | None = Field(
        default=None,
        validation_alias=AliasChoices("file_name", "fileName"),
        description="Name to publish under (default: the file's own name).",
    )
    content_type: str | None = Field(
        default=None,
        validation_alias=AliasChoices("content_type", "contentType"),
        description="MIME type (default: guessed from the name).",
    )
