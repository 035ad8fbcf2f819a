"""``conversations_root`` is absolute everywhere; the CLI resolves a relative one it is given.

The library refuses a relative root (it would name another directory from another working
directory); ``-o conversations_root=REL`` on the command line means the shell's directory.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillruntime.core.cli import cli
from skillruntime.core.plugins.registry import create_async_runtime, create_runtime
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime


@pytest.mark.parametrize("root", ["convs", Path("convs"), "./convs", "a/../convs"])
def test_the_library_refuses_a_relative_root(
    root: str | Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="conversations_root must be an absolute path"):
        LocalSkillRuntime(conversation_id="c1", conversations_root=root)
    with pytest.raises(ValueError, match="conversations_root must be an absolute path"):
        create_runtime("local", conversation_id="c1", conversations_root=str(root))

    async def build() -> None:
        with pytest.raises(ValueError, match="conversations_root must be an absolute path"):
            AsyncLocalSkillRuntime(conversation_id="c1", conversations_root=root)
        with pytest.raises(ValueError, match="conversations_root must be an absolute path"):
            create_async_runtime("local", conversation_id="c1", conversations_root=str(root))

    asyncio.run(build())
    assert list(tmp_path.iterdir()) == []


def test_the_library_takes_an_absolute_root_and_expands_a_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with LocalSkillRuntime(conversation_id="c1", conversations_root="~/convs") as runtime:
        assert runtime.default_working_directory == str(tmp_path / "home" / "convs" / "c1")
    with LocalSkillRuntime(conversation_id="c1", conversations_root=tmp_path / "x") as runtime:
        assert runtime.default_working_directory == str(tmp_path / "x" / "c1")


def test_the_cli_resolves_a_relative_root_against_the_current_directory(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SKILLRUNTIME_LOCAL_CONVERSATIONS_ROOT", raising=False)
    result = runner.invoke(
        cli, ["exec", "--conversation", "c1", "-o", "conversations_root=convs", "--", "pwd"]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{tmp_path / 'convs' / 'c1'}\n"


def test_a_relative_root_from_the_environment_is_a_usage_error(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(
        cli,
        ["exec", "--conversation", "c1", "--", "pwd"],
        env={"SKILLRUNTIME_LOCAL_CONVERSATIONS_ROOT": "convs"},
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: conversations_root must be an absolute path")
    assert not (tmp_path / "convs").exists()
