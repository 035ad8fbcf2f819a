"""How the ``skillruntime`` command reports errors: one short line, a meaningful exit status.

Usage mistakes (a bad option value) exit with status 2, failures with status 1. Messages never
contain environment values or option values: pydantic errors are reported by field and reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from pydantic import ValidationError

# pydantic and the plugin registry are imported where an error is translated, not here: every
# command module imports this one, and a command's --help needs neither.

__all__ = [
    "FAILURE_EXIT_CODE",
    "USAGE_EXIT_CODE",
    "CliError",
    "CliUsageError",
    "as_cli_error",
    "validation_message",
]

USAGE_EXIT_CODE = 2
FAILURE_EXIT_CODE = 1


class CliError(click.ClickException):
    """A failure: a short ``Error: ...`` message and exit status 1."""

    exit_code = FAILURE_EXIT_CODE


class CliUsageError(CliError):
    """A usage mistake (a bad option value): a short ``Error: ...`` message and exit status 2."""

    exit_code = USAGE_EXIT_CODE


def validation_message(error: ValidationError) -> str:
    """The reasons of a pydantic error by field, without the rejected input values."""
    parts = []
    for item in error.errors(include_input=False, include_url=False):
        location = ".".join(str(part) for part in item["loc"])
        parts.append(f"{location}: {item['msg']}" if location else item["msg"])
    return "; ".join(parts)


def as_cli_error(error: Exception) -> CliError:
    """Translate an exception into a short CLI error; never includes environment values."""
    from pydantic import ValidationError

    from ..errors import SkillRuntimeError
    from ..plugins.registry import RuntimeOptionsError

    if isinstance(error, RuntimeOptionsError):
        return CliUsageError(str(error))
    if isinstance(error, ValidationError):
        return CliUsageError(f"invalid {error.title}: {validation_message(error)}")
    if isinstance(error, SkillRuntimeError | OSError | ValueError):
        return CliError(str(error) or type(error).__name__)
    return CliError(
        f"unexpected {type(error).__name__}: {error} (run with --debug for the traceback)"
    )
