"""`skillruntime skills validate` and `skillruntime skills list`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from skillruntime.core.cli import cli


def test_validate_reports_ok_for_a_valid_skill(runner: CliRunner, make_skill: Any) -> None:
    skill = make_skill("tidy")

    result = runner.invoke(cli, ["skills", "validate", str(skill)])

    assert result.exit_code == 0, result.output
    assert result.output == f"{skill}: ok\n"


def test_validate_fails_with_each_problem_listed(
    runner: CliRunner, make_skill: Any, tmp_path: Path
) -> None:
    good = make_skill("good")
    bad = tmp_path / "skills" / "bad"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: bad\n---\nNo description.\n")

    result = runner.invoke(cli, ["skills", "validate", str(good), str(bad)])

    assert result.exit_code == 1
    assert f"{good}: ok" in result.stdout
    assert "error: 'description' is missing" in result.stdout
    assert result.stderr == "Error: 1 error(s) found\n"


def test_validate_passes_with_warnings_only(runner: CliRunner, make_skill: Any) -> None:
    skill = make_skill("warned", "colour: blue\n")

    result = runner.invoke(cli, ["skills", "validate", str(skill)])

    assert result.exit_code == 0
    assert "warning: unknown frontmatter key" in result.stdout


def test_validate_missing_path_is_a_usage_error(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["skills", "validate", str(tmp_path / "absent")])

    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_list_shows_name_description_and_path(
    runner: CliRunner, make_skill: Any, tmp_path: Path
) -> None:
    alpha = make_skill("alpha")
    beta = make_skill("beta")

    result = runner.invoke(cli, ["skills", "list", str(tmp_path / "skills")])

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"alpha  {alpha}"
    assert lines[1].strip() == "The alpha skill does things."
    assert lines[2] == f"beta   {beta}"


def test_list_json(runner: CliRunner, make_skill: Any, tmp_path: Path) -> None:
    alpha = make_skill("alpha")

    result = runner.invoke(cli, ["skills", "list", "--json", str(tmp_path / "skills")])

    assert json.loads(result.stdout) == [
        {"name": "alpha", "description": "The alpha skill does things.", "path": str(alpha)}
    ]


def test_list_of_an_empty_root_says_so(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["skills", "list", str(tmp_path)])

    assert result.exit_code == 0
    assert result.stdout == f"No skills found under {tmp_path}\n"
