"""Each runtime's options model is the one declaration of its options: ``__init__`` takes exactly
the model's fields as keyword arguments (plus the objects a runtime may be handed, which are not
options), with the model's defaults, and ``runtime_arguments()`` gives every field back."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from pydantic import SecretStr

from skillruntime.aio import AioSandboxSkillRuntime, AsyncAioSkillRuntime
from skillruntime.aio.options import AioRuntimeOptions
from skillruntime.core.plugins.options import RuntimeOptions
from skillruntime.docker import AsyncDockerSkillRuntime, DockerSkillRuntime
from skillruntime.docker.options import DockerRuntimeOptions
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime
from skillruntime.local.options import LocalRuntimeOptions
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime
from skillruntime.opensandbox.options import OpenSandboxRuntimeOptions

RUNTIMES: list[tuple[type[RuntimeOptions], type[Any], frozenset[str]]] = [
    (LocalRuntimeOptions, LocalSkillRuntime, frozenset({"durability"})),
    (LocalRuntimeOptions, AsyncLocalSkillRuntime, frozenset({"durability"})),
    (DockerRuntimeOptions, DockerSkillRuntime, frozenset({"engine", "durability"})),
    (
        OpenSandboxRuntimeOptions,
        OpenSandboxSkillRuntime,
        frozenset({"connection_config", "durability"}),
    ),
    (AioRuntimeOptions, AioSandboxSkillRuntime, frozenset({"client", "durability"})),
]
"""(options model, runtime class, the arguments that are objects rather than options)."""

FORWARDING = [
    (DockerRuntimeOptions, AsyncDockerSkillRuntime),
    (OpenSandboxRuntimeOptions, AsyncOpenSandboxSkillRuntime),
    (AioRuntimeOptions, AsyncAioSkillRuntime),
]
"""Async faces that take the sync runtime's options through ``**options``."""


def _keywords(runtime: type[Any]) -> dict[str, inspect.Parameter]:
    parameters = inspect.signature(runtime.__init__).parameters
    return {
        name: parameter
        for name, parameter in parameters.items()
        if name != "self" and parameter.kind is not inspect.Parameter.VAR_KEYWORD
    }


def _same_default(declared: Any, field_default: Any) -> bool:
    if declared is inspect.Parameter.empty:
        return False
    if isinstance(field_default, tuple | list):
        return declared is None or list(declared) == list(field_default)
    if isinstance(field_default, dict):
        return (declared is None and field_default == {}) or declared == field_default
    return bool(declared == field_default)


@pytest.mark.parametrize(
    ("model", "runtime", "objects"), RUNTIMES, ids=[r[1].__name__ for r in RUNTIMES]
)
def test_init_takes_exactly_the_model_fields_with_their_defaults(
    model: type[RuntimeOptions], runtime: type[Any], objects: frozenset[str]
) -> None:
    keywords = _keywords(runtime)
    fields = model.model_fields
    assert set(keywords) - objects == set(fields), "an option declared in one place only"
    for name, field in fields.items():
        if field.is_required():
            assert keywords[name].default is inspect.Parameter.empty, name
            continue
        default = field.get_default(call_default_factory=True)
        assert _same_default(keywords[name].default, default), (
            f"{runtime.__name__}({name}=) defaults to {keywords[name].default!r}, "
            f"the model to {default!r}"
        )
        assert field.description, f"{model.__name__}.{name} is undocumented"


@pytest.mark.parametrize(("model", "runtime"), FORWARDING, ids=[r[1].__name__ for r in FORWARDING])
def test_async_faces_take_every_option(model: type[RuntimeOptions], runtime: type[Any]) -> None:
    parameters = inspect.signature(runtime.__init__).parameters
    forwards = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    assert forwards or set(model.model_fields) <= set(parameters)


@pytest.mark.parametrize("model", sorted({r[0] for r in RUNTIMES}, key=lambda m: m.__name__))
def test_runtime_arguments_give_every_field_back(model: type[RuntimeOptions]) -> None:
    required = {
        name: "http://127.0.0.1:9"
        for name, field in model.model_fields.items()
        if field.is_required()
    }
    options = model(**required)
    arguments = options.runtime_arguments()
    assert set(arguments) == set(model.model_fields)
    assert not any(isinstance(value, SecretStr | tuple) for value in arguments.values())
