"""``skillruntime artifacts``: install, list, delete and materialize skill artifacts."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..cli.errors import CliError, CliUsageError, validation_message
from ..errors import SkillRuntimeError

if TYPE_CHECKING:
    from .spi import SkillArtifact, SkillArtifactStore

# The stores, the models (pydantic) and the ZIP checks (yaml) are imported by the commands that
# use them: `skillruntime artifacts --help` needs none of them (tests/cli/test_cli_startup.py).

__all__ = ["artifacts_group"]

_OPTION_HELP = (
    "Store option KEY=VALUE, repeatable (object store: cache_dir, or an fsspec option such as "
    "endpoint_url)."
)


def _parse_options(pairs: Sequence[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {key!r}", param_hint="--option")
        options[key.strip().replace("-", "_")] = value
    return options


@contextmanager
def _store(url: str, pairs: Sequence[str]) -> Iterator[SkillArtifactStore]:
    from .urls import open_artifact_store

    try:
        store = open_artifact_store(url, **_parse_options(pairs))
    except (SkillRuntimeError, ValueError, TypeError) as error:
        raise click.ClickException(f"cannot open artifact store: {error}") from None
    try:
        with store:
            yield store
    except SkillRuntimeError as error:
        raise click.ClickException(str(error)) from None


def _emit(artifact: SkillArtifact) -> None:
    click.echo(artifact.model_dump_json())


def _artifact(name: str, version: str, digest: str | None) -> SkillArtifact:
    """The artifact the command line names; a bad name, version or digest is a usage error
    reported by field and reason (never echoing the value)."""
    from pydantic import ValidationError

    from .spi import SkillArtifact

    try:
        return SkillArtifact(name=name, version=version, digest=digest)
    except ValidationError as error:
        raise CliUsageError(f"invalid artifact: {validation_message(error)}") from None


def _find(
    store: SkillArtifactStore, name: str, version: str, digest: str | None
) -> list[SkillArtifact]:
    wanted = _artifact(name, version, digest).digest
    return [
        a
        for a in store.list_artifacts()
        if a.name == name and a.version == version and (wanted is None or a.digest == wanted)
    ]


_option = click.option(
    "options", "-o", "--option", multiple=True, metavar="KEY=VALUE", help=_OPTION_HELP
)


@click.group("artifacts")
def artifacts_group() -> None:
    """Install, list, delete and materialize skill artifacts (ZIP packages) in a store.

    STORE_URL is a directory or file:// URL (ZIP/directory store), an fsspec URL such as
    s3://bucket/prefix or memory://name (object store), or objectstore+<fsspec URL>.
    """


@artifacts_group.command("install")
@click.argument("store_url")
@click.argument("package", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--version", "version", required=True, help="The exact version to install.")
@click.option("--name", default=None, help="Skill name (default: the name in SKILL.md).")
@click.option("--digest", default=None, help="Expected sha256:<hex> of the ZIP.")
@_option
def install_command(  # noqa: PLR0917 - click passes options positionally
    store_url: str,
    package: Path,
    version: str,
    name: str | None,
    digest: str | None,
    options: tuple[str, ...],
) -> None:
    """Install PACKAGE (a ZIP) and print the completed artifact as JSON."""
    from .spi import SkillPackage
    from .zipcheck import read_package_skill_name

    try:
        skill_name = name or read_package_skill_name(package)
    except (SkillRuntimeError, ValueError) as error:
        raise CliError(str(error)) from None
    if not skill_name:
        raise CliUsageError("SKILL.md of the package declares no name; pass --name")
    artifact = _artifact(skill_name, version, digest)
    with _store(store_url, options) as store:
        _emit(store.install(artifact, SkillPackage.from_path(package)))


@artifacts_group.command("ls")
@click.argument("store_url")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per artifact.")
@_option
def ls_command(store_url: str, as_json: bool, options: tuple[str, ...]) -> None:
    """List the installed artifacts."""
    with _store(store_url, options) as store:
        for artifact in store.list_artifacts():
            if as_json:
                _emit(artifact)
            else:
                click.echo(
                    f"{artifact.name}\t{artifact.version}\t{artifact.digest}\t{artifact.size}"
                )


@artifacts_group.command("rm")
@click.argument("store_url")
@click.argument("name")
@click.argument("version")
@click.option("--digest", default=None, help="Only the package with this sha256:<hex>.")
@_option
def rm_command(
    store_url: str, name: str, version: str, digest: str | None, options: tuple[str, ...]
) -> None:
    """Delete NAME VERSION (succeeds when it is not installed)."""
    with _store(store_url, options) as store:
        found = _find(store, name, version, digest)
        for artifact in found:
            store.delete(artifact)
            click.echo(f"deleted {artifact.label} {artifact.digest}")
        if not found:
            click.echo(f"{name}@{version} is not installed")


@artifacts_group.command("materialize")
@click.argument("store_url")
@click.argument("name")
@click.argument("version")
@click.option("--digest", default=None, help="Expected sha256:<hex> of the package.")
@click.option(
    "--dest",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Copy the skill to this new directory instead of printing the store's directory.",
)
@_option
def materialize_command(  # noqa: PLR0917 - click passes options positionally
    store_url: str,
    name: str,
    version: str,
    digest: str | None,
    dest: Path | None,
    options: tuple[str, ...],
) -> None:
    """Materialize NAME VERSION on this node and print the directory holding SKILL.md."""
    with _store(store_url, options) as store:
        found = _find(store, name, version, digest)
        if len(found) != 1:
            detail = "is not installed" if not found else "has several packages; pass --digest"
            raise click.ClickException(f"{name}@{version} {detail}")
        with store.lease(found[0]) as directory:
            if dest is None:
                click.echo(str(directory))
                return
            if dest.exists():
                raise click.ClickException(f"destination already exists: {dest}")
            dest.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".materialize-", dir=dest.parent))
            try:
                shutil.copytree(directory, staging / "skill", symlinks=True)
                (staging / "skill").rename(dest)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            click.echo(str(dest))
