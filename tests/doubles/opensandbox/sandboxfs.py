"""How the double maps sandbox paths to host paths, plus execd's file-API semantics.

Inside a sandbox three trees are private and writable: ``/workspace``, ``/tmp`` and ``/root``
(``$HOME``). Each is a host directory under the sandbox's root; commands see them bind-mounted
at those absolute paths (a private mount namespace per command, where the rest of the file
system is read-only), and the file API maps the same absolute paths to the same host
directories, so both views agree byte for byte.

Every other absolute path is the host's own file: the file API may *read* it (as a container
could read its image's ``/etc``), but any mutation elsewhere fails with 500 ``RUNTIME_ERROR``
(the double never writes the host outside the sandbox).

Like execd, every path first goes through ``$VAR``/``${VAR}``/``~`` expansion against the
sandbox's environment; an undefined variable fails with 400 ``INVALID_REQUEST_BODY`` (execd's
message text; its exact code is undocumented). Relative paths resolve against ``/`` (execd's
working directory).
"""

from __future__ import annotations

import datetime as dt
import errno
import grp
import os
import posixpath
import pwd
import re
import stat as stat_mod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doubles.opensandbox.registry import Sandbox

PRIVATE_ROOTS = ("/workspace", "/tmp", "/root")
HOME = "/root"
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


class ApiError(Exception):
    """An error answer of either API: HTTP status plus the flat ``{code, message}`` body."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        return {"code": self.code, "message": self.message}


def not_found(path: str) -> ApiError:
    """The execd 404 for a missing path."""
    return ApiError(404, "FILE_NOT_FOUND", f"file not found: {path}")


def base_env(sandbox: Sandbox) -> dict[str, str]:
    """The environment execd itself runs with inside the sandbox."""
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": HOME,
        "LANG": "C.UTF-8",
    }
    env.update(sandbox.env)
    return env


def expand(path: str, env: dict[str, str]) -> str:
    """Apply execd's ``$VAR``, ``${VAR}`` and leading ``~`` expansion."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in env:
            raise ApiError(
                400,
                "INVALID_REQUEST_BODY",
                f"path references undefined environment variables: {name}",
            )
        return env[name]

    expanded = _VAR.sub(replace, path)
    if expanded == "~" or expanded.startswith("~/"):
        expanded = env.get("HOME", HOME) + expanded[1:]
    return expanded


@dataclass(frozen=True)
class Resolved:
    """A sandbox path resolved to the host path that backs it."""

    sandbox_path: str
    host: Path
    writable: bool

    def require_writable(self) -> None:
        """Refuse mutations outside the sandbox's private trees."""
        if not self.writable:
            raise ApiError(
                500,
                "RUNTIME_ERROR",
                f"permission denied: {self.sandbox_path} is outside /workspace, /tmp and /root",
            )


def resolve(sandbox: Sandbox, path: str) -> Resolved:
    """Map a sandbox path (after expansion and normalisation) to its host path."""
    if not path:
        raise ApiError(400, "MISSING_QUERY", "missing path")
    expanded = expand(path, base_env(sandbox))
    normal = posixpath.normpath(posixpath.join("/", expanded))
    if normal.startswith("//"):
        normal = normal[1:]
    for root, host_root in (
        ("/workspace", sandbox.workspace),
        ("/tmp", sandbox.tmp),
        ("/root", sandbox.home),
    ):
        if normal == root:
            return Resolved(normal, host_root, True)
        if normal.startswith(root + "/"):
            return Resolved(normal, host_root / normal[len(root) + 1 :], True)
    return Resolved(normal, Path(normal), False)


def mode_to_digits(st_mode: int) -> int:
    """Permission bits in execd's decimal-digit convention: 0o644 becomes 644."""
    return int(format(stat_mod.S_IMODE(st_mode) & 0o7777, "o"))


def digits_to_mode(mode: Any) -> int | None:
    """Parse execd's decimal-digit mode (``755`` means 0o755); 0 or missing means keep."""
    if mode is None:
        return None
    if not isinstance(mode, int) or isinstance(mode, bool) or mode < 0:
        raise ApiError(400, "INVALID_FILE_METADATA", f"invalid mode: {mode!r}")
    if mode == 0:
        return None
    try:
        return int(str(mode), 8)
    except ValueError as exc:
        raise ApiError(400, "INVALID_FILE_METADATA", f"invalid mode: {mode}") from exc


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _stamp(nanoseconds: int) -> str:
    """Go's ``time.RFC3339Nano`` in UTC, as execd's JSON carries ``ModTime()``: nanoseconds,
    trailing zeros of the fraction trimmed."""
    seconds, fraction = divmod(nanoseconds, 1_000_000_000)
    whole = dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    digits = f"{fraction:09d}".rstrip("0")
    return f"{whole}.{digits}Z" if digits else f"{whole}Z"


def file_info(sandbox_path: str, host: Path) -> dict[str, Any]:
    """execd's ``FileInfo`` JSON (snake_case) for one path; symlinks are not followed."""
    st = host.lstat()
    if stat_mod.S_ISLNK(st.st_mode):
        kind = "symlink"
    elif stat_mod.S_ISDIR(st.st_mode):
        kind = "directory"
    elif stat_mod.S_ISREG(st.st_mode):
        kind = "file"
    else:
        kind = "other"
    return {
        "path": sandbox_path,
        "type": kind,
        "size": st.st_size,
        "modified_at": _stamp(st.st_mtime_ns),
        "created_at": _stamp(st.st_ctime_ns),
        "owner": _owner(st.st_uid),
        "group": _group(st.st_gid),
        "mode": mode_to_digits(st.st_mode),
    }


def apply_owner(host: Path, owner: Any, group: Any) -> None:
    """``chown`` by user/group name (or numeric string) when given."""
    if not owner and not group:
        return
    try:
        uid = (
            -1
            if not owner
            else (int(owner) if str(owner).isdigit() else pwd.getpwnam(owner).pw_uid)
        )
        gid = (
            -1
            if not group
            else (int(group) if str(group).isdigit() else grp.getgrnam(group).gr_gid)
        )
        os.lchown(host, uid, gid)
    except (KeyError, OSError) as exc:
        raise ApiError(500, "RUNTIME_ERROR", f"chown {host.name}: {exc}") from exc


def go_reason(exc: OSError) -> str:
    """The text Go's ``syscall.Errno`` gives ``exc.errno`` (``permission denied``, ``operation
    not permitted``, ``not a directory``…): the C text in lower case."""
    return os.strerror(exc.errno).lower() if exc.errno else str(exc).lower()


def mkdir_all(host: Path) -> None:
    """Go's ``os.MkdirAll``: an existing non-directory on the way fails with ``ENOTDIR``."""
    try:
        host.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:  # the leaf exists and is not a directory
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(host)) from exc


def make_dirs(host: Path, mode: int | None, sandbox_path: str | None = None) -> None:
    """``MkdirAll`` with an optional mode for the leaf directory; a failure is execd's
    ``handleFileError`` answer (500 ``RUNTIME_ERROR``, Go's error text)."""
    try:
        mkdir_all(host)
        if mode is not None:
            host.chmod(mode)
    except OSError as exc:
        where = sandbox_path or str(host)
        raise ApiError(
            500, "RUNTIME_ERROR", f"error accessing file: mkdir {where}: {go_reason(exc)}"
        ) from exc


def walk_entries(root: Resolved, depth: int | None) -> list[dict[str, Any]]:
    """Entries below a directory, ``depth`` levels deep (1 = direct children), not following
    symlinks, sorted by path."""
    out: list[dict[str, Any]] = []
    limit = depth if depth is not None and depth > 0 else 1

    def visit(host: Path, sandbox_path: str, level: int) -> None:
        try:
            children = sorted(os.scandir(host), key=lambda e: e.name)
        except OSError:
            return
        for child in children:
            child_path = posixpath.join(sandbox_path, child.name)
            try:
                out.append(file_info(child_path, Path(child.path)))
            except OSError:
                continue
            if level < limit and child.is_dir(follow_symlinks=False):
                visit(Path(child.path), child_path, level + 1)

    visit(root.host, root.sandbox_path, 1)
    return out


def search(root: Resolved, pattern: str) -> list[dict[str, Any]]:
    """Files (not directories) anywhere below ``root`` whose *basename* matches the glob."""
    import fnmatch

    out: list[dict[str, Any]] = []
    for dirpath, dirnames, filenames in os.walk(root.host):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root.host)
        base = root.sandbox_path if rel == "." else posixpath.join(root.sandbox_path, rel)
        for name in sorted(filenames):
            if pattern in ("", "**") or fnmatch.fnmatchcase(name, pattern):
                try:
                    out.append(file_info(posixpath.join(base, name), Path(dirpath) / name))
                except OSError:
                    continue
    return out
