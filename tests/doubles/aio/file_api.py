"""``/v1/file/*``: file operations on the sandbox filesystem.

The server process runs inside its own mount namespace where the double's root directory is
bind-mounted on ``/home/gem``, so file calls and commands see exactly the same paths. Paths
outside ``/home/gem`` are the host's own paths seen through that namespace (the real image has
its own full filesystem there); tests should stay under ``/home/gem``.

Contract (AIO API 1.9.4): paths must be absolute; failures are HTTP 200 with ``success: false``
and a ``FileOperationError`` in ``data``. ``write`` and ``upload`` do not create missing parent
directories (the documents leave this open; clients are told to ``mkdir -p`` first, and this
double is strict so that clients that forget are caught). ``download`` streams the bytes as
``application/octet-stream``; a missing path is HTTP 404 and a directory HTTP 400, both with the
envelope. Its ``Content-Disposition`` names the file as RFC 6266 says a server names any file
(:func:`content_disposition`): an ASCII ``filename="…"`` and, for any other name, the exact bytes in
``filename*=UTF-8''…`` (RFC 5987), so a header is never more than printable ASCII.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import os
import re
import shutil
import stat as stat_mod
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from doubles._multipart import ByteSource

from .multipart import MultipartError, boundary_of, read_form
from .procs import HOME
from .protocol import Field, HttpError, envelope, file_error, validate, validation_error

READ_FIELDS = {
    "file": Field("str", required=True, nullable=False),
    "start_line": Field("int"),
    "end_line": Field("int"),
    "sudo": Field("bool", default=False),
}
WRITE_FIELDS = {
    "file": Field("str", required=True, nullable=False),
    "content": Field("str", required=True, nullable=False),
    "encoding": Field("str", default="utf-8", choices=("utf-8", "base64", "raw")),
    "append": Field("bool", default=False),
    "leading_newline": Field("bool", default=False),
    "trailing_newline": Field("bool", default=False),
    "sudo": Field("bool", default=False),
}
REPLACE_FIELDS = {
    "file": Field("str", required=True, nullable=False),
    "old_str": Field("str", required=True, nullable=False),
    "new_str": Field("str", required=True, nullable=False),
    "sudo": Field("bool", default=False),
}
SEARCH_FIELDS = {
    "file": Field("str", required=True, nullable=False),
    "regex": Field("str", required=True, nullable=False),
    "sudo": Field("bool", default=False),
}
FIND_FIELDS = {
    "path": Field("str", required=True, nullable=False),
    "glob": Field("str", required=True, nullable=False),
}
LIST_FIELDS = {
    "path": Field("str", required=True, nullable=False),
    "recursive": Field("bool", default=False),
    "show_hidden": Field("bool", default=True),
    "file_types": Field("str_list"),
    "max_depth": Field("int"),
    "include_size": Field("bool", default=True),
    "include_permissions": Field("bool", default=False),
    "sort_by": Field("str", default="name"),
    "sort_desc": Field("bool", default=False),
}
GLOB_FIELDS = {
    "path": Field("str", required=True, nullable=False),
    "pattern": Field("str", required=True, nullable=False),
    "exclude": Field("str_list"),
    "include_hidden": Field("bool", nullable=False, default=False),
    "files_only": Field("bool", nullable=False, default=True),
    "include_metadata": Field("bool", nullable=False, default=True),
    "max_results": Field("int", nullable=False, default=5000),
    "sort_by": Field("str", nullable=False, default="path"),
    "sort_desc": Field("bool", nullable=False, default=False),
}
GREP_FIELDS = {
    "path": Field("str", required=True, nullable=False),
    "pattern": Field("str", required=True, nullable=False),
    "include": Field("str_list"),
    "exclude": Field("str_list"),
    "case_insensitive": Field("bool", nullable=False, default=False),
    "fixed_strings": Field("bool", nullable=False, default=False),
    "context_before": Field("int", nullable=False, default=0),
    "context_after": Field("int", nullable=False, default=0),
    "max_results": Field("int", nullable=False, default=500),
    "max_file_size": Field("str", nullable=False, default="1M"),
    "multiline": Field("bool", nullable=False, default=False),
    "offset": Field("int", nullable=False, default=0),
    "type": Field("str"),
    "recursive": Field("bool", nullable=False, default=True),
}


def _check_abs(path: str) -> str:
    """Normalise an absolute path; relative paths are refused with ``EINVAL``."""
    if not path.startswith("/"):
        raise OSError(22, f"Path must be absolute: '{path}'")
    return os.path.normpath(path)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat()


@dataclass
class Download:
    """A streamed download: open file, size and the name for ``Content-Disposition``
    (:attr:`disposition`)."""

    file: IO[bytes]
    size: int
    name: str
    path: str
    abort_on_change: bool
    mtime_ns: int

    @property
    def disposition(self) -> str:
        """The ``Content-Disposition`` header value naming the file."""
        return content_disposition(self.name)

    def chunks(self) -> Iterator[bytes]:
        with self.file:
            while True:
                chunk = self.file.read(65536)
                if not chunk:
                    break
                yield chunk
        if self.abort_on_change:
            st = os.stat(self.path)
            if st.st_mtime_ns != self.mtime_ns or st.st_size != self.size:
                raise OSError("file changed during download")


# RFC 5987 ``attr-char`` beyond letters, digits and ``_.-~`` (which ``quote`` always keeps).
_ATTR_CHARS = "!#$&+^`|"


def content_disposition(name: str) -> str:
    """``attachment`` naming ``name`` the RFC 6266 way: ``filename="…"`` holds the name when it
    is printable ASCII without ``"`` or ``\\``, else an ASCII fallback (each other character an
    ``_``) followed by ``filename*=UTF-8''…``, the name's bytes percent-encoded (RFC 5987). A name
    with undecodable bytes (``surrogateescape``) has those very bytes encoded."""
    fallback = "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in name)
    if fallback == name:
        return f'attachment; filename="{name}"'
    encoded = quote(os.fsencode(name), safe=_ATTR_CHARS)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"


class FileService:
    """Handlers of the file API; ``spool_dir`` holds upload parts while they arrive."""

    def __init__(self, spool_dir: str) -> None:
        self.spool_dir = spool_dir
        self.bytes_uploaded = 0

    def read(self, body: Any) -> dict[str, Any]:
        params = validate(body, READ_FIELDS)
        path = params["file"]
        try:
            data = Path(_check_abs(path)).read_bytes()
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return file_error(path, "read", exc, "Failed to read file")
        lines = text.splitlines(keepends=True)
        start, end = params["start_line"], params["end_line"]
        if start is not None or end is not None:
            text = "".join(lines[start:end])
        return envelope(
            {"content": text, "file": path, "line_count": len(lines)},
            message="File read successfully",
        )

    def write(self, body: Any) -> dict[str, Any]:
        params = validate(body, WRITE_FIELDS)
        path = params["file"]
        encoding = params["encoding"] or "utf-8"
        content: str = params["content"]
        try:
            target = _check_abs(path)
            if encoding == "base64":
                data = base64.b64decode(content, validate=True)
            elif encoding == "raw":
                data = content.encode("latin-1")
            else:
                if params["leading_newline"]:
                    content = "\n" + content
                if params["trailing_newline"]:
                    content = content + "\n"
                data = content.encode("utf-8")
            with open(target, "ab" if params["append"] else "wb") as handle:
                handle.write(data)
        except (binascii.Error, UnicodeEncodeError) as exc:
            err = UnicodeDecodeError("base64", b"", 0, 1, str(exc))
            return file_error(path, "write", err, "Failed to decode content")
        except OSError as exc:
            return file_error(path, "write", exc, "Failed to write file")
        return envelope({"file": path, "bytes_written": len(data)}, message="File written")

    def replace(self, body: Any) -> dict[str, Any]:
        params = validate(body, REPLACE_FIELDS)
        path = params["file"]
        try:
            target = Path(_check_abs(path))
            text = target.read_bytes().decode("utf-8")
            count = text.count(params["old_str"]) if params["old_str"] else 0
            if count:
                target.write_text(text.replace(params["old_str"], params["new_str"]), "utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return file_error(path, "replace", exc, "Failed to replace in file")
        return envelope({"file": path, "replaced_count": count})

    def search(self, body: Any) -> dict[str, Any]:
        params = validate(body, SEARCH_FIELDS)
        path = params["file"]
        try:
            pattern = re.compile(params["regex"])
        except re.error as exc:
            return envelope(None, success=False, message=f"Invalid regex: {exc}")
        try:
            text = Path(_check_abs(path)).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return file_error(path, "search", exc, "Failed to search file")
        matches: list[str] = []
        numbers: list[int] = []
        for number, line in enumerate(text.splitlines()):
            if pattern.search(line):
                matches.append(line)
                numbers.append(number)
        return envelope({"file": path, "matches": matches, "line_numbers": numbers})

    def find(self, body: Any) -> dict[str, Any]:
        params = validate(body, FIND_FIELDS)
        path = params["path"]
        try:
            root = Path(_check_abs(path))
            if not root.exists():
                raise FileNotFoundError(2, "No such file or directory", path)
            if not root.is_dir():
                raise NotADirectoryError(20, "Not a directory", path)
            pattern = params["glob"]
            found = root.glob(pattern) if "/" in pattern else root.rglob(pattern)
            files = sorted(str(p) for p in found)
        except OSError as exc:
            return file_error(path, "find", exc, "Failed to find files")
        return envelope({"path": path, "files": files})

    def _walk(
        self, root: Path, recursive: bool, max_depth: int | None, hidden: bool
    ) -> Iterator[Path]:
        stack: list[tuple[Path, int]] = [(root, 1)]
        while stack:
            current, depth = stack.pop()
            for entry in sorted(current.iterdir()):
                if not hidden and entry.name.startswith("."):
                    continue
                yield entry
                if (
                    recursive
                    and entry.is_dir()
                    and not entry.is_symlink()
                    and (max_depth is None or depth < max_depth)
                ):
                    stack.append((entry, depth + 1))

    def list_path(self, body: Any) -> dict[str, Any]:
        params = validate(body, LIST_FIELDS)
        path = params["path"]
        try:
            root = Path(_check_abs(path))
            if not root.exists():
                raise FileNotFoundError(2, "No such file or directory", path)
            if not root.is_dir():
                raise NotADirectoryError(20, "Not a directory", path)
            infos: list[dict[str, Any]] = []
            types = params["file_types"]
            for entry in self._walk(
                root,
                bool(params["recursive"]),
                params["max_depth"],
                params["show_hidden"] is not False,
            ):
                try:
                    st = entry.stat()
                except OSError:
                    st = entry.lstat()
                is_dir = stat_mod.S_ISDIR(st.st_mode)
                ext = entry.suffix or None
                if types and (is_dir or ext not in types):
                    continue
                infos.append(
                    {
                        "name": entry.name,
                        "path": str(entry),
                        "is_directory": is_dir,
                        "size": st.st_size
                        if params["include_size"] is not False and not is_dir
                        else None,
                        "modified_time": _iso(st.st_mtime),
                        "permissions": oct(st.st_mode & 0o777)[2:]
                        if params["include_permissions"]
                        else None,
                        "extension": None if is_dir else ext,
                    }
                )
        except OSError as exc:
            return file_error(path, "list", exc, "Failed to list path")
        key = params["sort_by"] or "name"
        sorters = {
            "size": lambda i: (i["size"] or 0, i["name"]),
            "modified": lambda i: (i["modified_time"] or "", i["name"]),
            "type": lambda i: (not i["is_directory"], i["extension"] or "", i["name"]),
        }
        infos.sort(key=sorters.get(key, lambda i: i["name"]), reverse=bool(params["sort_desc"]))
        dirs = sum(1 for i in infos if i["is_directory"])
        return envelope(
            {
                "path": path,
                "files": infos,
                "total_count": len(infos),
                "directory_count": dirs,
                "file_count": len(infos) - dirs,
            }
        )

    def glob(self, body: Any) -> dict[str, Any]:
        params = validate(body, GLOB_FIELDS)
        path = params["path"]
        try:
            root = Path(_check_abs(path))
            if not root.is_dir():
                raise FileNotFoundError(2, "No such file or directory", path)
            entries: list[dict[str, Any]] = []
            for found in root.glob(params["pattern"]):
                rel = found.relative_to(root)
                if not params["include_hidden"] and any(p.startswith(".") for p in rel.parts):
                    continue
                if params["exclude"] and any(
                    fnmatch.fnmatch(str(rel), ex) for ex in params["exclude"]
                ):
                    continue
                is_dir = found.is_dir()
                if params["files_only"] and is_dir:
                    continue
                info: dict[str, Any] = {
                    "path": str(found),
                    "name": found.name,
                    "is_directory": is_dir,
                }
                if params["include_metadata"]:
                    st = found.stat()
                    info["size"] = None if is_dir else st.st_size
                    info["modified_time"] = _iso(st.st_mtime)
                entries.append(info)
        except OSError as exc:
            return file_error(path, "glob", exc, "Failed to glob files")
        key = params["sort_by"]
        entries.sort(
            key=lambda i: (
                (i.get(key) or 0)
                if key in ("size",)
                else str(i.get(key if key in ("name", "modified_time") else "path") or "")
            ),
            reverse=params["sort_desc"],
        )
        total = len(entries)
        limit = max(params["max_results"], 1)
        return envelope(
            {
                "path": path,
                "pattern": params["pattern"],
                "files": entries[:limit],
                "total_count": total,
                "truncated": total > limit,
            }
        )

    def grep(self, body: Any) -> dict[str, Any]:
        params = validate(body, GREP_FIELDS)
        path = params["path"]
        flags = re.IGNORECASE if params["case_insensitive"] else 0
        source = re.escape(params["pattern"]) if params["fixed_strings"] else params["pattern"]
        try:
            pattern = re.compile(source, flags)
        except re.error as exc:
            return envelope(None, success=False, message=f"Invalid pattern: {exc}")
        try:
            root = Path(_check_abs(path))
            if not root.exists():
                raise FileNotFoundError(2, "No such file or directory", path)
            candidates = (
                [root]
                if root.is_file()
                else [p for p in self._walk(root, params["recursive"], None, False) if p.is_file()]
            )
        except OSError as exc:
            return file_error(path, "grep", exc, "Failed to grep files")
        matches: list[dict[str, Any]] = []
        searched = matched_files = 0
        skipped = params["offset"]
        limit = max(params["max_results"], 1)
        truncated = False
        before, after = params["context_before"], params["context_after"]
        for candidate in sorted(candidates):
            if params["include"] and not any(
                fnmatch.fnmatch(candidate.name, g) for g in params["include"]
            ):
                continue
            if params["exclude"] and any(
                fnmatch.fnmatch(candidate.name, g) for g in params["exclude"]
            ):
                continue
            try:
                lines = candidate.read_bytes().decode("utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            searched += 1
            hit = False
            for index, line in enumerate(lines):
                if not pattern.search(line):
                    continue
                hit = True
                if skipped > 0:
                    skipped -= 1
                    continue
                if len(matches) >= limit:
                    truncated = True
                    break
                matches.append(
                    {
                        "file": str(candidate),
                        "line_number": index + 1,
                        "line_content": line,
                        "context_before": lines[max(0, index - before) : index] if before else None,
                        "context_after": lines[index + 1 : index + 1 + after] if after else None,
                    }
                )
            matched_files += hit
        return envelope(
            {
                "path": path,
                "pattern": params["pattern"],
                "matches": matches,
                "match_count": len(matches),
                "files_searched": searched,
                "files_matched": matched_files,
                "truncated": truncated,
            }
        )

    def upload(self, stream: ByteSource, length: int, content_type: str | None) -> dict[str, Any]:
        """``POST /v1/file/upload``: multipart ``file`` (required) and ``path`` (destination).

        ``path`` is the destination file path; an existing directory receives the file under
        its uploaded name; without ``path`` the file lands in ``/home/gem/<filename>``.
        """
        boundary = boundary_of(content_type)
        if boundary is None:
            # FastAPI sees no form at all: the required ``file`` field is missing.
            raise validation_error(
                [
                    {
                        "type": "missing",
                        "loc": ["body", "file"],
                        "msg": "Field required",
                        "input": None,
                    }
                ]
            )
        try:
            form = read_form(stream, length, boundary, self.spool_dir)
        except MultipartError as exc:
            raise HttpError(
                400, {"detail": f"There was an error parsing the body: {exc}"}, close=True
            ) from exc
        try:
            part = form.files.get("file")
            if part is None:
                raise validation_error(
                    [
                        {
                            "type": "missing",
                            "loc": ["body", "file"],
                            "msg": "Field required",
                            "input": None,
                        }
                    ]
                )
            name = os.path.basename(part.filename or "upload") or "upload"
            dest = form.fields.get("path") or f"{HOME}/{name}"
            try:
                target = _check_abs(dest)
                if os.path.isdir(target):
                    target = os.path.join(target, name)
                    dest = target
                with open(target, "wb") as out:
                    shutil.copyfileobj(part.file, out, 65536)
            except OSError as exc:
                return file_error(dest, "upload", exc, "Failed to upload file")
            self.bytes_uploaded += part.size
            return envelope(
                {"file_path": dest, "file_size": part.size, "success": True},
                message="File uploaded successfully",
            )
        finally:
            form.close()

    def download(self, query: dict[str, list[str]]) -> Download:
        """``GET /v1/file/download?path=…&change_policy=ignore|abort``."""
        paths = query.get("path")
        if not paths:
            raise validation_error(
                [
                    {
                        "type": "missing",
                        "loc": ["query", "path"],
                        "msg": "Field required",
                        "input": None,
                    }
                ]
            )
        policy = (query.get("change_policy") or ["ignore"])[0]
        if policy not in ("ignore", "abort"):
            raise validation_error(
                [
                    {
                        "type": "enum",
                        "loc": ["query", "change_policy"],
                        "msg": "Input should be 'ignore' or 'abort'",
                        "input": policy,
                        "ctx": {"expected": "'ignore' or 'abort'"},
                    }
                ]
            )
        path = paths[0]
        failure = {"success": False, "data": None, "hint": None}
        try:
            target = _check_abs(path)
            handle = open(target, "rb")  # noqa: SIM115 - closed by Download.chunks
        except IsADirectoryError as exc:
            raise HttpError(400, {**failure, "message": f"Path is a directory: {path}"}) from exc
        except FileNotFoundError as exc:
            raise HttpError(404, {**failure, "message": f"File not found: {path}"}) from exc
        except OSError as exc:
            raise HttpError(400, {**failure, "message": f"Cannot download {path}: {exc}"}) from exc
        st = os.fstat(handle.fileno())
        if stat_mod.S_ISDIR(st.st_mode):
            handle.close()
            raise HttpError(400, {**failure, "message": f"Path is a directory: {path}"})
        return Download(
            handle, st.st_size, os.path.basename(target), target, policy == "abort", st.st_mtime_ns
        )
