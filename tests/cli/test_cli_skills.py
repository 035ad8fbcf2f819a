"""`skillruntime skills validate` and `skillruntime skills list`."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
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


# ------------------------------------------------------------------ strict and skill roots


def test_validate_strict_rejects_keys_outside_the_specification(
    runner: CliRunner, make_skill: Any
) -> None:
    skill = make_skill("claude", "when_to_use: When asked.\nuser-invocable: false\n")

    lenient = runner.invoke(cli, ["skills", "validate", str(skill)])
    strict = runner.invoke(cli, ["skills", "validate", "--strict", str(skill)])

    assert lenient.exit_code == 0, lenient.output
    assert lenient.stdout.count("warning: unknown frontmatter key") == 2
    assert strict.exit_code == 1, strict.output
    assert "error: unknown frontmatter key 'when_to_use'" in strict.stdout
    assert "error: unknown frontmatter key 'user-invocable'" in strict.stdout
    assert strict.stderr == "Error: 2 error(s) found\n"


def test_validate_of_a_root_checks_every_skill_under_it(
    runner: CliRunner, make_skill: Any, tmp_path: Path
) -> None:
    alpha = make_skill("alpha")
    make_skill("beta", "license: [MIT]\n")
    gamma = make_skill("gamma")

    result = runner.invoke(cli, ["skills", "validate", str(tmp_path / "skills")])

    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"{alpha}: ok"
    assert lines[1].endswith("beta/SKILL.md: error: 'license' must be a string, not a list")
    assert lines[2] == f"{gamma}: ok"
    assert result.stderr == "Error: 1 error(s) found\n"


def test_validate_of_a_folder_without_skills_is_an_error(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()

    result = runner.invoke(cli, ["skills", "validate", str(tmp_path)])

    assert result.exit_code == 1
    assert f"{tmp_path}: error: no SKILL.md in this directory" in result.stdout


def test_validate_lists_the_files_the_upload_policy_leaves_out(
    runner: CliRunner, make_skill: Any
) -> None:
    skill = make_skill("uipath")
    (skill / ".env").write_text("TOKEN=s3cr3t\n")
    (skill / "references" / "orchestrator").mkdir(parents=True)
    (skill / "references" / "orchestrator" / "Credentials.md").write_text("# How to log in\n")
    (skill / "certs").mkdir()
    (skill / "certs" / "client.pem").write_text("s3cr3t\n")

    result = runner.invoke(cli, ["skills", "validate", str(skill)])

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"{skill}: ok",
        f"{skill}: not copied: .env (upload policy: name '.env')",
        f"{skill}: not copied: certs/client.pem (upload policy: pattern '*.pem')",
    ]
    assert "s3cr3t" not in result.output


# ----------------------------------------------------------------- hidden folders, invalid


def test_list_explains_skills_in_hidden_folders(
    runner: CliRunner, make_skill: Any, tmp_path: Path
) -> None:
    root = tmp_path / "skills"
    make_skill("pdf", root=root / ".curated")
    make_skill("docx", root=root / ".curated")
    make_skill("installer", root=root / ".system")
    (root / ".git").mkdir()

    result = runner.invoke(cli, ["skills", "list", str(root)])

    assert result.exit_code == 0
    assert result.stdout == f"No skills found under {root}\n"
    assert ".curated/, .system/" in result.stderr
    assert ".git" not in result.stderr
    assert f"skillruntime skills list {root / '.curated'} {root / '.system'}" in result.stderr

    listed = runner.invoke(cli, ["skills", "list", str(root / ".curated"), str(root / ".system")])

    assert listed.exit_code == 0, listed.output
    assert [line.split()[0] for line in listed.stdout.splitlines()[::2]] == [
        "docx",
        "installer",
        "pdf",
    ]


def test_list_skips_a_skill_that_validate_reports_invalid(
    runner: CliRunner, make_skill: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = make_skill("good")
    renamed = make_skill("renamed")
    (renamed / "SKILL.md").write_text("---\nname: other-name\ndescription: d\n---\n")

    assert runner.invoke(cli, ["skills", "validate", str(renamed)]).exit_code == 1
    with caplog.at_level(logging.WARNING, logger="skillruntime.core.skills"):
        result = runner.invoke(cli, ["skills", "list", "--json", str(tmp_path / "skills")])

    assert result.exit_code == 0, result.output
    assert [row["path"] for row in json.loads(result.stdout)] == [str(good)]
    assert "does not match its directory name" in caplog.text
    assert f"skipping the skill at {renamed}/SKILL.md: it has 1 error(s)" in caplog.text


def test_list_keeps_names_that_yaml_1_1_would_read_as_other_types(
    runner: CliRunner, make_skill: Any, tmp_path: Path
) -> None:
    for name in ("yes", "no", "2048", "0x1f", "2026-01-05"):
        make_skill(name)

    result = runner.invoke(cli, ["skills", "list", "--json", str(tmp_path / "skills")])

    assert [row["name"] for row in json.loads(result.stdout)] == [
        "0x1f",
        "2026-01-05",
        "2048",
        "no",
        "yes",
    ]


def test_exec_skips_invalid_skills_and_refuses_one_it_is_asked_for(
    runner: CliRunner, recorder: Any, make_skill: Any, tmp_path: Path
) -> None:
    make_skill("good")
    broken = make_skill("broken")
    (broken / "SKILL.md").write_text("---\nname: broken\ndescription: d\nlicense: [MIT]\n---\n")
    root = str(tmp_path / "skills")

    every = runner.invoke(cli, ["exec", "--runtime", "recording", "--skills-root", root, "true"])
    named = runner.invoke(
        cli,
        ["exec", "--runtime", "recording", "--skills-root", root, "--skill", "broken", "true"],
    )

    assert every.exit_code == 0, every.output
    assert [s.name for s in recorder.prepared[0].skills] == ["good"]
    assert named.exit_code == 1
    assert "are invalid: broken" in named.stderr
    assert f"skillruntime skills validate {root}" in named.stderr
    assert len(recorder.requests) == 1


def test_list_says_how_to_fix_a_too_long_description_and_lenient_lists_it(
    runner: CliRunner, make_skill: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = make_skill("good")
    long = make_skill("long")  # a public skill has a 1 068-character description
    (long / "SKILL.md").write_text(f"---\nname: long\ndescription: {'d' * 1068}\n---\nBody.\n")
    root = str(tmp_path / "skills")

    with caplog.at_level(logging.WARNING, logger="skillruntime.core.skills"):
        strict = runner.invoke(cli, ["skills", "list", "--json", root])
        lenient = runner.invoke(cli, ["skills", "list", "--json", "--lenient", root])

    assert strict.exit_code == 0, strict.output
    assert [row["path"] for row in json.loads(strict.stdout)] == [str(good)]
    assert "'description' is 1068 characters; at most 1024 are allowed: shorten it" in caplog.text
    assert strict.stderr.splitlines() == [
        f"Hint: 1 invalid skill(s) skipped (see the warnings above): fix them (skillruntime "
        f"skills validate {root} lists every problem), or pass --lenient to list them anyway"
    ]
    assert lenient.exit_code == 0, lenient.output
    assert [row["path"] for row in json.loads(lenient.stdout)] == [str(good), str(long)]
    assert lenient.stderr == ""


def test_exec_lenient_prepares_a_skill_with_a_too_long_description(
    runner: CliRunner, recorder: Any, make_skill: Any, tmp_path: Path
) -> None:
    long = make_skill("long")
    (long / "SKILL.md").write_text(f"---\nname: long\ndescription: {'d' * 1068}\n---\nBody.\n")
    root = str(tmp_path / "skills")
    base = ["exec", "--runtime", "recording", "--skills-root", root, "--skill", "long"]

    refused = runner.invoke(cli, [*base, "true"])
    lenient = runner.invoke(cli, [*base, "--lenient", "true"])

    assert refused.exit_code == 1
    assert "--lenient prepares them anyway" in refused.stderr
    assert lenient.exit_code == 0, lenient.output
    assert [s.name for s in recorder.prepared[0].skills] == ["long"]
