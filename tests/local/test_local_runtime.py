"""LocalSkillRuntime modes: conversation workspace, work root copies, in-place prepare, plugin."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from skillruntime.core.errors import (
    RuntimeClosedError,
    SkillPrepareError,
    WorkspaceEscapeError,
)
from skillruntime.core.models import (
    BootstrapCommand,
    Skill,
    SkillExecutionRequest,
    SkillPreparationRequest,
    SkillRuntimeConfig,
)
from skillruntime.core.plugins.registry import (
    RuntimeOptionsError,
    available_runtimes,
    create_runtime,
)
from skillruntime.core.skills.files import iter_skill_files, skill_digest
from skillruntime.local import DEFAULT_CONVERSATIONS_ROOT, LocalRuntimeOptions, LocalSkillRuntime


def _digest12(skill: Skill) -> str:
    return skill_digest(iter_skill_files(Path(skill.base_path)))[:12]


def test_conversation_workspace_is_created_and_is_default_cwd(tmp_path: Path) -> None:
    root = tmp_path / "conversations"
    rt = LocalSkillRuntime(conversation_id="c1", conversations_root=root)
    assert rt.default_working_directory == str(root / "c1")
    assert not (root / "c1").exists()  # created on first use
    result = rt.execute(SkillExecutionRequest(command="pwd"))
    assert result.stdout.strip() == str(root / "c1")
    rt.close()
    assert (root / "c1").is_dir()  # close deletes no workspace


def test_conversation_paths_outside_workspace_are_refused(
    conversation_runtime: LocalSkillRuntime, tmp_path: Path
) -> None:
    fs = conversation_runtime.get_file_system()
    fs.write_text("notes/a.txt", "hello")
    workspace = Path(conversation_runtime.default_working_directory)
    assert (workspace / "notes" / "a.txt").read_text() == "hello"
    with pytest.raises(WorkspaceEscapeError):
        fs.read_text("../other/secret.txt")
    with pytest.raises(WorkspaceEscapeError):
        fs.write_text(str(tmp_path / "outside.txt"), "x")
    with pytest.raises(WorkspaceEscapeError):
        conversation_runtime.execute(
            SkillExecutionRequest(command="pwd", working_directory=str(tmp_path))
        )


def test_symlink_escape_is_refused_in_conversation_workspace(
    conversation_runtime: LocalSkillRuntime, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    fs = conversation_runtime.get_file_system()
    workspace = Path(conversation_runtime.default_working_directory)
    (workspace / "escape").symlink_to(outside)
    (workspace / "inner").mkdir()
    (workspace / "inner-link").symlink_to(workspace / "inner")
    with pytest.raises(WorkspaceEscapeError):
        fs.read_text("escape/secret.txt")
    with pytest.raises(WorkspaceEscapeError):
        fs.write_text("escape/new.txt", "x")
    with pytest.raises(WorkspaceEscapeError):
        fs.delete("escape/secret.txt")
    with pytest.raises(WorkspaceEscapeError):
        conversation_runtime.execute(
            SkillExecutionRequest(command="pwd", working_directory="escape")
        )
    assert not (outside / "new.txt").exists()
    assert (outside / "secret.txt").exists()
    fs.write_text("inner-link/ok.txt", "fine")  # a link that stays inside is allowed
    assert (workspace / "inner" / "ok.txt").read_text() == "fine"


def test_conversation_prepare_copies_into_workspace_skills(
    conversation_runtime: LocalSkillRuntime, skill: Skill
) -> None:
    [prepared] = conversation_runtime.prepare(SkillPreparationRequest(skills=(skill,)))
    workspace = Path(conversation_runtime.default_working_directory)
    assert prepared.base_path == str(workspace / "skills" / f"demo-skill-{_digest12(skill)}")
    copy = Path(prepared.base_path)
    assert (copy / "SKILL.md").is_file()
    assert not (copy / ".env").exists()
    assert stat.S_IMODE((copy / "scripts" / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((copy / "SKILL.md").stat().st_mode) == 0o644
    assert (copy / "assets" / "deep" / "data.bin").read_bytes() == bytes(range(256))
    leftovers = [p.name for p in copy.parent.iterdir() if p.name.endswith(".partial")]
    assert leftovers == []
    result = conversation_runtime.execute(
        SkillExecutionRequest(command="./scripts/run.sh", working_directory=prepared.base_path)
    )
    assert result.stdout == "ran\n"


def test_skills_directory_linked_outside_workspace_is_refused(
    conversation_runtime: LocalSkillRuntime, skill: Skill, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    workspace = Path(conversation_runtime.default_working_directory)
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "skills").symlink_to(outside)
    with pytest.raises(SkillPrepareError, match="outside the conversation workspace"):
        conversation_runtime.prepare(SkillPreparationRequest(skills=(skill,)))
    assert list(outside.iterdir()) == []


def test_work_root_copy_naming_and_default_cwd(
    runtime: LocalSkillRuntime, skill: Skill, tmp_path: Path
) -> None:
    assert runtime.default_working_directory == str(tmp_path / "work")
    [prepared] = runtime.prepare(SkillPreparationRequest(skills=(skill,)))
    expected = tmp_path / "work" / "skills" / f"demo-skill-{_digest12(skill)}"
    assert prepared.base_path == str(expected)
    assert (expected / "scripts" / "run.sh").is_file()
    assert skill.base_path != prepared.base_path  # input untouched
    (Path(skill.base_path) / "SKILL.md").write_text("---\nname: demo-skill\n---\nchanged\n")
    [again] = runtime.prepare(SkillPreparationRequest(skills=(skill,)))
    assert again.base_path != prepared.base_path
    assert Path(again.base_path).name == f"demo-skill-{_digest12(skill)}"


def test_in_place_prepare_returns_source_and_runs_bootstrap_there(
    tmp_path: Path, skill: Skill, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with LocalSkillRuntime() as rt:
        assert rt.default_working_directory == str(tmp_path)
        config = SkillRuntimeConfig(bootstrap=(BootstrapCommand(command="touch bootstrapped"),))
        [prepared] = rt.prepare(
            SkillPreparationRequest(skills=(skill,), configs={skill.name: config})
        )
        assert prepared.base_path == str(Path(skill.base_path).resolve())
        assert (Path(skill.base_path) / "bootstrapped").exists()
        assert not (tmp_path / "skills").exists()


def test_bootstrap_failure_leaves_nothing_recorded(
    runtime: LocalSkillRuntime, skill: Skill
) -> None:
    config = SkillRuntimeConfig(bootstrap=(BootstrapCommand(command="echo nope; exit 7"),))
    request = SkillPreparationRequest(skills=(skill,), configs={skill.name: config})
    with pytest.raises(SkillPrepareError) as failure:
        runtime.prepare(request)
    assert failure.value.exit_code == 7
    assert "nope" in failure.value.output_tail
    counter = Path(runtime.default_working_directory) / "count"
    config_ok = SkillRuntimeConfig(
        bootstrap=(BootstrapCommand(command=f"echo x >> {counter}"),), environment={"K": "v"}
    )
    request_ok = SkillPreparationRequest(skills=(skill,), configs={skill.name: config_ok})
    runtime.prepare(request_ok)
    runtime.prepare(request_ok)
    assert counter.read_text() == "x\n"
    assert runtime.execute(SkillExecutionRequest(command="echo $K")).stdout == "v\n"


@pytest.mark.parametrize("copier", ["copy_and_hash", "copy_skill_files"])
def test_failed_copy_leaves_no_partial_directory(
    runtime: LocalSkillRuntime, skill: Skill, monkeypatch: pytest.MonkeyPatch, copier: str
) -> None:
    """Both copy paths: hashing while copying (a cold prepare) and copying after the digest
    (here: another version of the skill was prepared before)."""
    import skillruntime.local.layout as layout_module

    skills_root = Path(runtime.default_working_directory) / "skills"
    before: list[Path] = []
    if copier == "copy_skill_files":
        runtime.prepare(SkillPreparationRequest(skills=(skill,)))
        (Path(skill.base_path) / "SKILL.md").write_text("---\nname: demo-skill\n---\nnew\n")
        before = list(skills_root.iterdir())

    def broken_copy(files: object, target: Path) -> None:
        (target / "half.txt").write_text("half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(layout_module, copier, broken_copy)
    with pytest.raises(SkillPrepareError, match="No space left"):
        runtime.prepare(SkillPreparationRequest(skills=(skill,)))
    assert list(skills_root.iterdir()) == before


def test_resumed_runtime_reuses_ready_copy_without_bootstrap(tmp_path: Path, skill: Skill) -> None:
    root = tmp_path / "conversations"
    marker = tmp_path / "bootstraps"
    config = SkillRuntimeConfig(bootstrap=(BootstrapCommand(command=f"echo x >> {marker}"),))
    request = SkillPreparationRequest(skills=(skill,), configs={skill.name: config})
    with LocalSkillRuntime(conversation_id="c", conversations_root=root) as first:
        [one] = first.prepare(request)
        (Path(one.base_path) / "runtime-created.txt").write_text("kept")
    with LocalSkillRuntime(conversation_id="c", conversations_root=root) as second:
        [two] = second.prepare(request)
    assert one.base_path == two.base_path
    assert (Path(two.base_path) / "runtime-created.txt").read_text() == "kept"
    assert marker.read_text() == "x\n"


def test_closed_runtime_refuses_everything(tmp_path: Path, skill: Skill) -> None:
    rt = LocalSkillRuntime(work_root=tmp_path)
    fs = rt.get_file_system()
    rt.close()
    rt.close()
    with pytest.raises(RuntimeClosedError):
        rt.execute(SkillExecutionRequest(command="true"))
    with pytest.raises(RuntimeClosedError):
        rt.prepare(SkillPreparationRequest(skills=(skill,)))
    with pytest.raises(RuntimeClosedError):
        fs.read_text("x")


def test_invalid_mode_combinations_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="conversation_id"):
        LocalSkillRuntime(conversations_root=tmp_path)
    with pytest.raises(ValueError, match="work_root"):
        LocalSkillRuntime(conversation_id="c", conversations_root=tmp_path, work_root=tmp_path)
    with pytest.raises(ValueError, match="conversation_id"):
        LocalSkillRuntime(conversation_id="../x", conversations_root=tmp_path)


def test_default_conversations_root_is_under_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    rt = LocalSkillRuntime(conversation_id="c9")
    assert str(DEFAULT_CONVERSATIONS_ROOT) == "~/.skillruntime/conversations"
    assert rt.default_working_directory == str(tmp_path / ".skillruntime" / "conversations" / "c9")


def test_plugin_registers_local_runtime_with_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = available_runtimes()["local"]
    assert provider.options_model is LocalRuntimeOptions
    assert provider.distribution == "skillruntime-local"
    monkeypatch.setenv("SKILLRUNTIME_LOCAL_KILL_GRACE_SECONDS", "0.25")
    rt = create_runtime("local", work_root=str(tmp_path))
    try:
        assert isinstance(rt, LocalSkillRuntime)
        assert rt.default_working_directory == str(tmp_path)
        assert rt._kill_grace == 0.25
    finally:
        rt.close()
    with pytest.raises(RuntimeOptionsError, match="work_root"):
        create_runtime("local", conversation_id="c", conversations_root="/tmp/x", work_root="/w")
    with pytest.raises(RuntimeOptionsError, match="no option"):
        create_runtime("local", colour="blue")


@pytest.mark.parametrize("proc_fd_paths", [True, False], ids=["proc-fd", "no-proc"])
def test_working_directory_is_confined_with_or_without_proc_fd_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, proc_fd_paths: bool
) -> None:
    """Without usable /proc/self/fd paths the command enters the checked path, and the confined
    open still refuses a link out of the workspace, on every command."""
    real_isdir = os.path.isdir
    probes: list[str] = []

    def isdir(path: str | os.PathLike[str]) -> bool:
        text = os.fspath(path)
        if text.startswith("/proc/self/fd/"):
            probes.append(text)
            return proc_fd_paths and real_isdir(text)
        return real_isdir(text)

    monkeypatch.setattr(os.path, "isdir", isdir)
    outside = tmp_path / "outside"
    outside.mkdir()
    with LocalSkillRuntime(conversation_id="c1", conversations_root=tmp_path / "c") as runtime:
        workspace = Path(runtime.default_working_directory)
        runtime.get_file_system().make_directory("inner")
        for _ in range(2):
            result = runtime.execute(
                SkillExecutionRequest(command="pwd", working_directory="inner")
            )
            assert result.stdout.strip() == str(workspace / "inner")
        (workspace / "escape").symlink_to(outside)
        for _ in range(2):
            with pytest.raises(WorkspaceEscapeError):
                runtime.execute(SkillExecutionRequest(command="pwd", working_directory="escape"))
    assert len(probes) == 1  # learnt on the first command, not probed again
