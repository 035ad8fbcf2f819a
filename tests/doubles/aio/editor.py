"""``POST /v1/file/str_replace_editor``: the view/create/str_replace/insert/undo_edit tool.

Tool-level failures (bad path, no or several matches, bad line, nothing to undo) are HTTP 400
with ``{"success": false, "message": …, "data": null}``; integrators see them as SDK
``ApiError``s whose ``body.message`` contains "did not appear", "Multiple occurrences" /
"unique", "does not exist" or "Invalid `path`" (the status code itself is not documented).
PDF/Excel/PPTX viewing is not supported (text files only).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from .protocol import Field, HttpError, envelope, validate

FIELDS = {
    "command": Field(
        "str",
        required=True,
        nullable=False,
        choices=("view", "create", "str_replace", "insert", "undo_edit"),
    ),
    "path": Field("str", required=True, nullable=False),
    "file_text": Field("str"),
    "old_str": Field("str"),
    "new_str": Field("str"),
    "insert_line": Field("int"),
    "view_range": Field("int_list", default=[]),
    "replace_mode": Field("str", choices=("ALL", "FIRST", "LAST")),
    "page_range": Field("int_list"),
    "sheet_name": Field("str"),
    "row_range": Field("int_list"),
    "slide_range": Field("int_list"),
    "enable_metadata": Field("bool", default=False),
}

_HISTORY_DEPTH = 10


def _fail(message: str) -> HttpError:
    return HttpError(400, {"success": False, "message": message, "data": None, "hint": None})


def _numbered(text: str, first: int = 1) -> str:
    return "\n".join(f"{n:6}\t{line}" for n, line in enumerate(text.split("\n"), start=first))


class Editor:
    """Stateful editor (keeps a bounded undo history per path)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._history: dict[str, list[str]] = {}

    def _remember(self, path: str, content: str) -> None:
        with self._lock:
            stack = self._history.setdefault(path, [])
            stack.append(content)
            del stack[:-_HISTORY_DEPTH]

    def handle(self, body: Any) -> dict[str, Any]:
        params = validate(body, FIELDS)
        path: str = params["path"]
        command: str = params["command"]
        if not path.startswith("/"):
            raise _fail(
                f"Invalid `path` parameter: {path}. The path should be an absolute path, "
                "starting with `/`."
            )
        target = Path(os.path.normpath(path))
        exists = target.exists()
        if command == "create":
            if exists:
                raise _fail(
                    f"Invalid `path` parameter: {path}. File already exists at: {path}. "
                    "Cannot overwrite files using command `create`."
                )
            if params["file_text"] is None:
                raise _fail("Parameter `file_text` is required for command: create")
            try:
                target.write_text(params["file_text"], "utf-8")
            except OSError as exc:
                raise _fail(f"Ran into {exc} while trying to write to {path}") from exc
            self._remember(path, "")
            return self._ok(
                path, f"File created successfully at: {path}", False, None, params["file_text"]
            )
        if not exists:
            raise _fail(
                f"Invalid `path` parameter: {path}. The path {path} does not exist. "
                "Please provide a valid path."
            )
        if command == "view" and target.is_dir():
            entries = sorted(
                str(p)
                for p in target.rglob("*")
                if len(p.relative_to(target).parts) <= 2
                and not any(part.startswith(".") for part in p.relative_to(target).parts)
            )
            listing = "\n".join([str(target), *entries])
            output = (
                f"Here's the files and directories up to 2 levels deep in {path}, excluding "
                f"hidden items:\n{listing}"
            )
            return self._ok(path, output, True, None, None)
        if target.is_dir():
            raise _fail(
                f"Invalid `path` parameter: {path}. The path {path} is a directory and only "
                "the `view` command can be used on directories."
            )
        try:
            content = target.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _fail(f"Ran into {exc} while trying to read {path}") from exc
        if command == "view":
            return self._view(path, content, params["view_range"] or [])
        if command == "str_replace":
            return self._replace(target, path, content, params)
        if command == "insert":
            return self._insert(target, path, content, params)
        with self._lock:
            stack = self._history.get(path) or []
            previous = stack.pop() if stack else None
        if previous is None:
            raise _fail(f"No edit history found for {path}.")
        target.write_text(previous, "utf-8")
        return self._ok(path, f"Last edit to {path} undone successfully.", True, content, previous)

    @staticmethod
    def _ok(
        path: str, output: str, prev_exist: bool, old: str | None, new: str | None
    ) -> dict[str, Any]:
        data = {
            "output": output,
            "error": None,
            "path": path,
            "prev_exist": prev_exist,
            "old_content": old,
            "new_content": new,
            "metadata": None,
        }
        return envelope(data)

    def _view(self, path: str, content: str, view_range: list[int]) -> dict[str, Any]:
        lines = content.split("\n")
        first = 1
        if view_range:
            if len(view_range) != 2:
                raise _fail("Invalid `view_range`. It should be a list of two integers.")
            start, end = view_range
            if not 1 <= start <= len(lines) or (end != -1 and not start <= end <= len(lines)):
                raise _fail(
                    f"Invalid `view_range`: {view_range}. It should be within the range of "
                    f"lines of the file: [1, {len(lines)}]"
                )
            lines = lines[start - 1 :] if end == -1 else lines[start - 1 : end]
            first = start
        output = f"Here's the result of running `cat -n` on {path}:\n" + _numbered(
            "\n".join(lines), first
        )
        return self._ok(path, output, True, None, None)

    def _replace(
        self, target: Path, path: str, content: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        old: str | None = params["old_str"]
        new: str = params["new_str"] or ""
        if old is None:
            raise _fail("Parameter `old_str` is required for command: str_replace")
        count = content.count(old) if old else 0
        if count == 0:
            raise _fail(
                f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}."
            )
        mode = params["replace_mode"]
        if mode is None and count > 1:
            lines = [n + 1 for n, line in enumerate(content.split("\n")) if old in line]
            raise _fail(
                f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines "
                f"{lines}. Please ensure it is unique."
            )
        if mode == "LAST":
            head, _, tail = content.rpartition(old)
            updated = head + new + tail
        else:
            updated = content.replace(old, new, -1 if mode == "ALL" else 1)
        self._remember(path, content)
        target.write_text(updated, "utf-8")
        return self._ok(path, f"The file {path} has been edited.", True, content, updated)

    def _insert(
        self, target: Path, path: str, content: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        line: int | None = params["insert_line"]
        new: str | None = params["new_str"]
        if line is None or new is None:
            raise _fail("Parameters `insert_line` and `new_str` are required for command: insert")
        lines = content.split("\n")
        if not 0 <= line <= len(lines):
            raise _fail(
                f"Invalid `insert_line` parameter: {line}. It should be within the range of "
                f"lines of the file: [0, {len(lines)}]"
            )
        updated = "\n".join([*lines[:line], *new.split("\n"), *lines[line:]])
        self._remember(path, content)
        target.write_text(updated, "utf-8")
        return self._ok(path, f"The file {path} has been edited.", True, content, updated)
