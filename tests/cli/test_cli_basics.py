"""The root command: help, version, `runtimes`, error reporting and plugin commands."""

from __future__ import annotations

import json
from typing import Any

import click
from click.testing import CliRunner

from skillruntime.core.cli import build_cli, cli
from skillruntime.core.plugins.registry import hookimpl, register_plugin


def test_help_lists_every_command(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["--help"])

    assert result.exit_code == 0
    for command in ("exec", "files", "runtimes", "skills"):
        assert f"  {command} " in result.output
    assert "pip install skillruntime-local" in result.output


def test_version_names_the_program(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["--version"])

    assert result.exit_code == 0
    assert result.output.startswith("skillruntime, version ")


def test_runtimes_lists_descriptions_options_and_env_vars(runner: CliRunner, recorder: Any) -> None:
    result = runner.invoke(cli, ["runtimes"])

    assert result.exit_code == 0, result.output
    assert "recording  Records what it is asked to do  [tests-recording]" in result.output
    assert "region (str; default: here; env SKILLRUNTIME_RECORDING_REGION)" in result.output
    assert "Where to run" in result.output


def test_runtimes_json_is_machine_readable(runner: CliRunner, recorder: Any) -> None:
    result = runner.invoke(cli, ["runtimes", "--json"])

    assert result.exit_code == 0
    providers = {p["name"]: p for p in json.loads(result.stdout)}
    region = next(o for o in providers["recording"]["options"] if o["name"] == "region")
    assert region == {
        "name": "region",
        "type": "str",
        "required": False,
        "default": "here",
        "env_var": "SKILLRUNTIME_RECORDING_REGION",
        "description": "Where to run",
    }


def test_installed_local_runtime_is_listed(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["runtimes", "--json"])

    assert "local" in {p["name"] for p in json.loads(result.stdout)}


def test_runtimes_warns_about_a_failing_plugin(runner: CliRunner) -> None:
    class Failing:
        @hookimpl
        def skillruntime_runtimes(self) -> list[Any]:
            raise RuntimeError("cannot reach the moon")

    register_plugin(Failing(), "moon")

    result = runner.invoke(cli, ["runtimes"])

    assert result.exit_code == 0
    assert "Warning: plugin moon skillruntime_runtimes raised" in result.stderr
    assert "cannot reach the moon" in result.stderr


def test_failures_are_one_line_without_traceback(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["exec", "--runtime", "nowhere", "--", "true"])

    assert result.exit_code == 1
    assert result.stderr.startswith("Error: no runtime named 'nowhere' is installed")
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1


def test_debug_lets_the_original_exception_through(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["--debug", "exec", "--runtime", "nowhere", "--", "true"])

    assert result.exit_code == 1
    assert type(result.exception).__name__ == "PluginNotFoundError"


def test_plugin_commands_join_the_root_group(runner: CliRunner) -> None:
    class Greeter:
        @hookimpl
        def skillruntime_cli(self, group: click.Group) -> None:
            @group.command("greet")
            def greet() -> None:
                """Say hello."""
                click.echo("hello from a plugin")

    register_plugin(Greeter(), "greeter")

    group = build_cli()
    result = runner.invoke(group, ["greet"])
    help_text = runner.invoke(group, ["--help"]).output

    assert result.output == "hello from a plugin\n"
    assert "greet" in help_text
    assert "runtimes" in help_text
