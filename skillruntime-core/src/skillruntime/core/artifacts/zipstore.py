"""The ZIP/directory artifact store: immutable versions extracted under a local root.

Layout under ``root``::

    <name>/<version>/artifact.json   the completed artifact (digest of the ZIP, size, key)
    <name>/<version>/<name>/         the extracted package; SKILL.md is directly inside (the
                                     directory is named after the skill, as Agent Skills require)
    .staging/                        installs and deletions in progress (same file system)
    .locks/                          one lock file per skill name, shared by processes

An install spools and hashes the package, checks a declared digest and size, validates and
extracts it into ``.staging/install-*`` and publishes it with one ``rename`` of the whole version
directory under a file lock, so a reader sees either nothing or the complete version. A failure
removes the staging directory: nothing is left behind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import uuid
from pathlib import Path

from filelock import FileLock

from ..observability.audit import audited_call
from .spi import (
    ArtifactExistsError,
    ArtifactIntegrityError,
    ArtifactNotFoundError,
    ArtifactStoreError,
    SkillArtifact,
    SkillArtifactStore,
    SkillPackage,
    materialize_audit_fields,
)
from .zipcheck import DEFAULT_LIMITS, PackageLimits, check_declared, extract_package, spool_package

__all__ = ["ZipSkillArtifactStore"]

logger = logging.getLogger(__name__)

_METADATA = "artifact.json"
_STAGING = ".staging"
_LOCKS = ".locks"


class ZipSkillArtifactStore(SkillArtifactStore):
    """Installs ZIP skill packages into ``root`` as immutable ``<name>/<version>`` directories.

    ``root`` is created when missing. The storage key of an artifact is ``<name>/<version>``;
    :meth:`materialize` returns ``<root>/<name>/<version>/<name>``, which stays valid until the
    version is deleted. ``limits`` bounds what a package may contain.
    """

    def __init__(self, root: str | Path, *, limits: PackageLimits = DEFAULT_LIMITS) -> None:
        super().__init__()
        root = Path(root).expanduser()
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ArtifactStoreError(
                f"cannot create the artifact store root {root}: {error.strerror}"
            ) from None
        if not root.is_dir():
            raise ArtifactStoreError(f"artifact store root is not a directory: {root}")
        self.root = root.resolve()
        self.limits = limits

    def __repr__(self) -> str:
        return f"ZipSkillArtifactStore({str(self.root)!r})"

    # -- keys and paths -------------------------------------------------------------------------

    @staticmethod
    def storage_key_for(artifact: SkillArtifact) -> str:
        """The storage key of ``artifact`` in this store: ``<name>/<version>``."""
        return f"{artifact.name}/{artifact.version}"

    def _version_dir(self, artifact: SkillArtifact) -> Path:
        self._check_storage_key(artifact, self.storage_key_for(artifact))
        return self.root / artifact.name / artifact.version

    def _lock(self, artifact: SkillArtifact) -> FileLock:
        locks = self.root / _LOCKS
        locks.mkdir(mode=0o700, exist_ok=True)
        return FileLock(str(locks / f"{artifact.name}.lock"))

    def _staging(self, prefix: str) -> Path:
        staging = self.root / _STAGING
        staging.mkdir(mode=0o700, exist_ok=True)
        return staging / f"{prefix}-{uuid.uuid4().hex}"

    # -- SPI --------------------------------------------------------------------------------------

    def install(self, artifact: SkillArtifact, package: SkillPackage) -> SkillArtifact:
        """Validate and publish ``package`` as ``<name>/<version>`` (see the SPI)."""
        destination = self._version_dir(artifact)
        if destination.exists():
            raise ArtifactExistsError(f"skill artifact {artifact.label} is already installed")
        work = self._staging("install")
        work.mkdir(mode=0o700)
        try:
            with package.open() as stream:
                spooled = spool_package(stream, work / "package.zip", self.limits.max_package_bytes)
            check_declared(artifact, spooled, what="skill package")
            extract_package(spooled.path, work / artifact.name, artifact.name, self.limits)
            spooled.path.unlink()
            completed = SkillArtifact(
                name=artifact.name,
                version=artifact.version,
                digest=f"sha256:{spooled.sha256}",
                storage_key=self.storage_key_for(artifact),
                size=spooled.size,
            )
            (work / _METADATA).write_text(completed.model_dump_json(), encoding="utf-8")
            self._publish(work, destination, completed)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        logger.info("installed skill artifact %s (%s)", completed.label, completed.digest)
        return completed

    def _publish(self, work: Path, destination: Path, artifact: SkillArtifact) -> None:
        with self._lock(artifact):
            if destination.exists():
                raise ArtifactExistsError(f"skill artifact {artifact.label} is already installed")
            destination.parent.mkdir(mode=0o755, exist_ok=True)
            work.chmod(0o755)
            try:
                os.rename(work, destination)
            except OSError as error:
                self._remove_empty(destination.parent)
                raise ArtifactStoreError(
                    f"cannot publish skill artifact {artifact.label}: {error.strerror}"
                ) from None

    @audited_call("artifact.materialize", materialize_audit_fields("zip"))
    def materialize(self, artifact: SkillArtifact) -> Path:
        """The extracted ``<name>`` directory of ``artifact``; its digest must match if declared."""
        version_dir = self._version_dir(artifact)
        recorded = self._read_metadata(version_dir)
        if recorded is None:
            raise ArtifactNotFoundError(f"skill artifact {artifact.label} is not installed")
        if artifact.digest is not None and artifact.digest != recorded.digest:
            raise ArtifactIntegrityError(
                f"installed {artifact.label} has digest {recorded.digest}, "
                f"{artifact.digest} was requested",
                code="DIGEST_MISMATCH",
            )
        tree = version_dir / artifact.name
        real = tree.resolve()
        skill_md = tree / "SKILL.md"
        if (
            tree.is_symlink()
            or not real.is_relative_to(self.root)
            or skill_md.is_symlink()
            or not skill_md.is_file()
        ):
            raise ArtifactNotFoundError(
                f"skill artifact {artifact.label} is damaged: its directory has no SKILL.md"
            )
        return real

    def delete(self, artifact: SkillArtifact) -> None:
        """Remove ``<name>/<version>``; the directory disappears with one rename."""
        self._check_not_leased(artifact)
        version_dir = self._version_dir(artifact)
        if version_dir.is_symlink():
            raise ArtifactStoreError(f"refusing to delete {artifact.label}: it is a symbolic link")
        trash = self._staging("delete")
        with self._lock(artifact):
            try:
                os.rename(version_dir, trash)
            except FileNotFoundError:
                return
            finally:
                self._remove_empty(version_dir.parent)
        shutil.rmtree(trash, ignore_errors=True)
        logger.info("deleted skill artifact %s", artifact.label)

    def list_artifacts(self) -> list[SkillArtifact]:
        """The installed artifacts, read from each version's ``artifact.json``."""
        found: list[SkillArtifact] = []
        for name_dir in sorted(self.root.iterdir()):
            if name_dir.name.startswith(".") or not name_dir.is_dir() or name_dir.is_symlink():
                continue
            for version_dir in sorted(name_dir.iterdir()):
                recorded = self._read_metadata(version_dir)
                if recorded is not None:
                    found.append(recorded)
        return sorted(found, key=lambda a: (a.name, a.version))

    # -- helpers ----------------------------------------------------------------------------------

    @staticmethod
    def _read_metadata(version_dir: Path) -> SkillArtifact | None:
        path = version_dir / _METADATA
        if version_dir.is_symlink() or path.is_symlink():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return SkillArtifact.model_validate(data)
        except (OSError, ValueError):
            return None

    @staticmethod
    def _remove_empty(directory: Path) -> None:
        with contextlib.suppress(OSError):
            directory.rmdir()
