"""`skillruntime exec`: option plumbing, skills and bootstrap, output, exit status, errors."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from skillruntime.core.cli import cli
from skillruntime.core.models import BootstrapCommand, SkillExecutionResult

# ------------------------------------------------------------- with the recording runtime


def test_runtime_options_and_conversation_reach_the_runtime(
    runner: CliRunner, recorder: Any
) -> None:
    result = runner.invoke(
        cli,
        [
            "exec",
            "--runtime",
            "recording",
            "-o",
            "region=mars",
            "--conversation",
            "c-1",
            "--",
            "true",
        ],
    )

    assert result.exit_code == 0, result.output
    [options] = recorder.options
    assert options.region == "mars"
    assert options.conversation_id == "c-1"
    assert recorder.closed == 1


def test_runtime_option_falls_back_to_environment(
    runner: CliRunner, recorder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKILLRUNTIME_RECORDING_REGION", "venus")
    monkeypatch.setenv("SKILLRUNTIME_RUNTIME", "recording")

    result = runner.invoke(cli, ["exec", "true"])

    assert result.exit_code == 0, result.output
    assert recorder.options[0].region == "venus"


def test_request_carries_env_timeout_and_cwd(
    runner: CliRunner, recorder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FROM_SHELL", "inherited")

    result = runner.invoke(
        cli,
        [
            "exec",
            "--runtime",
            "recording",
            "-e",
            "A=1",
            "--env",
            "B=x=y",
            "-e",
            "FROM_SHELL",
            "--timeout",
            "7.5",
            "--cwd",
            "sub/dir",
            "echo $A",
        ],
    )

    assert result.exit_code == 0, result.output
    [request] = recorder.requests
    assert request.command == "echo $A"
    assert request.environment == {"A": "1", "B": "x=y", "FROM_SHELL": "inherited"}
    assert request.timeout_seconds == 7.5
    assert request.working_directory == "sub/dir"


def test_several_command_arguments_are_quoted_and_joined(runner: CliRunner, recorder: Any) -> None:
    result = runner.invoke(
        cli, ["exec", "--runtime", "recording", "printf", "%s\n", "two words", "-la"]
    )

    assert result.exit_code == 0, result.output
    assert recorder.requests[0].command == "printf '%s\n' 'two words' -la"


def test_output_goes_to_matching_streams_and_exit_status_follows(
    runner: CliRunner, recorder: Any
) -> None:
    recorder.result = SkillExecutionResult(exit_code=7, stdout="to out", stderr="to err")

    result = runner.invoke(cli, ["exec", "--runtime", "recording", "false"])

    assert result.exit_code == 7
    assert result.stdout == "to out"
    assert result.stderr == "to err"


def test_timeout_exits_124_and_keeps_partial_output(runner: CliRunner, recorder: Any) -> None:
    recorder.result = SkillExecutionResult(exit_code=-1, stdout="partial", timed_out=True)

    result = runner.invoke(cli, ["exec", "--runtime", "recording", "--timeout", "2", "sleep 9"])

    assert result.exit_code == 124
    assert result.stdout == "partial"
    assert "timed out after 2 s" in result.stderr


def test_killed_by_signal_exits_like_a_shell(runner: CliRunner, recorder: Any) -> None:
    recorder.result = SkillExecutionResult(exit_code=-9)

    result = runner.invoke(cli, ["exec", "--runtime", "recording", "x"])

    assert result.exit_code == 137


def test_named_skills_are_prepared_with_their_bootstrap_config(
    runner: CliRunner, recorder: Any, make_skill: Any, tmp_path: Path
) -> None:
    make_skill("alpha", "metadata:\n  skillruntime:\n    bootstrap:\n      - make\n")
    make_skill("beta")
    make_skill("gamma")

    result = runner.invoke(
        cli,
        [
            "exec",
            "--runtime",
            "recording",
            "--skills-root",
            str(tmp_path / "skills"),
            "--skill",
            "gamma",
            "--skill",
            "alpha",
            "-v",
            "true",
        ],
    )

    assert result.exit_code == 0, result.output
    [request] = recorder.prepared
    gamma, alpha = request.skills
    assert [gamma.name, alpha.name] == ["gamma", "alpha"]
    # No per-entry-point configs: the runtime reads the declared bootstrap from the request.
    assert request.configs == {}
    assert request.config_for(alpha).bootstrap == (BootstrapCommand(command="make"),)
    assert request.config_for(gamma).bootstrap == ()
    assert "prepared skill gamma: /prepared/gamma" in result.stderr
    assert "prepared skill alpha: /prepared/alpha" in result.stderr


def test_skills_root_without_names_prepares_every_skill(
    runner: CliRunner, recorder: Any, make_skill: Any, tmp_path: Path
) -> None:
    make_skill("one")
    make_skill("two")

    result = runner.invoke(
        cli, ["exec", "--runtime", "recording", "--skills-root", str(tmp_path / "skills"), "true"]
    )

    assert result.exit_code == 0, result.output
    assert [s.name for s in recorder.prepared[0].skills] == ["one", "two"]
    assert "prepared skill" not in result.stderr


def test_unknown_skill_is_a_failure(
    runner: CliRunner, recorder: Any, make_skill: Any, tmp_path: Path
) -> None:
    make_skill("one")

    result = runner.invoke(
        cli,
        [
            "exec",
            "--runtime",
            "recording",
            "--skills-root",
            str(tmp_path / "skills"),
            "--skill",
            "ghost",
            "true",
        ],
    )

    assert result.exit_code == 1
    assert "ghost" in result.stderr
    assert recorder.requests == []


def test_skill_without_skills_root_is_a_usage_error(runner: CliRunner, recorder: Any) -> None:
    result = runner.invoke(cli, ["exec", "--runtime", "recording", "--skill", "x", "true"])

    assert result.exit_code == 2
    assert "--skill needs --skills-root" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "colour=red"], "has no option 'colour'; valid options: conversation_id, region"),
        (["-o", "novalue"], "expected KEY=VALUE"),
        (["-e", "BAD-NAME=s3cr3t"], "environment variable name 'BAD-NAME' is invalid"),
        (["-e", "SURELY_UNSET_VARIABLE_42"], "not set in the environment"),
    ],
)
def test_bad_options_are_usage_errors(
    runner: CliRunner, recorder: Any, args: list[str], message: str
) -> None:
    result = runner.invoke(cli, ["exec", "--runtime", "recording", *args, "true"])

    assert result.exit_code == 2
    assert message in result.stderr
    assert "s3cr3t" not in result.stderr
    assert "Traceback" not in result.stderr
    assert recorder.requests == []


def test_missing_command_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["exec"])

    assert result.exit_code == 2
    assert "Missing argument 'COMMAND...'" in result.stderr


@pytest.mark.parametrize("unknown", ["--bogus", "--frobnicate", "-Z"])
def test_an_unknown_option_before_the_command_is_a_usage_error(
    runner: CliRunner, recorder: Any, unknown: str
) -> None:
    # exec once ignored unknown options: `exec --bogus -- true` ran `--bogus -- true` in bash,
    # which printed its own 23-line usage
    result = runner.invoke(cli, ["exec", "--runtime", "recording", unknown, "--", "true"])

    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    # click 8.2 writes "No such option: -Z", later versions "No such option '-Z'."
    assert re.match(rf"Error: No such option(: | '){re.escape(unknown)}\b", line), line
    assert line.endswith("exec --help')")
    assert result.stdout == ""
    assert recorder.requests == []


def _words(text: str) -> str:
    """``text`` without the quotes, colons and full stops click's versions differ in."""
    return re.sub(r"[':.]", "", text)


def test_the_usage_error_of_an_unknown_option_is_the_one_the_docs_show() -> None:
    from skillruntime.core.cli import build_cli

    result = CliRunner().invoke(
        build_cli(), ["exec", "--bogus", "--", "true"], prog_name="skillruntime"
    )
    docs = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")

    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    # The docs show the current click's wording; click 8.2 (the lowest supported) quotes and
    # punctuates the same words differently.
    assert _words(f"`{line}`") in _words(docs)


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["ls", "--bogus"], "ls --bogus"),  # options after the command's first word are its own
        (["--", "--version"], "--version"),
        (["--", "-x", "y"], "-x y"),
        (["-e", "A=1", "--", "--bogus"], "--bogus"),
    ],
)
def test_everything_from_the_command_on_belongs_to_the_command(
    runner: CliRunner, recorder: Any, args: list[str], command: str
) -> None:
    result = runner.invoke(cli, ["exec", "--runtime", "recording", *args])

    assert result.exit_code == 0, result.output
    [request] = recorder.requests
    assert request.command == command


def test_the_help_names_no_variable_that_is_never_set(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["exec", "--help"])

    assert result.exit_code == 0
    assert "$SKILL_DIR" not in result.output
    assert "skills/pdf-*/scripts/fill.py" in result.output


# ------------------------------------------------------------------ with the local runtime


def test_a_command_that_starts_with_a_dash_runs_as_a_command(
    runner: CliRunner, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    result = runner.invoke(cli, ["exec", "-o", f"work_root={work}", "--", "--version"])

    # bash read `bash -c --version` as its own option and printed its version, exit 0
    assert result.exit_code == 127, result.output
    assert "--version: command not found" in result.stderr
    assert "GNU bash" not in result.stdout


@pytest.mark.slow  # a python3 process besides the preparation
def test_the_help_example_runs_a_script_of_a_prepared_skill(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The help's example (`skills/NAME-*/scripts/...` under the work root) as written, with
    the example skill csv-report in place of pdf."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "skills"
    work = tmp_path / "work"
    work.mkdir()
    (work / "data.csv").write_text("region,sales\nnorth,3\nsouth,4\n")

    result = runner.invoke(
        cli,
        [
            "exec",
            "--skills-root",
            str(examples),
            "--skill",
            "csv-report",
            "-v",
            "-o",
            f"work_root={work}",
            "python3 skills/csv-report-*/scripts/report.py data.csv out",
        ],
    )

    assert result.exit_code == 0, result.output
    assert "prepared skill csv-report: " + str(work / "skills" / "csv-report-") in result.stderr
    assert any((work / "out").iterdir())


def test_local_runtime_prepares_bootstraps_and_runs(
    runner: CliRunner, make_skill: Any, tmp_path: Path
) -> None:
    make_skill(
        "builder",
        "metadata:\n  skillruntime:\n    bootstrap:\n"
        "      - echo built > built.txt\n"
        "      - {command: 'echo second >> built.txt', timeout_seconds: 30}\n",
    )
    work = tmp_path / "work"

    result = runner.invoke(
        cli,
        [
            "exec",
            "-o",
            f"work_root={work}",
            "--skills-root",
            str(tmp_path / "skills"),
            "--skill",
            "builder",
            "-v",
            "-e",
            "GREETING=hi",
            "cat skills/*/built.txt; echo $GREETING; echo oops >&2; exit 3",
        ],
    )

    assert result.exit_code == 3, result.output
    assert result.stdout == "built\nsecond\nhi\n"
    assert "oops\n" in result.stderr
    [line] = [x for x in result.stderr.splitlines() if x.startswith("prepared skill builder: ")]
    prepared = Path(line.split(": ", 1)[1])
    assert prepared.parent == work / "skills"
    assert (prepared / "built.txt").read_text() == "built\nsecond\n"


def test_local_bootstrap_failure_is_reported(
    runner: CliRunner, make_skill: Any, tmp_path: Path
) -> None:
    make_skill("broken", "metadata:\n  skillruntime:\n    bootstrap: ['exit 5']\n")

    result = runner.invoke(
        cli,
        [
            "exec",
            "-o",
            f"work_root={tmp_path / 'work'}",
            "--skills-root",
            str(tmp_path / "skills"),
            "--skill",
            "broken",
            "echo never",
        ],
    )

    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ")
    assert "never" not in result.stdout


def test_the_example_skill_runs_after_its_declared_bootstrap(
    runner: CliRunner, tmp_path: Path
) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples" / "skills"
    skills = tmp_path / "skills"
    shutil.copytree(examples, skills)
    work = tmp_path / "work"

    result = runner.invoke(
        cli,
        [
            "exec",
            "-o",
            f"work_root={work}",
            "--skills-root",
            str(skills),
            "--skill",
            "text-stats",
            "sh skills/text-stats-*/scripts/run.sh skills/text-stats-*/assets/sample.txt 3",
        ],
    )

    assert result.exit_code == 0, result.output
    assert "words: 78" in result.stdout
    assert "unique words: 46" in result.stdout
    [copy] = [p for p in (work / "skills").iterdir() if p.is_dir()]
    assert (copy / "build" / "stopwords.txt").is_file()
    assert not (skills / "text-stats" / "build").exists()
