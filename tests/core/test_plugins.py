"""Plugin discovery and runtime construction: hooks, options, env fallback, errors, isolation."""

from __future__ import annotations

import importlib.metadata
import logging
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from skillruntime.core.cli import build_cli
from skillruntime.core.errors import PluginNotFoundError, SkillRuntimeError
from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from skillruntime.core.plugins import registry as plugins
from skillruntime.core.plugins.registry import (
    ArtifactStoreProvider,
    ConversationStoreProvider,
    RuntimeOptions,
    RuntimeOptionsError,
    RuntimeProvider,
    available_artifact_stores,
    available_conversation_stores,
    available_runtimes,
    create_runtime,
    describe_options,
    env_prefix_for,
    get_plugin_manager,
    hookimpl,
    plugin_problems,
    register_plugin,
    registered_plugin,
    reset_plugin_manager,
)
from skillruntime.core.runtime.spi import SkillRuntime


class EchoOptions(RuntimeOptions):
    """No env_prefix: create_runtime must apply SKILLRUNTIME_ECHO_TEST_."""

    greeting: str = Field(default="hello", description="What to say")
    retries: int = 3
    token: SecretStr | None = None


class StrictOptions(RuntimeOptions):
    model_config = SettingsConfigDict(env_prefix="SKILLRUNTIME_STRICT_")

    endpoint: str
    api_key: SecretStr = SecretStr("default-secret")


class EchoRuntime(SkillRuntime):
    def __init__(self, options: RuntimeOptions) -> None:
        self.options = options

    @property
    def name(self) -> str:
        return "echo-test"

    @property
    def default_working_directory(self) -> str:
        return "/"

    def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        return list(request.skills)

    def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        return SkillExecutionResult(exit_code=0, stdout=request.command)

    def get_file_system(self) -> SkillRuntimeFileSystem:
        raise NotImplementedError

    def close(self) -> None:
        pass


def echo_provider(name: str = "echo-test", distribution: str = "echo-dist") -> RuntimeProvider[Any]:
    return RuntimeProvider(
        name=name,
        description="Echoes commands back",
        options_model=EchoOptions,
        factory=EchoRuntime,
        distribution=distribution,
    )


class EchoPlugin:
    def __init__(self, *providers: RuntimeProvider[Any]) -> None:
        self.providers = list(providers) or [echo_provider()]

    @hookimpl
    def skillruntime_runtimes(self) -> list[RuntimeProvider[Any]]:
        return self.providers


@pytest.fixture(autouse=True)
def no_installed_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts from a manager that sees only the entry points it sets up."""
    monkeypatch.setattr(plugins, "_entry_points", list)
    reset_plugin_manager()
    yield
    reset_plugin_manager()


def fake_entry_points(monkeypatch: pytest.MonkeyPatch, *entries: tuple[str, str]) -> None:
    points = [
        importlib.metadata.EntryPoint(name=name, value=value, group="skillruntime")
        for name, value in entries
    ]
    monkeypatch.setattr(plugins, "_entry_points", lambda: points)
    reset_plugin_manager()


def test_registered_provider_is_available_and_builds_runtime_from_options() -> None:
    register_plugin(EchoPlugin(), "echo")

    assert list(available_runtimes()) == ["echo-test"]
    runtime = create_runtime("echo-test", greeting="hi", retries="5")

    assert isinstance(runtime, EchoRuntime)
    assert isinstance(runtime.options, EchoOptions)
    assert runtime.options.greeting == "hi"
    assert runtime.options.retries == 5


def test_runtime_factories_are_exported_from_the_core_package() -> None:
    import skillruntime.core
    from skillruntime.core import create_async_runtime as core_create_async_runtime
    from skillruntime.core import create_runtime as core_create_runtime

    assert core_create_runtime is create_runtime
    assert core_create_async_runtime is plugins.create_async_runtime
    assert {"create_runtime", "create_async_runtime"} <= set(skillruntime.core.__all__)
    register_plugin(EchoPlugin(), "echo")
    assert isinstance(core_create_runtime("echo-test", greeting="hi"), EchoRuntime)


def test_options_fall_back_to_prefixed_environment_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    register_plugin(EchoPlugin(), "echo")
    monkeypatch.setenv("SKILLRUNTIME_ECHO_TEST_GREETING", "from-env")
    monkeypatch.setenv("SKILLRUNTIME_ECHO_TEST_RETRIES", "9")
    monkeypatch.setenv("GREETING", "unprefixed-must-be-ignored")

    from_env = create_runtime("echo-test")
    explicit = create_runtime("echo-test", greeting="explicit")

    assert isinstance(from_env, EchoRuntime)
    assert isinstance(explicit, EchoRuntime)
    assert from_env.options.greeting == "from-env"  # type: ignore[attr-defined]
    assert from_env.options.retries == 9  # type: ignore[attr-defined]
    assert explicit.options.greeting == "explicit"  # type: ignore[attr-defined]


def test_model_env_prefix_is_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = RuntimeProvider(
        name="strict", description="d", options_model=StrictOptions, factory=EchoRuntime
    )
    register_plugin(EchoPlugin(provider), "strict")
    monkeypatch.setenv("SKILLRUNTIME_STRICT_ENDPOINT", "http://127.0.0.1:1")

    runtime = create_runtime("strict")

    assert runtime.options.endpoint == "http://127.0.0.1:1"  # type: ignore[attr-defined]


def test_env_prefix_for_normalises_the_runtime_name() -> None:
    assert env_prefix_for("local") == "SKILLRUNTIME_LOCAL_"
    assert env_prefix_for("my-rt.v2") == "SKILLRUNTIME_MY_RT_V2_"


def test_unknown_option_lists_the_valid_ones() -> None:
    register_plugin(EchoPlugin(), "echo")

    with pytest.raises(RuntimeOptionsError) as caught:
        create_runtime("echo-test", colour="red")

    message = str(caught.value)
    assert "'colour'" in message
    assert "greeting, retries, token" in message
    assert isinstance(caught.value, ValueError)


def test_dashed_option_names_are_accepted() -> None:
    provider = RuntimeProvider(
        name="strict", description="d", options_model=StrictOptions, factory=EchoRuntime
    )
    register_plugin(EchoPlugin(provider), "strict")

    runtime = create_runtime("strict", endpoint="e", **{"api-key": "k"})

    assert runtime.options.api_key.get_secret_value() == "k"  # type: ignore[attr-defined]


def test_invalid_value_names_the_option_without_echoing_the_value() -> None:
    register_plugin(EchoPlugin(), "echo")

    with pytest.raises(RuntimeOptionsError) as caught:
        create_runtime("echo-test", retries="s3cr3t-value-123", token="tok-456")

    message = str(caught.value)
    assert "retries" in message
    assert "s3cr3t-value-123" not in message
    assert "tok-456" not in message
    assert caught.value.__cause__ is None


def test_missing_required_option_names_its_environment_variable() -> None:
    provider = RuntimeProvider(
        name="strict", description="d", options_model=StrictOptions, factory=EchoRuntime
    )
    register_plugin(EchoPlugin(provider), "strict")

    with pytest.raises(RuntimeOptionsError, match="SKILLRUNTIME_STRICT_ENDPOINT"):
        create_runtime("strict")


def test_factory_is_not_called_when_options_are_invalid() -> None:
    calls: list[RuntimeOptions] = []

    def factory(options: EchoOptions) -> SkillRuntime:
        calls.append(options)
        return EchoRuntime(options)

    provider = RuntimeProvider(
        name="echo-test", description="d", options_model=EchoOptions, factory=factory
    )
    register_plugin(EchoPlugin(provider), "echo")

    with pytest.raises(RuntimeOptionsError):
        create_runtime("echo-test", retries="many")
    assert calls == []


def test_missing_known_runtime_names_its_distribution() -> None:
    with pytest.raises(PluginNotFoundError) as caught:
        create_runtime("local")

    message = str(caught.value)
    assert "installed runtimes: none" in message
    assert "pip install skillruntime-local" in message


@pytest.mark.parametrize(
    ("name", "distribution"),
    [
        ("opensandbox", "skillruntime-opensandbox"),
        ("aio", "skillruntime-aio"),
        ("docker", "skillruntime-docker"),
    ],
)
def test_missing_backend_runtimes_name_their_distributions(name: str, distribution: str) -> None:
    with pytest.raises(PluginNotFoundError, match=f"pip install {distribution}"):
        create_runtime(name)


def test_missing_unknown_runtime_lists_installed_and_gives_generic_advice() -> None:
    register_plugin(EchoPlugin(), "echo")

    with pytest.raises(PluginNotFoundError) as caught:
        create_runtime("nowhere")

    message = str(caught.value)
    assert "installed runtimes: echo-test" in message
    assert "'skillruntime' entry-point group" in message
    assert "pip install" not in message


def test_duplicate_runtime_names_are_a_clear_error() -> None:
    register_plugin(EchoPlugin(echo_provider(distribution="first-dist")), "one")
    register_plugin(EchoPlugin(echo_provider(distribution="second-dist")), "two")

    with pytest.raises(SkillRuntimeError) as caught:
        available_runtimes()

    message = str(caught.value)
    assert "'echo-test'" in message
    assert "first-dist" in message
    assert "second-dist" in message


def test_broken_entry_point_is_reported_and_others_still_load(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    module = tmp_path / "srt_good_plugin_mod.py"
    module.write_text(
        textwrap.dedent(
            """
            from skillruntime.core.plugins.registry import hookimpl, RuntimeProvider, RuntimeOptions

            class Options(RuntimeOptions):
                pass

            @hookimpl
            def skillruntime_runtimes():
                return [RuntimeProvider("good", "a good one", Options, lambda o: None, "good-dist")]
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    fake_entry_points(
        monkeypatch,
        ("broken", "srt_no_such_module_anywhere"),
        ("good", "srt_good_plugin_mod"),
    )

    with caplog.at_level(logging.WARNING, logger="skillruntime.core.plugins.registry"):
        runtimes = available_runtimes()

    assert list(runtimes) == ["good"]
    problems = plugin_problems()
    assert [p.plugin for p in problems] == ["broken"]
    assert "ModuleNotFoundError" in problems[0].message
    assert any("broken" in record.getMessage() for record in caplog.records)


def test_failing_hook_is_isolated_and_reported() -> None:
    class Failing:
        @hookimpl
        def skillruntime_runtimes(self) -> list[RuntimeProvider[Any]]:
            raise RuntimeError("boom")

    register_plugin(Failing(), "failing")
    register_plugin(EchoPlugin(), "echo")

    assert list(available_runtimes()) == ["echo-test"]
    assert any(
        p.plugin == "failing" and "RuntimeError: boom" in p.message for p in plugin_problems()
    )


def test_wrong_provider_type_is_skipped_and_reported() -> None:
    class Wrong:
        @hookimpl
        def skillruntime_runtimes(self) -> list[object]:
            return ["not a provider"]

    register_plugin(Wrong(), "wrong")

    assert available_runtimes() == {}
    assert any("expected RuntimeProvider" in p.message for p in plugin_problems())


def test_registered_plugin_context_unregisters() -> None:
    with registered_plugin(EchoPlugin(), "temp"):
        assert "echo-test" in available_runtimes()
    assert available_runtimes() == {}


def test_plugin_manager_is_cached_until_reset() -> None:
    first = get_plugin_manager()
    assert get_plugin_manager() is first
    reset_plugin_manager()
    assert get_plugin_manager() is not first


def test_describe_options_shows_types_defaults_and_env_names() -> None:
    provider = RuntimeProvider(
        name="strict", description="d", options_model=StrictOptions, factory=EchoRuntime
    )
    infos = {info.name: info for info in describe_options(provider)}

    assert infos["endpoint"].required is True
    assert infos["endpoint"].env_var == "SKILLRUNTIME_STRICT_ENDPOINT"
    assert infos["api_key"].default == "********"
    echo = {info.name: info for info in describe_options(echo_provider())}
    assert echo["retries"].type == "int"
    assert echo["retries"].default == "3"
    assert echo["greeting"].description == "What to say"
    assert echo["greeting"].env_var == "SKILLRUNTIME_ECHO_TEST_GREETING"


def test_store_providers_are_collected_by_scheme() -> None:
    class Stores:
        @hookimpl
        def skillruntime_artifact_stores(self) -> list[ArtifactStoreProvider]:
            return [ArtifactStoreProvider("viking", "OpenViking skills", dict)]

        @hookimpl
        def skillruntime_conversation_stores(self) -> list[ConversationStoreProvider]:
            return [ConversationStoreProvider("sqlite", "SQLite store", dict)]

    register_plugin(Stores(), "stores")

    assert list(available_artifact_stores()) == ["viking"]
    assert available_conversation_stores()["sqlite"].description == "SQLite store"


def test_plugin_cli_commands_are_added_but_cannot_replace_builtins() -> None:
    class CliPlugin:
        @hookimpl
        def skillruntime_cli(self, group: click.Group) -> None:
            @group.command("hello")
            def hello() -> None:
                click.echo("hi")

            @group.command("exec")
            def hijack() -> None:
                click.echo("hijacked")

    register_plugin(CliPlugin(), "cli-plugin")

    group = build_cli()
    ctx = click.Context(group)

    # help lists from static data; a hook's command is served once looked up, then listed
    assert group.get_command(ctx, "hello") is not None
    assert "hello" in group.list_commands(ctx)
    exec_command = group.get_command(ctx, "exec")
    assert exec_command is not None
    assert exec_command.name == "exec"
    assert exec_command.callback is not None
    assert exec_command.callback.__name__ == "exec_command"


def test_installed_local_distribution_is_discovered_through_its_entry_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        plugins,
        "_entry_points",
        lambda: list(importlib.metadata.entry_points(group="skillruntime")),
    )
    reset_plugin_manager()

    provider = available_runtimes()["local"]

    assert provider.distribution == "skillruntime-local"
    assert issubclass(provider.options_model, RuntimeOptions)
