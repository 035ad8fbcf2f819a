"""Usage errors of the CLI name the setting at fault, exit 2 and never echo the value; JSON
options work from ``-o`` as from the environment; large transfers can show progress."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from skillruntime.core.cli import cli
from skillruntime.core.cli.progress import TransferProgress, format_size

SKILL_MD = "---\nname: demo\ndescription: A demo skill.\n---\nBody.\n"


@pytest.fixture
def package(tmp_path: Path) -> Path:
    path = tmp_path / "demo.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("SKILL.md", SKILL_MD)
    return path


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--version", "1.0", "--digest", "sha256:00"], "digest"),
        (["--version", "../x"], "version"),
        (["--version", "1.0", "--name", "../evil"], "name"),
    ],
)
def test_artifacts_install_reports_a_bad_value_by_field_with_exit_2(
    runner: CliRunner, tmp_path: Path, package: Path, extra: list[str], field: str
) -> None:
    result = runner.invoke(
        cli, ["artifacts", "install", str(tmp_path / "store"), str(package), *extra]
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"Error: invalid artifact: {field}: ")
    assert "input_value" not in result.output
    assert "errors.pydantic.dev" not in result.output
    for value in ("sha256:00", "../x", "../evil"):
        assert value not in result.output
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").iterdir())


@pytest.mark.parametrize("command", ["rm", "materialize"])
def test_artifacts_rm_and_materialize_report_a_bad_version_with_exit_2(
    runner: CliRunner, tmp_path: Path, command: str
) -> None:
    result = runner.invoke(cli, ["artifacts", command, str(tmp_path / "s"), "demo", "../x"])
    assert result.exit_code == 2
    assert "invalid artifact: version" in result.stderr
    assert "../x" not in result.output


def test_bad_json_in_an_environment_variable_names_the_variable(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKILLRUNTIME_LOCAL_BASE_ENVIRONMENT", '{"TOKEN": "s3cr3t"')
    result = runner.invoke(cli, ["exec", "-o", f"work_root={tmp_path}", "--", "true"])
    assert result.exit_code == 2
    assert "SKILLRUNTIME_LOCAL_BASE_ENVIRONMENT is not valid JSON" in result.stderr
    assert "EnvSettingsSource" not in result.output
    assert "s3cr3t" not in result.output


def test_a_json_option_is_accepted_on_the_command_line(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(
        cli,
        [
            "exec",
            "-o",
            f"work_root={tmp_path}",
            "-o",
            'base_environment={"B": "2"}',
            "--",
            "sh",
            "-c",
            'echo "B=$B"',
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "B=2\n"


def test_bad_json_in_an_option_is_a_usage_error_without_the_value(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = runner.invoke(
        cli, ["exec", "-o", f"work_root={tmp_path}", "-o", 'base_environment={"K": "v4lue"', "true"]
    )
    assert result.exit_code == 2
    assert "option 'base_environment' takes a JSON value" in result.stderr
    assert "v4lue" not in result.output


def test_an_exported_conversations_root_says_how_to_run_exec(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKILLRUNTIME_LOCAL_CONVERSATIONS_ROOT", str(tmp_path / "convs"))
    monkeypatch.delenv("SKILLRUNTIME_LOCAL_CONVERSATION_ID", raising=False)
    refused = runner.invoke(cli, ["exec", "--", "pwd"])
    assert refused.exit_code == 2
    assert "SKILLRUNTIME_LOCAL_CONVERSATIONS_ROOT is set in the environment" in refused.stderr
    assert "pass --conversation ID" in refused.stderr
    assert "SKILLRUNTIME_LOCAL_CONVERSATION_ID" in refused.stderr
    ran = runner.invoke(cli, ["exec", "--conversation", "c1", "--", "pwd"])
    assert ran.exit_code == 0, ran.stderr
    assert ran.stdout == f"{tmp_path / 'convs' / 'c1'}\n"


def test_opensandbox_without_a_domain_reports_the_missing_setting(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPEN_SANDBOX_DOMAIN", "SKILLRUNTIME_OPENSANDBOX_DOMAIN"):
        monkeypatch.delenv(name, raising=False)
    result = runner.invoke(
        cli, ["exec", "--runtime", "opensandbox", "-o", "ready_timeout_seconds=2", "--", "true"]
    )
    assert result.exit_code == 1
    assert "no OpenSandbox server is configured" in result.stderr
    assert "SKILLRUNTIME_OPENSANDBOX_DOMAIN" in result.stderr


# -- progress --------------------------------------------------------------------------------


def test_put_and_get_show_progress_on_stderr_when_asked(runner: CliRunner, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    payload = bytes(range(256)) * 4096 * 3  # 3 MiB, many chunks
    local = tmp_path / "big.bin"
    local.write_bytes(payload)
    put = runner.invoke(
        cli, ["files", "put", "--progress", "-o", f"work_root={work}", str(local), "big.bin"]
    )
    assert put.exit_code == 0, put.stderr
    lines = put.stderr.splitlines()
    assert lines[0].startswith("put big.bin: ")
    assert lines[-1] == "put big.bin: 3.0 MiB / 3.0 MiB (100%)"
    assert len(lines) == 11  # 0 %, every tenth, 100 %
    assert (work / "big.bin").read_bytes() == payload
    target = tmp_path / "back.bin"
    got = runner.invoke(
        cli, ["files", "get", "--progress", "-o", f"work_root={work}", "big.bin", str(target)]
    )
    assert got.exit_code == 0, got.stderr
    assert got.stderr.splitlines()[-1] == "get big.bin: 3.0 MiB / 3.0 MiB (100%)"
    assert target.read_bytes() == payload
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []
    quiet = runner.invoke(
        cli, ["files", "get", "-o", f"work_root={work}", "big.bin", str(tmp_path / "q.bin")]
    )
    assert quiet.exit_code == 0
    assert quiet.stderr == ""


def test_progress_redraws_in_place_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    meter = TransferProgress("put x", 200, stream)
    for _ in range(200):
        meter.advance(1)
    meter.finish()
    text = stream.getvalue()
    assert text.count("\r") == 101  # 0 % … 100 %, one redraw per whole percent
    assert text.endswith("\rput x: 200 B / 200 B (100%)\n")


def test_sizes_are_shown_in_binary_units() -> None:
    assert format_size(512) == "512 B"
    assert format_size(1536) == "1.5 KiB"
    assert format_size(300 * 1024 * 1024) == "300.0 MiB"
    assert format_size(5 * 1024**4) == "5120.0 GiB"


def test_only_options_that_take_mappings_or_lists_are_decoded_as_json(
    runner: CliRunner, recorder: Any
) -> None:
    result = runner.invoke(
        cli, ["exec", "--runtime", "recording", "-o", 'region={"not": "decoded"}', "--", "true"]
    )
    assert result.exit_code == 0, result.stderr
    assert recorder.options[-1].region == '{"not": "decoded"}'


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["exec"], "skillruntime exec --help"),
        (["files", "get", "--depth", "2", "a", "b"], "skillruntime files get --help"),
        (["no-such-command"], "skillruntime --help"),
        (["--bogus"], "skillruntime --help"),
        (["conversations", "sweep", "--idle", "7x", "--url", "memory://"], "sweep --help"),
    ],
)
def test_a_usage_error_is_one_error_line_with_the_help_hint_inside(
    runner: CliRunner, args: list[str], hint: str
) -> None:
    from skillruntime.core.cli import build_cli

    result = runner.invoke(build_cli(), args, prog_name="skillruntime")
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert "(see '" in lines[0]
    assert hint in lines[0]
    assert result.stdout == ""


def test_a_bare_group_still_prints_its_help(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["files"])
    assert "Move files in and out of a runtime." in result.output
    assert "Error" not in result.output


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["-o", 'base_environment={"A B":"x"}'], "environment variable name 'A B' is invalid"),
        (["--conversation", "c", "-o", "conversations_root=/"], "must not be '/'"),
    ],
)
def test_an_option_value_the_runtime_refuses_exits_2(
    runner: CliRunner, options: list[str], message: str
) -> None:
    result = runner.invoke(cli, ["exec", *options, "--", "true"])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("Error: ")
    assert message in result.stderr


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.slow
def test_library_warnings_stay_off_the_console_unless_debug(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLRUNTIME_", "OPEN_"))}
    domain = f"127.0.0.1:{_closed_port()}"
    command = [sys.executable, "-c", "from skillruntime.core.cli import main; main()"]
    args = ["exec", "--runtime", "opensandbox", "-o", f"domain={domain}", "--", "true"]
    quiet = subprocess.run(
        [*command, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert quiet.returncode == 1
    assert len(quiet.stderr.splitlines()) == 1, quiet.stderr
    assert quiet.stderr.startswith("Error: ")
    loud = subprocess.run(
        [*command, "--debug", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert "WARNING: opensandbox." in loud.stderr  # the SDK's own warning, shown with --debug


def test_the_project_warnings_still_show(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import logging\n"
        "from skillruntime.core.cli.app import _configure_logging\n"
        "_configure_logging(False)\n"
        "logging.getLogger('some_sdk.adapter').warning('sdk warning')\n"
        "logging.getLogger('some_sdk.adapter').error('sdk error')\n"
        "logging.getLogger('skillruntime.core.skills').warning('skill warning')\n"
        "logging.getLogger('skillruntime.core.skills').info('skill info')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "sdk warning" not in done.stderr
    assert "sdk error" in done.stderr
    assert "skill warning" in done.stderr
    assert "skill info" not in done.stderr
