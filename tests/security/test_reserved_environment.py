"""Environment names bash keeps read-only or sets itself are refused at validation, by name.

Before, ``environment={"UID": "0"}`` (or ``EUID``, ``PPID``, ``SHELLOPTS``, ...) made every command
of the AIO shell path fail with "the command wrapper could not run", while the local runtime
silently dropped the value. Now every runtime refuses such a name before anything runs, and the
error names the variable and never its value.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.core.models import (
    ENV_NAME_PATTERN,
    SHELL_RESERVED_NAMES,
    SkillExecutionRequest,
    SkillRuntimeConfig,
    validate_environment,
)
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.local import LocalSkillRuntime

RESERVED = sorted(SHELL_RESERVED_NAMES)
SECRET = "s3cr3t-value"


@pytest.fixture(scope="module")
def aio_double() -> Iterator[AioDouble]:
    with AioDouble(bash_api=False) as double:  # the shell path, where the wrapper exports
        yield double


@pytest.fixture(params=["local", "aio"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SkillRuntime]:
    if request.param == "local":
        rt: SkillRuntime = LocalSkillRuntime(work_root=tmp_path)
    else:
        double: AioDouble = request.getfixturevalue("aio_double")
        rt = AioSandboxSkillRuntime(
            base_url=double.url, token=double.token, conversation_id="reserved-env"
        )
    with rt:
        yield rt


def _bash_refuses_or_replaces(name: str) -> bool:
    """True when real bash fails to export ``name`` or does not show the given value."""
    script = f"export {name}=zz9 && printf '%s' \"${{{name}}}\""
    result = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script], capture_output=True, text=True, check=False
    )
    imported = subprocess.run(
        [
            "env",
            "-i",
            f"{name}=zz9",
            "bash",
            "--norc",
            "--noprofile",
            "-c",
            f'printf "%s" "${name}"',
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode != 0 or result.stdout != "zz9" or imported.stdout != "zz9"


@pytest.mark.parametrize("name", RESERVED)
def test_every_reserved_name_is_one_real_bash_refuses_or_replaces(name: str) -> None:
    assert _bash_refuses_or_replaces(name)


@pytest.mark.parametrize("name", ["HOME", "PATH", "LANG", "MY_TOKEN", "uid", "UID_", "RANDOMIZE"])
def test_ordinary_names_reach_bash_unchanged(name: str) -> None:
    if name != "PATH":
        assert not _bash_refuses_or_replaces(name)
    assert validate_environment({name: "value"}) == {name: "value"}


@given(name=st.sampled_from(RESERVED), value=st.text(max_size=20).filter(lambda v: "\x00" not in v))
def test_reserved_names_are_refused_by_name_without_the_value(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=rf"environment variable {name} cannot be set") as caught:
        validate_environment({"OK": "1", name: value + SECRET})
    assert SECRET not in str(caught.value)
    with pytest.raises(ValidationError, match=name):
        SkillExecutionRequest(command="true", environment={name: SECRET})
    with pytest.raises(ValidationError, match=name):
        SkillRuntimeConfig(environment={name: SECRET})


@given(
    name=st.from_regex(ENV_NAME_PATTERN, fullmatch=True).filter(
        lambda n: n not in SHELL_RESERVED_NAMES
    )
)
def test_other_valid_names_are_accepted(name: str) -> None:
    assert validate_environment({name: "v"}) == {name: "v"}


@pytest.mark.parametrize("name", RESERVED)
def test_each_runtime_refuses_each_reserved_name_before_running(
    runtime: SkillRuntime, name: str
) -> None:
    smuggled = SkillExecutionRequest.model_construct(command="echo ran", environment={name: SECRET})
    with pytest.raises(ValueError, match=rf"environment variable {name} cannot be set") as caught:
        runtime.execute(smuggled)
    assert SECRET not in str(caught.value)
    assert runtime.execute(SkillExecutionRequest(command="echo ran")).stdout == "ran\n"


@pytest.mark.parametrize("name", ["UID", "EUID", "PPID", "SHELLOPTS", "BASHOPTS", "GROUPS"])
def test_runtimes_refuse_reserved_base_environment(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=name):
        LocalSkillRuntime(work_root=tmp_path, base_environment={name: "0"})
    with pytest.raises(ValueError, match=name):
        AioSandboxSkillRuntime(base_url="http://127.0.0.1:9", base_environment={name: "0"})
