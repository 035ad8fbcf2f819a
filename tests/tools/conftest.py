"""Fixtures of the tool suite.

The tools are tested against every runtime in :data:`RUNTIME_FACTORIES`; a new runtime joins the
suite by adding a factory there (it gets a fresh temporary directory and returns an open runtime).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from skillruntime.core.filesystem import SkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from skillruntime.core.runtime import SkillRuntime
from skillruntime.local import LocalSkillRuntime


def _local_work_root(tmp: Path) -> SkillRuntime:
    return LocalSkillRuntime(work_root=tmp / "work", kill_grace_seconds=0.2, drain_seconds=0.2)


def _local_conversation(tmp: Path) -> SkillRuntime:
    return LocalSkillRuntime(
        conversation_id="conv-1",
        conversations_root=tmp / "conversations",
        kill_grace_seconds=0.2,
        drain_seconds=0.2,
    )


RUNTIME_FACTORIES: dict[str, Callable[[Path], SkillRuntime]] = {
    "local-work-root": _local_work_root,
    "local-conversation": _local_conversation,
}


@pytest.fixture(params=sorted(RUNTIME_FACTORIES))
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SkillRuntime]:
    """An open runtime of each kind in :data:`RUNTIME_FACTORIES`; closed after the test."""
    rt = RUNTIME_FACTORIES[request.param](tmp_path / "runtime")
    try:
        yield rt
    finally:
        rt.close()


class CountingRuntime(SkillRuntime):
    """Delegates to ``inner``; counts ``prepare`` calls, can fail the first ``fail_first`` ones
    and records every execution request."""

    def __init__(self, inner: SkillRuntime, *, fail_first: int = 0, delay: float = 0.0) -> None:
        self.inner = inner
        self.prepare_calls = 0
        self.prepare_requests: list[SkillPreparationRequest] = []
        self.executed: list[SkillExecutionRequest] = []
        self.fail_first = fail_first
        self.delay = delay
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def default_working_directory(self) -> str:
        return self.inner.default_working_directory

    def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        with self._lock:
            self.prepare_calls += 1
            self.prepare_requests.append(request)
            call = self.prepare_calls
        if self.delay:
            threading.Event().wait(self.delay)
        if call <= self.fail_first:
            raise RuntimeError(f"prepare failure number {call}")
        return self.inner.prepare(request)

    def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        with self._lock:
            self.executed.append(request)
        return self.inner.execute(request)

    def get_file_system(self) -> SkillRuntimeFileSystem:
        return self.inner.get_file_system()

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def counting() -> type[CountingRuntime]:
    """The :class:`CountingRuntime` wrapper class."""
    return CountingRuntime


SkillFactory = Callable[..., Skill]


@pytest.fixture
def make_skill(tmp_path: Path) -> SkillFactory:
    """Write a skill directory under ``tmp_path/skills`` and return its :class:`Skill`.

    Keyword arguments: ``description``, ``body``, ``files`` (relative path → text) and any extra
    frontmatter keys (``allowed_tools`` is written as ``allowed-tools``).
    """

    def make(
        name: str,
        *,
        description: str = "A test skill.",
        body: str = "Instructions.\n",
        files: Mapping[str, str] | None = None,
        **frontmatter: Any,
    ) -> Skill:
        root = tmp_path / "skills" / name
        root.mkdir(parents=True, exist_ok=True)
        meta: dict[str, Any] = {"name": name, "description": description}
        for key, value in frontmatter.items():
            meta[key.replace("_", "-")] = value
        (root / "SKILL.md").write_text(f"---\n{yaml.safe_dump(meta)}---\n{body}")
        for relative, text in (files or {}).items():
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        return Skill(
            name=name,
            description=description,
            base_path=str(root),
            frontmatter=meta,
            body=body,
        )

    return make
