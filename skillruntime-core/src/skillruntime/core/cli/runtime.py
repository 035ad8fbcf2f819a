"""``skillruntime exec`` and ``skillruntime files``: commands that talk to one runtime.

Both build the runtime named by ``--runtime`` with
:func:`~skillruntime.core.plugins.registry.create_runtime` (``--option KEY=VALUE`` are its options,
``--conversation ID`` becomes the option ``conversation_id``) and close it when the command ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import shlex
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar, Union, get_args, get_origin

import click

from .errors import CliError, CliUsageError
from .progress import TransferProgress

if TYPE_CHECKING:
    from ..files.spi import SkillRuntimeFileSystem
    from ..models import Skill
    from ..plugins.registry import RuntimeProvider
    from ..runtime.spi import SkillRuntime

# The library (pydantic models, the plugin registry, the file SPI) is imported inside the
# commands, never here: `skillruntime exec --help` and `files get --help` then start as fast as
# the root help (tests/cli/test_cli_startup.py).

__all__ = [
    "TIMEOUT_EXIT_CODE",
    "exec_command",
    "files_group",
    "open_runtime",
    "parse_assignments",
    "runtime_options",
]

TIMEOUT_EXIT_CODE = 124
"""Exit code of ``skillruntime exec`` when the command timed out (as ``timeout(1)``)."""

F = TypeVar("F", bound=Callable[..., Any])


def parse_assignments(
    values: Sequence[str], *, what: str, inherit: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Parse ``KEY=VALUE`` strings into a dict (later ones win).

    With ``inherit``, a bare ``KEY`` takes its value from that mapping (the CLI's environment).
    Raises :class:`click.BadParameter` for a malformed item; values are never shown.
    """
    result: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            if inherit is None:
                raise click.BadParameter(f"expected KEY=VALUE, got {key!r}", param_hint=what)
            if key not in inherit:
                raise click.BadParameter(
                    f"{key!r} has no value and is not set in the environment", param_hint=what
                )
            value = inherit[key]
        if not key:
            raise click.BadParameter("expected KEY=VALUE with a non-empty KEY", param_hint=what)
        result[key] = value
    return result


def runtime_options(function: F) -> F:
    """Add ``--runtime``, ``--option`` and ``--conversation`` to a command."""
    decorators = [
        click.option(
            "--runtime",
            "runtime_name",
            default="local",
            show_default=True,
            envvar="SKILLRUNTIME_RUNTIME",
            show_envvar=True,
            metavar="NAME",
            help="Runtime backend to use (see `skillruntime runtimes`).",
        ),
        click.option(
            "--option",
            "-o",
            "runtime_option_items",
            multiple=True,
            metavar="KEY=VALUE",
            help="Runtime option (repeatable); unset options fall back to "
            "SKILLRUNTIME_<RUNTIME>_<OPTION> environment variables.",
        ),
        click.option(
            "--conversation",
            "conversation_id",
            default=None,
            metavar="ID",
            help="Conversation id; passed to the runtime as its `conversation_id` option.",
        ),
    ]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


def _takes_json(annotation: Any) -> bool:
    """True for an option type given as JSON text (mappings, lists, models), as pydantic-settings
    reads it from the environment; a type that also accepts a plain string is not."""
    from pydantic import BaseModel

    members = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else ()
    kinds = [get_origin(member) or member for member in (members or (annotation,))]
    if str in kinds:
        return False
    return any(
        isinstance(kind, type)
        and (
            issubclass(kind, BaseModel) or issubclass(kind, (Mapping, list, tuple, set, frozenset))
        )
        for kind in kinds
    )


def _takes_host_path(annotation: Any) -> bool:
    """True for an option typed as a host path (:class:`~pathlib.Path`, optionally ``None``)."""
    members = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else ()
    return any(
        isinstance(kind, type) and issubclass(kind, os.PathLike)
        for kind in (members or (annotation,))
    )


def _resolve_host_paths(provider: RuntimeProvider[Any], options: dict[str, Any]) -> None:
    """Resolve relative ``-o KEY=PATH`` values of host-path options against the current
    directory, in place (the library requires an absolute ``conversations_root``; on a command
    line a relative path means the shell's directory, as for any other command)."""
    fields = provider.options_model.model_fields
    for key, value in options.items():
        field = fields.get(key.replace("-", "_"))
        if field is None or not isinstance(value, str) or not _takes_host_path(field.annotation):
            continue
        expanded = os.path.expanduser(value)
        if value and not os.path.isabs(expanded):
            options[key] = os.path.abspath(expanded)


def _decode_json_options(provider: RuntimeProvider[Any], options: dict[str, Any]) -> None:
    """Decode ``-o KEY=JSON`` values of options that take mappings or lists, in place."""
    fields = provider.options_model.model_fields
    for key, value in options.items():
        field = fields.get(key.replace("-", "_"))
        if field is None or not isinstance(value, str) or not _takes_json(field.annotation):
            continue
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError as exc:
            raise CliUsageError(
                f'option {key!r} takes a JSON value (e.g. -o {key}=\'{{"NAME": "value"}}\' or '
                f"'[...]'), which is not valid JSON here: {exc.msg} at column {exc.colno}"
            ) from None


def _conversation_hint(provider: RuntimeProvider[Any], options: Mapping[str, Any]) -> str | None:
    """What to do when a runtime needs a conversation id because its conversations root is set
    in the environment (a common leftover of an exported variable)."""
    from ..plugins.registry import describe_options

    env_vars = {info.name: info.env_var for info in describe_options(provider)}
    root_var, id_var = env_vars.get("conversations_root"), env_vars.get("conversation_id")
    if root_var is None or id_var is None or "conversation_id" in options:
        return None
    if "conversations_root" in options or root_var not in os.environ:
        return None
    return (
        f"{root_var} is set in the environment: pass --conversation ID (or set {id_var}), "
        f"or unset {root_var}"
    )


@contextmanager
def open_runtime(
    runtime_name: str, option_items: Sequence[str], conversation_id: str | None
) -> Iterator[SkillRuntime]:
    """Build the runtime from CLI options and close it on exit.

    An option value the runtime refuses (its options model, or the runtime's own checks raising
    :class:`ValueError`) is a usage mistake: :class:`~.errors.CliUsageError`, exit status 2.

    ``-o KEY=VALUE`` values of options that take mappings or lists are JSON text, as in the
    ``SKILLRUNTIME_<RUNTIME>_<OPTION>`` environment variables; a relative value of a host-path
    option (the local runtime's ``conversations_root``, ``work_root``) is resolved against the
    current directory. Environment variables are passed on as they are.
    """
    from ..plugins.registry import RuntimeOptionsError, create_runtime, get_runtime_provider

    options: dict[str, Any] = parse_assignments(option_items, what="'--option'")
    if conversation_id is not None:
        options["conversation_id"] = conversation_id
    provider = get_runtime_provider(runtime_name)
    _decode_json_options(provider, options)
    _resolve_host_paths(provider, options)
    try:
        runtime = create_runtime(runtime_name, **options)
    except RuntimeOptionsError as error:
        hint = _conversation_hint(provider, options) if "conversation_id" in str(error) else None
        if hint is None:
            raise
        raise CliUsageError(f"{error}; {hint}") from None
    except ValueError as error:
        # the runtime refused an option value (an environment name, a conversations root):
        # a usage mistake, like an option its model rejects
        raise CliUsageError(str(error) or type(error).__name__) from None
    try:
        yield runtime
    finally:
        runtime.close()


def _load_skills(
    skills_root: Path | None, names: Sequence[str], *, lenient: bool = False
) -> list[Skill]:
    if skills_root is None:
        if names:
            raise click.UsageError("--skill needs --skills-root to say where skills live")
        return []
    from ..skills import discover_skills

    wanted = list(dict.fromkeys(names))
    # Invalid skills are skipped with a warning; a name discovery does not know raises there,
    # so a requested name missing here is a skill that was skipped as invalid.
    skills: list[Skill] = discover_skills(
        skills_root, names=wanted or None, skip_invalid=not lenient
    )
    if wanted:
        found = {skill.name for skill in skills}
        missing = [name for name in wanted if name not in found]
        if missing:
            raise CliError(
                f"skill(s) under {skills_root} are invalid: {', '.join(missing)} (see the "
                f"warnings, or run: skillruntime skills validate {skills_root}; --lenient "
                "prepares them anyway)"
            )
        by_name = {skill.name: skill for skill in skills}
        skills = [by_name[name] for name in wanted]
    return skills


def _exit_code(exit_code: int) -> int:
    """Map a runtime exit code to a process exit status (signals as 128+N, like shells)."""
    if exit_code < 0:
        return min(128 + abs(exit_code), 255)
    return min(exit_code, 255)


@click.command(
    "exec",
    # Options end at the first argument that is not one (or at `--`): everything after it is the
    # command's. An unknown option before that is a usage mistake, not the start of the command.
    context_settings={"allow_interspersed_args": False},
)
@runtime_options
@click.option(
    "--skills-root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Directory holding skill directories.",
)
@click.option(
    "--skill",
    "skill_names",
    multiple=True,
    metavar="NAME",
    help="Skill to prepare before the command (repeatable). With --skills-root and no --skill, "
    "every skill under the root is prepared.",
)
@click.option(
    "--lenient",
    is_flag=True,
    help="Also prepare skills that break a rule of the specification (a description over 1024 "
    "characters, ...) instead of skipping them.",
)
@click.option(
    "--env",
    "-e",
    "env_items",
    multiple=True,
    metavar="KEY[=VALUE]",
    help="Environment variable for the command (repeatable); a bare KEY copies it from this shell.",
)
@click.option(
    "--timeout",
    "timeout_seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=120.0,
    show_default=True,
    help="Seconds before the command's process tree is killed (exit status 124).",
)
@click.option("--cwd", default=None, metavar="PATH", help="Working directory in the runtime.")
@click.option("--verbose", "-v", is_flag=True, help="Print the prepared skill paths on stderr.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def exec_command(
    ctx: click.Context,
    *,
    runtime_name: str,
    runtime_option_items: tuple[str, ...],
    conversation_id: str | None,
    skills_root: Path | None,
    skill_names: tuple[str, ...],
    lenient: bool,
    env_items: tuple[str, ...],
    timeout_seconds: float,
    cwd: str | None,
    verbose: bool,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND in a runtime, after preparing skills.

    A single COMMAND argument is a shell command line (`'ls | wc -l'`); several arguments are
    quoted and joined (`ls -la /tmp`). Options of exec come first: the command starts at the
    first argument that is not an option, or after `--`. The command's stdout and stderr are
    copied to this process's, and its exit status becomes this process's (124 on timeout).

    With -v, exec prints where each skill was prepared: in a conversation workspace (or the
    local runtime's work root) skills/NAME-DIGEST/, relative to where the command runs; the
    local runtime with neither uses the skill directory in place.

    \b
    Examples:
      skillruntime exec -- echo hello
      skillruntime exec --skills-root ./skills --skill pdf -v -o work_root=/tmp/work \\
          'python3 skills/pdf-*/scripts/fill.py form.pdf'
      skillruntime exec --runtime opensandbox --conversation c1 -o image=python:3.12 -- uname -a
    """
    from pydantic import ValidationError

    from ..models import SkillExecutionRequest, SkillPreparationRequest
    from .errors import validation_message

    environment = parse_assignments(env_items, what="'--env'", inherit=os.environ)
    try:
        request = SkillExecutionRequest(
            command=command[0] if len(command) == 1 else shlex.join(command),
            working_directory=cwd,
            timeout_seconds=timeout_seconds,
            environment=environment,
        )
    except ValidationError as error:
        raise CliUsageError(f"invalid command: {validation_message(error)}") from None
    skills = _load_skills(skills_root, skill_names, lenient=lenient)
    with open_runtime(runtime_name, runtime_option_items, conversation_id) as runtime:
        if skills:
            # The runtime runs each skill's declared bootstrap (SkillPreparationRequest.config_for).
            prepared = runtime.prepare(SkillPreparationRequest(skills=tuple(skills)))
            if verbose:
                for skill in prepared:
                    click.echo(f"prepared skill {skill.name}: {skill.base_path}", err=True)
        result = runtime.execute(request)
    _write(sys.stdout, result.stdout)
    _write(sys.stderr, result.stderr)
    if result.timed_out:
        click.echo(f"skillruntime: command timed out after {timeout_seconds:g} s", err=True)
        ctx.exit(TIMEOUT_EXIT_CODE)
    ctx.exit(_exit_code(result.exit_code))


def _runtime_path(runtime: SkillRuntime, path: str) -> str:
    """``path`` made absolute against the runtime's default working directory."""
    return posixpath.join(runtime.default_working_directory, path)


def _write(stream: Any, text: str) -> None:
    if text:
        click.echo(text, file=stream, nl=False)
        stream.flush()


# ---------------------------------------------------------------------------------- files


@click.group("files")
def files_group() -> None:
    """Move files in and out of a runtime.

    Relative runtime paths are taken from the runtime's default working directory (the
    conversation workspace when there is one).

    \b
    Examples:
      skillruntime files ls
      skillruntime files put report.csv data/report.csv
      skillruntime files get data/out.png ./out.png
      skillruntime files rm data/tmp
    """


@files_group.command("ls")
@runtime_options
@click.argument("path", required=False)
@click.option(
    "--depth",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Levels to descend (1: direct children).",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=1000, show_default=True, help="Most entries."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def files_ls(
    *,
    runtime_name: str,
    runtime_option_items: tuple[str, ...],
    conversation_id: str | None,
    path: str | None,
    depth: int,
    limit: int,
    as_json: bool,
) -> None:
    """List PATH (default: the working directory).

    Each line: a type letter (d directory, x executable file, - other file), the size in bytes
    and the full runtime path.
    """
    with open_runtime(runtime_name, runtime_option_items, conversation_id) as runtime:
        target = _runtime_path(runtime, path or ".")
        entries = runtime.get_file_system().list_directory(target, depth, limit)
    if as_json:
        click.echo(json.dumps([entry.model_dump(mode="json") for entry in entries], indent=2))
        return
    for entry in entries:
        kind = "d" if entry.is_directory else ("x" if entry.is_executable else "-")
        click.echo(f"{kind} {entry.size:>12} {entry.path}{'/' if entry.is_directory else ''}")


_progress_option = click.option(
    "--progress/--no-progress",
    default=None,
    help="Show transfer progress on stderr (default: when stderr is a terminal).",
)


def _progress(enabled: bool | None, label: str, total: int | None) -> TransferProgress | None:
    if enabled is None:
        enabled = sys.stderr.isatty()
    return TransferProgress(label, total, sys.stderr) if enabled else None


def _copy_remote(
    fs: SkillRuntimeFileSystem, remote: str, handle: BinaryIO, meter: TransferProgress | None
) -> None:
    """Write the runtime file ``remote`` into ``handle``, counting the bytes on ``meter``."""
    if meter is None:
        fs.download(remote, handle)
        return
    with contextlib.closing(fs.read_stream(remote)) as stream:
        for chunk in meter.chunks(stream):
            handle.write(chunk)


def _download_new(
    fs: SkillRuntimeFileSystem, remote: str, target: Path, meter: TransferProgress | None
) -> None:
    """A new host file: like ``fs.download`` (a ``.part`` file renamed when complete)."""
    if meter is None:
        fs.download(remote, target)
        return
    from ..files.spi import open_part_file

    fd, part = open_part_file(target)
    try:
        with os.fdopen(fd, "wb") as handle:
            _copy_remote(fs, remote, handle, meter)
        os.replace(part, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(part)
        raise


def _staging_file(target: Path) -> BinaryIO:
    """An unnamed temporary file beside ``target``'s real file (nothing is left behind whatever
    happens), or in the temporary directory when that directory takes no new file."""
    try:
        return tempfile.TemporaryFile(dir=target.resolve().parent)
    except OSError:
        return tempfile.TemporaryFile()


def _overwrite(
    fs: SkillRuntimeFileSystem, remote: str, target: Path, meter: TransferProgress | None
) -> None:
    """An existing host file, as ``cp`` writes it: opened through a link, its content replaced
    in place, so its mode, owner, links and inode stay.

    A regular file is opened first (a file this user may not write fails before any transfer),
    the download goes to a staging file, and only a complete download replaces the content: a
    failed transfer leaves the file as it was, and a runtime file that is the host file itself
    (the local runtime) is read whole before it is rewritten. A device or a pipe is written as
    the bytes come.
    """
    fd = os.open(target, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "wb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            _copy_remote(fs, remote, handle, meter)
            return
        with _staging_file(target) as staging:
            _copy_remote(fs, remote, staging, meter)
            staging.flush()
            staging.seek(0)
            os.ftruncate(fd, 0)
            shutil.copyfileobj(staging, handle, 1 << 20)


def _local_destination(remote: str, local: str) -> Path:
    """The host file ``files get REMOTE LOCAL`` writes, decided as ``cp`` decides.

    An existing directory LOCAL (a link to one too) receives REMOTE's name; a LOCAL that ends
    with ``/`` must be such a directory; the destination's directory must exist; a link that
    points nowhere is not written through.
    """
    target = Path(local).expanduser()
    if target.is_dir():
        name = posixpath.basename(posixpath.normpath(remote))
        if name in ("", ".", "..", "/"):
            raise CliUsageError(
                f"{remote!r} names no file to copy into {local}: give the destination's file name"
            )
        target = target / name
        if target.is_dir():
            raise CliError(f"cannot overwrite the directory {target} with a file")
    elif local.endswith("/"):
        what = "is not a directory" if target.exists() else "does not exist"
        raise CliError(f"cannot write into {local}: it {what}")
    _check_local_parent(target)
    if target.is_symlink() and not target.exists():
        raise CliError(f"not writing through the dangling link {target} (as cp)")
    return target


def _check_local_parent(local: Path) -> None:
    """Refuse a host destination whose directory does not exist (as ``cp`` does)."""
    parent = local.expanduser().absolute().parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise CliError(f"cannot write {local}: the directory {parent} {what}")


@files_group.command("get")
@runtime_options
@click.argument("remote")
@click.argument("local", type=click.Path(allow_dash=True))
@_progress_option
def files_get(
    *,
    runtime_name: str,
    runtime_option_items: tuple[str, ...],
    conversation_id: str | None,
    remote: str,
    local: str,
    progress: bool | None,
) -> None:
    """Download runtime file REMOTE to LOCAL (`-` writes it to stdout).

    \b
    As `cp`:
    - a LOCAL directory receives the file under REMOTE's name;
    - a new LOCAL gets mode 0666 less the umask, and its directory must exist;
    - an existing LOCAL is written in place: its mode, owner and links stay, and a link
      to a file is written through (a link that points nowhere is refused).
    A failed download leaves no new file and an existing one as it was.
    """
    target = None if local == "-" else _local_destination(remote, local)
    with open_runtime(runtime_name, runtime_option_items, conversation_id) as runtime:
        fs = runtime.get_file_system()
        path = _runtime_path(runtime, remote)
        info = fs.stat(path) if progress is not False else None
        meter = _progress(progress, f"get {posixpath.basename(path)}", info.size if info else None)
        if target is None:
            sys.stdout.flush()
            _copy_remote(fs, path, sys.stdout.buffer, meter)
            sys.stdout.buffer.flush()
        elif target.exists():
            _overwrite(fs, path, target, meter)
        else:
            _download_new(fs, path, target, meter)
        if meter is not None:
            meter.finish()


@files_group.command("put")
@runtime_options
@click.argument("local", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("remote")
@_progress_option
def files_put(
    *,
    runtime_name: str,
    runtime_option_items: tuple[str, ...],
    conversation_id: str | None,
    local: Path,
    remote: str,
    progress: bool | None,
) -> None:
    """Upload host file LOCAL to runtime path REMOTE.

    Parent directories are created and the executable bit is kept. With progress shown the
    file is streamed through the runtime's write_stream.
    """
    with open_runtime(runtime_name, runtime_option_items, conversation_id) as runtime:
        fs = runtime.get_file_system()
        path = _runtime_path(runtime, remote)
        meter = _progress(progress, f"put {local.name}", local.stat().st_size)
        if meter is None:
            fs.upload(local, path)
            return
        from ..files.spi import iter_local_file

        executable = bool(local.stat().st_mode & 0o111)
        fs.write_stream(path, meter.chunks(iter_local_file(local)), executable=executable)
        meter.finish()


@files_group.command("rm")
@runtime_options
@click.argument("paths", nargs=-1, required=True)
def files_rm(
    *,
    runtime_name: str,
    runtime_option_items: tuple[str, ...],
    conversation_id: str | None,
    paths: tuple[str, ...],
) -> None:
    """Delete runtime files or directory trees.

    A path that does not exist is not an error.
    """
    with open_runtime(runtime_name, runtime_option_items, conversation_id) as runtime:
        fs = runtime.get_file_system()
        for path in paths:
            fs.delete(_runtime_path(runtime, path))
