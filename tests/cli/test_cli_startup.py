"""The command starts without importing what the invoked command does not need.

Each case runs the command in a fresh interpreter (every distribution is installed in the test
environment) and lists the modules it imported; timing is left to tests/benchmarks/bench_cli.py.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

HEAVY = ("opensandbox", "sqlalchemy", "fsspec", "httpx", "mcp", "requests", "yaml")
"""Top-level packages of SDKs and heavy libraries no start-up path may import."""

_PROBE = """
import json, sys
from skillruntime.core.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
else:
    code = 0
sys.stdout.flush()
print("\\nMODULES" + json.dumps(sorted(sys.modules)), "CODE", code, file=sys.stderr)
"""


def _imported(*args: str) -> tuple[set[str], str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    tail = done.stderr.rpartition("\nMODULES")[2]
    modules, _, code = tail.rpartition(" CODE ")
    assert code.strip() == "0", done.stderr
    return set(json.loads(modules)), done.stdout


def _heavy(modules: set[str]) -> set[str]:
    return {name for name in modules if name.partition(".")[0] in HEAVY}


def test_version_imports_no_plugin_and_no_heavy_library() -> None:
    modules, out = _imported("--version")
    assert "version" in out
    assert not _heavy(modules)
    assert not {m for m in modules if m.startswith("skillruntime.") and ".plugin" in m}
    assert not {"pydantic", "pluggy", "skillruntime.core.plugins.registry"} & modules


def test_runtimes_loads_the_plugins_but_no_heavy_library() -> None:
    modules, out = _imported("runtimes")
    for name in ("local", "opensandbox", "aio"):
        assert f"{name}  " in out
    assert "skillruntime.opensandbox.plugin" in modules
    assert not _heavy(modules)
    assert not {"skillruntime.opensandbox.runtime", "skillruntime.aio.client"} & modules
    # the backends' static listings serve the options: no model and no pydantic is imported
    assert not {
        name
        for name in modules
        if name.partition(".")[0] in ("pydantic", "pydantic_settings", "pydantic_core")
    }
    assert (
        not {
            "skillruntime.local.options",
            "skillruntime.aio.options",
            "skillruntime.opensandbox.options",
            "skillruntime.core.plugins.options",
            "skillruntime.core.conversations.memory",
        }
        & modules
    )
    assert "    upload_policy (UploadPolicy; default: excluded_directories=('.git',)" in out


def test_runtimes_json_lists_the_same_options_as_the_models() -> None:
    from skillruntime.core.plugins.registry import available_runtimes, describe_options

    modules, out = _imported("runtimes", "--json")
    assert "pydantic" not in modules
    listed = {item["name"]: item for item in json.loads(out)}
    assert set(listed) == set(available_runtimes()) >= {"local", "aio", "opensandbox"}
    for name, provider in available_runtimes().items():
        assert listed[name]["description"] == provider.description
        assert listed[name]["options"] == [vars(info) for info in describe_options(provider)]


def test_import_of_core_is_light() -> None:
    code = "import json, sys, skillruntime.core; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    modules = set(eval(done.stdout))
    assert not _heavy(modules)
    assert "pydantic" not in modules


@pytest.mark.parametrize(
    ("command", "loaded", "not_loaded"),
    [
        (["skills", "--help"], "skillruntime.core.cli.skills", "skillruntime.core.cli.runtime"),
        (["mcp", "--help"], "skillruntime.mcp.cli", "skillruntime.viking.cli"),
        (["viking", "--help"], "skillruntime.viking.cli", "skillruntime.mcp.cli"),
    ],
)
def test_a_command_imports_only_its_own_module(
    command: list[str], loaded: str, not_loaded: str
) -> None:
    modules, _ = _imported(*command)
    assert loaded in modules
    assert not_loaded not in modules


@functools.cache
def _root_help_modules() -> frozenset[str]:
    return frozenset(_imported("--help")[0])


LIBRARY = ("pydantic", "pydantic_core", "pydantic_settings", "pluggy", "yaml")
"""What the commands' work needs and their help does not (models, plugins, SKILL.md parsing)."""


@pytest.mark.parametrize(
    ("command", "own"),
    [
        (["exec", "--help"], {"skillruntime.core.cli.runtime", "skillruntime.core.cli.progress"}),
        (["files", "--help"], {"skillruntime.core.cli.runtime", "skillruntime.core.cli.progress"}),
        (
            ["files", "get", "--help"],
            {"skillruntime.core.cli.runtime", "skillruntime.core.cli.progress"},
        ),
        (["skills", "validate", "--help"], {"skillruntime.core.cli.skills"}),
        (
            ["artifacts", "--help"],
            {"skillruntime.core.artifacts", "skillruntime.core.artifacts.cli"},
        ),
        (
            ["artifacts", "install", "--help"],
            {"skillruntime.core.artifacts", "skillruntime.core.artifacts.cli"},
        ),
    ],
)
@pytest.mark.slow  # two fresh interpreters with every distribution installed
def test_a_subcommand_s_help_imports_only_its_own_module(command: list[str], own: set[str]) -> None:
    """A subcommand's help costs what the root's does plus its command module: the library
    (pydantic models, the plugin registry, the file SPI, yaml) is imported by the commands, not
    at module level (`exec --help` took 0.5-0.8 s against 0.15 s for the root help)."""
    modules, out = _imported(*command)
    assert "Usage: " in out
    assert not {name for name in modules if name.partition(".")[0] in (*HEAVY, *LIBRARY)}
    project = {name for name in modules - _root_help_modules() if name.startswith("skillruntime")}
    assert project - {"skillruntime.core.cli.errors", "skillruntime.core.errors"} == own


def test_help_still_lists_plugin_commands() -> None:
    _, out = _imported("--help")
    for name in ("artifacts", "conversations", "exec", "files", "mcp", "runtimes", "skills"):
        assert f"  {name} " in out
    assert "[skillruntime-mcp]" in out or "skillruntime integration: any runtime's" in out


@pytest.mark.parametrize("args", [["--help"], ["-h"], []])
def test_root_help_imports_no_command_module_and_no_sdk(args: list[str]) -> None:
    modules, out = _imported(*args) if args else _imported_bare()
    assert "Commands:" in out
    assert not _heavy(modules)
    assert not {
        name
        for name in modules
        if name.partition(".")[0] in ("pydantic", "pydantic_settings", "pydantic_core", "pluggy")
    }
    # not one module of the project beyond what --version imports: no command module, no plugin
    version_modules, _ = _imported("--version")
    project = {name for name in modules - version_modules if name.startswith("skillruntime")}
    assert not project


def _imported_bare() -> tuple[set[str], str]:
    """``skillruntime`` without arguments prints the help and exits 2, as click groups do."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    tail = done.stderr.rpartition("\nMODULES")[2]
    modules, _, code = tail.rpartition(" CODE ")
    assert code.strip() == "2", done.stderr
    return set(json.loads(modules)), done.stdout + done.stderr


def test_the_static_summaries_match_the_commands() -> None:
    from skillruntime.core.cli.app import COMMAND_SUMMARIES, _load_command

    for target, summary in COMMAND_SUMMARIES.items():
        command = _load_command(target, target)
        assert command.get_short_help_str(1000) == summary, target


def test_entry_point_commands_load_lazily_and_never_replace_a_built_in(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from click.testing import CliRunner

    from skillruntime.core.cli import app

    monkeypatch.setattr(
        app,
        "_entry_point_commands",
        lambda: {
            "skills": "skillruntime.core.artifacts.cli:artifacts_group",
            "broken": "skillruntime.core.no_such_module:command",
            "notacommand": "skillruntime.core.cli.app:BUILTIN_COMMANDS",
            "stores": "skillruntime.core.artifacts.cli:artifacts_group",
        },
    )
    group = app.build_cli()
    runner = CliRunner()
    listed = runner.invoke(group, ["--help"])
    assert listed.exit_code == 0
    # help lists the declared commands from static data: none is imported, a broken one too
    assert "  stores       Install, list, delete and materialize" in listed.output
    assert "\n  broken" in listed.output
    assert "the command 'broken'" not in caplog.text
    assert "a plugin tried to replace the built-in command 'skills'" in caplog.text
    assert "Check and list skill directories" in runner.invoke(group, ["skills", "--help"]).output
    assert "materialize" in runner.invoke(group, ["stores", "--help"]).output
    broken = runner.invoke(group, ["broken"])
    assert broken.exit_code == 1
    assert "the command 'broken'" in broken.output
    assert "ModuleNotFoundError" in broken.output
    wrong = runner.invoke(group, ["notacommand"])
    assert "is dict, not a click command" in wrong.output


def test_mcp_serve_help_imports_no_mcp_sdk() -> None:
    """The serve command's help and option defaults come from a module without the SDK."""
    modules, out = _imported("mcp", "serve", "--help")
    assert "--shutdown-grace" in out
    assert "skillruntime.mcp.cli" in modules
    assert not {name for name in modules if name.partition(".")[0] in ("mcp", "uvicorn")}
    assert "skillruntime.mcp.http" not in modules
