"""BaseSkillRuntime machinery, independent of any backend: cache, bootstrap, env, closing."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Generator, Iterable, Sequence
from pathlib import Path

import pytest

from skillruntime.core.errors import RuntimeClosedError, SkillPrepareError, WorkspaceEscapeError
from skillruntime.core.files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT, SkillRuntimeFileSystem
from skillruntime.core.models import (
    BootstrapCommand,
    FileInfo,
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
    SkillRuntimeConfig,
)
from skillruntime.core.runtime.spi import BaseSkillRuntime, ready_marker_path
from skillruntime.core.runtime.workspace import ConversationWorkspace
from skillruntime.core.skills.files import SkillFile


class HostFs(SkillRuntimeFileSystem):
    """Minimal host file system for exercising the base class."""

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None, None]:
        with open(path, "rb") as handle:
            while chunk := handle.read(chunk_size):
                yield chunk

    def write_stream(self, path: str, chunks: Iterable[bytes], *, executable: bool = False) -> int:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        total = 0
        with open(path, "wb") as handle:
            for chunk in chunks:
                total += handle.write(chunk)
        Path(path).chmod(0o755 if executable else 0o644)
        return total

    def stat(self, path: str) -> FileInfo | None:
        p = Path(path)
        if not p.exists():
            return None
        return FileInfo(path=path, is_directory=p.is_dir(), size=p.stat().st_size)

    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        return [
            FileInfo(path=str(c), is_directory=c.is_dir()) for c in sorted(Path(path).iterdir())
        ][:limit]

    def delete(self, path: str) -> None:
        p = Path(path)
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()

    def make_directory(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)


class MiniRuntime(BaseSkillRuntime):
    def __init__(self, root: Path, conversation: str | None = "c1", **kwargs: object) -> None:
        workspace = ConversationWorkspace(str(root), conversation) if conversation else None
        super().__init__(workspace=workspace, **kwargs)  # type: ignore[arg-type]
        self.places = 0
        self.commands: list[tuple[str, str, dict[str, str]]] = []
        self.fs = HostFs()
        self.closed_count = 0

    @property
    def name(self) -> str:
        return "mini"

    @property
    def default_working_directory(self) -> str:
        assert self.workspace is not None
        Path(self.workspace.directory).mkdir(parents=True, exist_ok=True)
        return self.workspace.directory

    def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        self.commands.append((request.command, working_directory, environment))
        done = subprocess.run(
            ["bash", "-c", request.command],
            cwd=working_directory,
            env={"PATH": "/usr/bin:/bin", **environment},
            capture_output=True,
            text=True,
            check=False,
        )
        return SkillExecutionResult(
            exit_code=done.returncode, stdout=done.stdout, stderr=done.stderr
        )

    def _raw_file_system(self) -> SkillRuntimeFileSystem:
        return self.fs

    def _close_resources(self) -> None:
        self.closed_count += 1

    def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        self.places += 1
        super()._place_skill(skill, files, target)


@pytest.fixture
def skill(tmp_path: Path) -> Skill:
    d = tmp_path / "src" / "demo"
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text("---\nname: demo\ndescription: d\n---\n")
    return Skill(name="demo", description="d", base_path=str(d))


def test_prepare_places_once_and_names_copy_by_digest(tmp_path: Path, skill: Skill) -> None:
    runtime = MiniRuntime(tmp_path / "convs")
    request = SkillPreparationRequest(skills=(skill,))
    first = runtime.prepare(request)[0]
    second = runtime.prepare(request)[0]
    assert runtime.places == 1
    assert first.base_path == second.base_path
    assert first.base_path.startswith(str(tmp_path / "convs" / "c1" / "skills" / "demo-"))
    assert Path(ready_marker_path(first.base_path)).exists()
    assert skill.base_path == str(tmp_path / "src" / "demo")


def test_new_runtime_object_reuses_a_ready_copy(tmp_path: Path, skill: Skill) -> None:
    config = SkillRuntimeConfig(bootstrap=(BootstrapCommand(command="echo x >> runs"),))
    request = SkillPreparationRequest(skills=(skill,), configs={"demo": config})
    first = MiniRuntime(tmp_path / "convs")
    prepared = first.prepare(request)[0]
    second = MiniRuntime(tmp_path / "convs")
    assert second.prepare(request)[0].base_path == prepared.base_path
    assert second.places == 0
    assert (Path(prepared.base_path) / "runs").read_text() == "x\n"


def test_failed_bootstrap_caches_nothing_and_is_retried(tmp_path: Path, skill: Skill) -> None:
    flag = tmp_path / "fail-once"
    flag.write_text("")
    step = BootstrapCommand(command=f"if [ -e {flag} ]; then rm {flag}; echo boom >&2; exit 7; fi")
    request = SkillPreparationRequest(
        skills=(skill,),
        configs={"demo": SkillRuntimeConfig(bootstrap=(step,), environment={"K": "v"})},
    )
    runtime = MiniRuntime(tmp_path / "convs")
    with pytest.raises(SkillPrepareError) as info:
        runtime.prepare(request)
    assert info.value.exit_code == 7
    assert "boom" in info.value.output_tail
    assert "K" not in runtime.effective_environment({})
    prepared = runtime.prepare(request)[0]
    assert runtime.places == 2
    assert Path(prepared.base_path).is_dir()
    assert runtime.effective_environment({})["K"] == "v"


def test_environment_precedence(tmp_path: Path, skill: Skill) -> None:
    runtime = MiniRuntime(
        tmp_path / "convs", base_environment={"A": "base", "B": "base", "C": "base"}
    )
    config = SkillRuntimeConfig(environment={"B": "skill", "C": "skill"})
    runtime.prepare(SkillPreparationRequest(skills=(skill,), configs={"demo": config}))
    result = runtime.execute(
        SkillExecutionRequest(command='echo "$A $B $C"', environment={"C": "request"})
    )
    assert result.stdout == "base skill request\n"


def test_execute_scopes_working_directory(tmp_path: Path) -> None:
    runtime = MiniRuntime(tmp_path / "convs")
    with pytest.raises(WorkspaceEscapeError):
        runtime.execute(SkillExecutionRequest(command="true", working_directory="/"))
    assert runtime.commands == []
    (tmp_path / "convs" / "c1" / "sub").mkdir(parents=True)
    runtime.execute(SkillExecutionRequest(command="true", working_directory="sub"))
    assert runtime.commands[-1][1] == str(tmp_path / "convs" / "c1" / "sub")


def test_close_is_idempotent_and_blocks_everything(tmp_path: Path, skill: Skill) -> None:
    runtime = MiniRuntime(tmp_path / "convs")
    fs = runtime.get_file_system()
    runtime.close()
    runtime.close()
    assert runtime.closed_count == 1
    with pytest.raises(RuntimeClosedError):
        runtime.execute(SkillExecutionRequest(command="true"))
    with pytest.raises(RuntimeClosedError):
        runtime.prepare(SkillPreparationRequest(skills=(skill,)))
    with pytest.raises(RuntimeClosedError):
        runtime.get_file_system()
    with pytest.raises(RuntimeClosedError):
        fs.stat("x")


def test_concurrent_prepare_places_once(tmp_path: Path, skill: Skill) -> None:
    runtime = MiniRuntime(tmp_path / "convs")
    request = SkillPreparationRequest(skills=(skill,))
    barrier = threading.Barrier(8)
    paths: list[str] = []

    def work() -> None:
        barrier.wait()
        paths.append(runtime.prepare(request)[0].base_path)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert runtime.places == 1
    assert len(paths) == 8
    assert len(set(paths)) == 1


def test_in_place_prepare_without_workspace(tmp_path: Path, skill: Skill) -> None:
    runtime = MiniRuntime(tmp_path, conversation=None)
    prepared = runtime.prepare(SkillPreparationRequest(skills=(skill,)))[0]
    assert prepared.base_path == str(Path(skill.base_path).resolve())
    assert runtime.places == 0


def test_unreadable_skill_is_a_prepare_error(tmp_path: Path) -> None:
    ghost = Skill(name="ghost", base_path=str(tmp_path / "nope"))
    with pytest.raises(SkillPrepareError, match="Cannot read skill 'ghost'"):
        MiniRuntime(tmp_path / "convs").prepare(SkillPreparationRequest(skills=(ghost,)))
