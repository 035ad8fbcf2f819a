"""Making a host directory unwritable even for root, for the permission-denied contract."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

__all__ = ["immutable_host_directory"]

logger = logging.getLogger(__name__)


def _chattr(flag: str, path: Path) -> None:
    chattr = shutil.which("chattr")
    if chattr is None:
        raise RuntimeError("chattr (e2fsprogs) is needed to make a directory immutable")
    completed = subprocess.run(
        [chattr, flag, "--", os.fspath(path)], capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"chattr {flag} {path} failed ({completed.stderr.strip()}); the file system or the "
            "process lacks support for immutable files (CAP_LINUX_IMMUTABLE)"
        )


def immutable_host_directory(path: str | os.PathLike[str]) -> Callable[[], None]:
    """Set the immutable attribute on the host directory ``path`` and return its undo.

    No user, root included, can then create, rename or delete entries in it (``EPERM``), while
    files already in it stay readable. The undo is idempotent; call it before the directory is
    removed.
    """
    target = Path(path)
    _chattr("+i", target)
    done = False

    def undo() -> None:
        nonlocal done
        if not done:
            _chattr("-i", target)
            done = True
            logger.debug("cleared the immutable attribute of %s", target)

    return undo
