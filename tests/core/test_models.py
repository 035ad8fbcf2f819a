"""Validation and immutability of the SPI value types."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from skillruntime.core.models import (
    BootstrapCommand,
    FileInfo,
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
    SkillRuntimeConfig,
)


def _skill(name: str = "demo") -> Skill:
    return Skill(name=name, description="d", base_path="/skills/demo")


def test_models_are_frozen() -> None:
    skill = _skill()
    with pytest.raises(ValidationError):
        skill.name = "other"  # type: ignore[misc]


def test_with_base_path_returns_a_new_object_and_leaves_the_original() -> None:
    skill = Skill(name="a", base_path="/x", frontmatter={"metadata": {"k": [1]}})
    moved = skill.with_base_path("/y")
    assert moved.base_path == "/y"
    assert skill.base_path == "/x"
    assert moved is not skill
    moved.frontmatter["metadata"]["k"].append(2)
    assert skill.frontmatter["metadata"]["k"] == [1]


def test_caller_dict_is_copied() -> None:
    env = {"A": "1"}
    config = SkillRuntimeConfig(environment=env)
    env["A"] = "2"
    assert config.environment == {"A": "1"}


def test_execution_request_rejects_blank_command_and_bad_timeout() -> None:
    with pytest.raises(ValidationError, match="command must not be empty"):
        SkillExecutionRequest(command="   ")
    with pytest.raises(ValidationError, match="greater than 0"):
        SkillExecutionRequest(command="true", timeout_seconds=0)
    with pytest.raises(ValidationError, match="working_directory must not be blank"):
        SkillExecutionRequest(command="true", working_directory=" ")


@pytest.mark.parametrize("name", ["1ABC", "A-B", "", "A B", "x=y"])
def test_environment_names_are_checked(name: str) -> None:
    with pytest.raises(ValidationError, match="environment variable name"):
        SkillExecutionRequest(command="true", environment={name: "v"})


def test_environment_values_never_appear_in_repr_or_errors() -> None:
    request = SkillExecutionRequest(command="true", environment={"TOKEN": "s3cr3t-value"})
    assert "s3cr3t-value" not in repr(request)
    assert "s3cr3t-value" not in repr(SkillRuntimeConfig(environment={"TOKEN": "s3cr3t-value"}))
    with pytest.raises(ValidationError) as info:
        SkillExecutionRequest(command="true", environment={"BAD NAME": "s3cr3t-value"})
    assert "s3cr3t-value" not in str(info.value)


def test_preparation_request_rejects_configs_for_unknown_skills() -> None:
    with pytest.raises(
        ValidationError, match="configs reference skills that are not in the request: ghost"
    ):
        SkillPreparationRequest(skills=(_skill(),), configs={"ghost": SkillRuntimeConfig()})


def test_config_for_defaults_to_empty() -> None:
    skill = _skill()  # declares no bootstrap: the given config's commands are all that run
    config = SkillRuntimeConfig(bootstrap=(BootstrapCommand(command="make"),))
    request = SkillPreparationRequest(skills=(skill,), configs={"demo": config})
    resolved = SkillRuntimeConfig(bootstrap=config.bootstrap, declared_bootstrap=False)
    assert request.config_for(skill) == resolved
    other = _skill("other")
    assert SkillPreparationRequest(skills=(other,)).config_for(other) == SkillRuntimeConfig(
        declared_bootstrap=False
    )


def test_bootstrap_command_rules() -> None:
    assert BootstrapCommand(command="x").timeout_seconds == 300
    with pytest.raises(ValidationError):
        BootstrapCommand(command="  ")
    with pytest.raises(ValidationError):
        BootstrapCommand(command="x", timeout_seconds=-1)


def test_allowed_tools_forms() -> None:
    assert _skill().allowed_tools is None
    spaced = Skill(
        name="a", base_path="/a", frontmatter={"allowed-tools": "Read Bash(git:*) Bash(python *)"}
    )
    assert spaced.allowed_tools == ("Read", "Bash(git:*)", "Bash(python *)")
    listed = Skill(name="a", base_path="/a", frontmatter={"allowed-tools": ["Read", " Grep "]})
    assert listed.allowed_tools == ("Read", "Grep")


def test_result_ok_and_file_info_name() -> None:
    assert SkillExecutionResult(exit_code=0).ok
    assert not SkillExecutionResult(exit_code=0, timed_out=True).ok
    assert not SkillExecutionResult(exit_code=3).ok
    assert FileInfo(path="/a/b.txt", is_directory=False).name == "b.txt"
    assert FileInfo(path="/", is_directory=True).name == "/"


@settings(max_examples=30, deadline=None)
@given(
    prefix=st.text(st.characters(codec="utf-8", blacklist_characters="\x00")),
    # U+DC80..U+DCFF stand for the bytes 0x80..0xff (``surrogateescape``): those are text
    surrogate=st.one_of(st.integers(0xD800, 0xDC7F), st.integers(0xDD00, 0xDFFF)).map(chr),
)
def test_text_that_stands_for_no_bytes_is_refused_before_any_runtime_sees_it(
    prefix: str, surrogate: str
) -> None:
    """A JSON ``\\udXXX`` escape or a YAML one carries a lone surrogate into a command, a working
    directory, an environment value or a bootstrap command; it is a validation error naming the
    field (never the value), not a ``UnicodeEncodeError`` out of a runtime."""
    text = f"echo {prefix}{surrogate}"
    cases: list[tuple[str, Callable[[], object]]] = [
        ("command", lambda: SkillExecutionRequest(command=text)),
        (
            "working_directory",
            lambda: SkillExecutionRequest(command="true", working_directory=text),
        ),
        (
            "environment variable TOKEN",
            lambda: SkillExecutionRequest(command="true", environment={"TOKEN": text}),
        ),
        ("environment variable TOKEN", lambda: SkillRuntimeConfig(environment={"TOKEN": text})),
    ]
    for field, build in cases:
        with pytest.raises(ValidationError, match=f"{field} cannot be encoded as UTF-8") as info:
            build()
        assert surrogate not in str(info.value)
    # a constrained ``str`` field (``min_length``) is refused by pydantic for any lone surrogate
    with pytest.raises(ValidationError, match="unable to parse raw data as a unicode string"):
        BootstrapCommand(command=text)
    escaped = f"echo {prefix}\udcff"
    assert SkillExecutionRequest(command=escaped, environment={"A": escaped}).command == escaped
