"""The file tools make the same file-system calls on both faces.

The seven runtime tools are one source (``tools.async_runtime_tools``, from which the sync
``tools.runtime_tools`` is generated), so a tool call is the same sequence of audited
file-system operations whether it runs in ``SkillTools`` or in ``AsyncSkillTools``. Before the
two became one source the async ``read`` and ``edit`` asked ``stat`` before every read and the
async ``write`` asked ``stat`` before writing; the sync tools read in one call and ``write`` is
one ``overwrite_text``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from audit_capture import AuditCapture

from skillruntime.core.tools import AsyncSkillTools, SkillTools
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime

CALLS: list[tuple[str, dict[str, Any], str, list[str]]] = [
    ("write", {"file_path": "notes.txt", "content": "a\nb\n"}, "Successfully created", ["write"]),
    ("write", {"file_path": "notes.txt", "content": "a\nb\nc\n"}, "overwrote", ["write"]),
    ("read", {"file_path": "notes.txt"}, "Showing lines 1-3 of 3", ["read"]),
    (
        "edit",
        {"file_path": "notes.txt", "old_string": "b", "new_string": "B"},
        "1 occurrence",
        ["read", "write"],
    ),
    ("read", {"file_path": "missing.txt"}, "Error: File does not exist", ["read", "stat"]),
    ("write", {"file_path": ".", "content": "x"}, "Error: Path is a directory", ["write"]),
    ("ls", {}, "[file] notes.txt", ["stat", "list"]),
]
"""(tool, arguments, a part of the answer, the audited ``file.*`` operations, in order)."""


def _file_calls(capture: AuditCapture) -> list[str]:
    kinds = [event.kind.removeprefix("file.") for event in capture.events]
    capture.collector.events.clear()
    return [kind for kind in kinds if kind in {"read", "write", "stat", "list"}]


def _sync_face(tmp_path: Path, capture: AuditCapture) -> list[tuple[str, list[str]]]:
    seen = []
    with LocalSkillRuntime(work_root=tmp_path) as runtime:
        tools = SkillTools(runtime)
        for name, arguments, _, _ in CALLS:
            capture.collector.events.clear()
            seen.append((tools.dispatch(name, arguments), _file_calls(capture)))
    return seen


def _async_face(tmp_path: Path, capture: AuditCapture) -> list[tuple[str, list[str]]]:
    async def scenario() -> list[tuple[str, list[str]]]:
        seen = []
        async with AsyncLocalSkillRuntime(work_root=tmp_path) as runtime:
            tools = AsyncSkillTools(runtime)
            for name, arguments, _, _ in CALLS:
                capture.collector.events.clear()
                seen.append((await tools.adispatch(name, arguments), _file_calls(capture)))
        return seen

    return asyncio.run(scenario())


@pytest.mark.parametrize("face", ["sync", "async"])
def test_each_tool_call_makes_the_same_file_system_calls(
    face: str, tmp_path: Path, capture: AuditCapture
) -> None:
    seen = (_sync_face if face == "sync" else _async_face)(tmp_path, capture)
    for (name, _, answer_part, expected), (answer, calls) in zip(CALLS, seen, strict=True):
        assert answer_part in answer, (name, answer)
        assert calls == expected, (name, answer)


def test_both_faces_answer_alike(tmp_path: Path, capture: AuditCapture) -> None:
    (tmp_path / "sync").mkdir()
    (tmp_path / "async").mkdir()
    sync_answers = [answer for answer, _ in _sync_face(tmp_path / "sync", capture)]
    async_answers = [answer for answer, _ in _async_face(tmp_path / "async", capture)]
    assert [a.replace("/async", "/sync") for a in async_answers] == sync_answers
