"""Fixtures of the CLI tests: a clean plugin manager, a recording runtime, skill folders."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import Field

from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from skillruntime.core.plugins.registry import (
    RuntimeOptions,
    RuntimeProvider,
    hookimpl,
    register_plugin,
    reset_plugin_manager,
)
from skillruntime.core.runtime.spi import SkillRuntime


class RecordingOptions(RuntimeOptions):
    conversation_id: str | None = None
    region: str = Field(default="here", description="Where to run")


@dataclass
class Recorder:
    """What the ``recording`` runtime saw, and the result it answers with."""

    result: SkillExecutionResult = field(
        default_factory=lambda: SkillExecutionResult(exit_code=0, stdout="out\n", stderr="err\n")
    )
    options: list[RecordingOptions] = field(default_factory=list)
    requests: list[SkillExecutionRequest] = field(default_factory=list)
    prepared: list[SkillPreparationRequest] = field(default_factory=list)
    closed: int = 0


class RecordingRuntime(SkillRuntime):
    def __init__(self, recorder: Recorder, options: RecordingOptions) -> None:
        self.recorder = recorder
        recorder.options.append(options)

    @property
    def name(self) -> str:
        return "recording"

    @property
    def default_working_directory(self) -> str:
        return "/work"

    def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        self.recorder.prepared.append(request)
        return [s.with_base_path(f"/prepared/{s.name}") for s in request.skills]

    def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        self.recorder.requests.append(request)
        return self.recorder.result

    def get_file_system(self) -> SkillRuntimeFileSystem:
        raise NotImplementedError

    def close(self) -> None:
        self.recorder.closed += 1


class RecordingPlugin:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    @hookimpl
    def skillruntime_runtimes(self) -> list[RuntimeProvider[Any]]:
        def factory(options: RecordingOptions) -> SkillRuntime:
            return RecordingRuntime(self.recorder, options)

        return [
            RuntimeProvider(
                name="recording",
                description="Records what it is asked to do",
                options_model=RecordingOptions,
                factory=factory,
                distribution="tests-recording",
            )
        ]


@pytest.fixture(autouse=True)
def fresh_plugins() -> Iterator[None]:
    """Every test sees the installed entry points plus only the plugins it registers."""
    reset_plugin_manager()
    yield
    reset_plugin_manager()


@pytest.fixture
def recorder() -> Recorder:
    recorder = Recorder()
    register_plugin(RecordingPlugin(recorder), "recording")
    return recorder


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


SkillFactory = Callable[..., Path]


@pytest.fixture
def make_skill(tmp_path: Path) -> SkillFactory:
    """``make_skill(name, frontmatter_extra="", body=..., root=tmp_path/"skills")`` -> directory."""

    def make(
        name: str, frontmatter_extra: str = "", body: str = "Body.\n", root: Path | None = None
    ) -> Path:
        return _write_skill(root or tmp_path / "skills", name, frontmatter_extra, body)

    return make


def _write_skill(root: Path, name: str, frontmatter_extra: str, body: str) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: The {name} skill does things.\n"
        + textwrap.dedent(frontmatter_extra)
        + "---\n"
        + body
    )
    return directory
