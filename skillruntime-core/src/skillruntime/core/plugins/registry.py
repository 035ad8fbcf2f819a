"""Plugin discovery: pluggy hook specifications, entry-point loading and runtime construction.

Backends are *registered*, never imported by name: a distribution declares a module under the
entry-point group ``skillruntime`` and that module implements some of the hooks below with
:data:`hookimpl`. :func:`get_plugin_manager` loads every such module once per process; a module
that fails to import (or a hook that raises) is logged and reported by :func:`plugin_problems`
instead of breaking every other backend.

A runtime provider carries a pydantic-settings options model. :func:`create_runtime` validates the
options it is given against that model, falling back to ``SKILLRUNTIME_<NAME>_<OPTION>``
environment variables, before it calls the provider's factory. This module imports neither
pydantic nor pydantic-settings until a runtime's options are validated: :func:`runtime_listings`
lists the runtimes of plugins that declare static listings without importing either.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import click
import pluggy

from .._lazy import lazy_attributes
from ..errors import PluginNotFoundError, RuntimeOptionsError, SkillRuntimeError
from .listings import RuntimeListing, RuntimeOptionInfo

if TYPE_CHECKING:  # the runtime modules load when a runtime is built, not with the plugins
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from ..observability.audit import AuditEvent
    from ..runtime.async_spi import AsyncSkillRuntime
    from ..runtime.spi import SkillRuntime
    from .options import RuntimeOptions

__all__ = [
    "ENTRY_POINT_GROUP",
    "KNOWN_RUNTIME_DISTRIBUTIONS",
    "PROJECT_NAME",
    "ArtifactStoreProvider",
    "ConversationReaperProvider",
    "ConversationStoreProvider",
    "PluginProblem",
    "RuntimeListing",
    "RuntimeOptionInfo",
    "RuntimeOptions",
    "RuntimeOptionsError",
    "RuntimeProvider",
    "SkillRuntimeHookSpecs",
    "audit_hook_implementations",
    "available_artifact_stores",
    "available_conversation_reapers",
    "available_conversation_stores",
    "available_runtimes",
    "build_runtime_options",
    "create_async_runtime",
    "create_runtime",
    "describe_options",
    "describe_runtime",
    "env_prefix_for",
    "get_plugin_manager",
    "get_runtime_provider",
    "hookimpl",
    "hookspec",
    "listing_drift",
    "loaded_plugin_manager",
    "plugin_problems",
    "register_cli_commands",
    "register_plugin",
    "registered_plugin",
    "reset_plugin_manager",
    "runtime_listings",
    "unregister_plugin",
]

logger = logging.getLogger(__name__)

PROJECT_NAME = "skillruntime"
"""The pluggy project name; hook implementations must use :data:`hookimpl`."""

ENTRY_POINT_GROUP = "skillruntime"
"""The entry-point group a distribution declares its plugin module under."""

KNOWN_RUNTIME_DISTRIBUTIONS: Mapping[str, str] = {
    "local": "skillruntime-local",
    "opensandbox": "skillruntime-opensandbox",
    "aio": "skillruntime-aio",
    "docker": "skillruntime-docker",
}
"""Runtime names of this project mapped to the distribution that provides them."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


__getattr__, __dir__ = lazy_attributes(
    __name__, {"RuntimeOptions": "skillruntime.core.plugins.options"}
)
# RuntimeOptions (the options models' base class) lives in .runtime_options and is served from
# here on first access, so loading the plugins does not import pydantic-settings.

OptionsT = TypeVar("OptionsT", bound="RuntimeOptions")


@dataclass(frozen=True)
class RuntimeProvider(Generic[OptionsT]):
    """What a backend contributes through ``skillruntime_runtimes``.

    ``name`` is what users pass to :func:`create_runtime`, ``description`` one line for listings,
    ``options_model`` validates options, ``factory`` builds a runtime from validated options and
    ``distribution`` names the distribution that ships it (shown in listings and errors).
    ``async_factory`` (optional) builds the backend's native
    :class:`~skillruntime.core.runtime.async_spi.AsyncSkillRuntime` from the same options; without
    it
    :func:`create_async_runtime` serves the sync runtime through the thread bridge.
    """

    name: str
    description: str
    options_model: type[OptionsT]
    factory: Callable[[OptionsT], SkillRuntime]
    distribution: str = ""
    async_factory: Callable[[OptionsT], AsyncSkillRuntime] | None = None


@dataclass(frozen=True)
class ArtifactStoreProvider:
    """What a distribution contributes through ``skillruntime_artifact_stores``.

    ``scheme`` is the URL scheme the store serves (``viking``, ``file``…), ``factory`` builds a
    store from a URL. The store SPI itself lives in ``skillruntime.core.artifacts``.
    """

    scheme: str
    description: str
    factory: Callable[..., Any]
    distribution: str = ""


@dataclass(frozen=True)
class ConversationStoreProvider:
    """What a distribution contributes through ``skillruntime_conversation_stores``.

    ``scheme`` is the URL scheme the store serves (``sqlite``, ``postgresql``…), ``factory``
    builds a store from a URL. The store SPI lives in ``skillruntime.core.conversations``.
    """

    scheme: str
    description: str
    factory: Callable[..., Any]
    distribution: str = ""


@dataclass(frozen=True)
class ConversationReaperProvider:
    """What a distribution contributes through ``skillruntime_conversation_reapers``.

    ``runtime`` is the runtime name in the records the reaper handles, ``factory`` builds a
    :class:`~skillruntime.core.conversations.sweeps.ConversationReaper` (configured from the
    environment; it contacts nothing until used).
    """

    runtime: str
    description: str
    factory: Callable[[], Any]
    distribution: str = ""


@dataclass(frozen=True)
class PluginProblem:
    """A plugin that could not be loaded or whose hook failed; ``message`` holds no secrets."""

    plugin: str
    distribution: str
    message: str


class SkillRuntimeHookSpecs:
    """The hooks a ``skillruntime`` plugin module may implement (each one is optional)."""

    @hookspec
    def skillruntime_runtimes(self) -> list[RuntimeProvider[Any]]:  # type: ignore[empty-body]
        """Return the runtime providers this plugin contributes."""

    @hookspec
    def skillruntime_runtime_listings(self) -> list[RuntimeListing]:  # type: ignore[empty-body]
        """Describe the runtimes ``skillruntime_runtimes`` of the same plugin returns, statically.

        Optional. When a plugin implements it, listing the runtimes
        (:func:`runtime_listings`, ``skillruntime runtimes``) uses these listings and never calls
        the plugin's ``skillruntime_runtimes``, so the options models (and pydantic-settings) are
        not imported. Each listing must equal :func:`describe_runtime` of the provider of the same
        name: check it in the plugin's tests with :func:`listing_drift`.
        """

    @hookspec
    def skillruntime_artifact_stores(self) -> list[ArtifactStoreProvider]:  # type: ignore[empty-body]
        """Return the skill artifact store providers this plugin contributes."""

    @hookspec
    def skillruntime_conversation_stores(  # type: ignore[empty-body]
        self,
    ) -> list[ConversationStoreProvider]:
        """Return the conversation store providers this plugin contributes."""

    @hookspec
    def skillruntime_conversation_reapers(  # type: ignore[empty-body]
        self,
    ) -> list[ConversationReaperProvider]:
        """Return the conversation reapers (expiry sweeps) this plugin contributes."""

    @hookspec
    def skillruntime_cli(self, group: click.Group) -> None:
        """Add commands to the ``skillruntime`` command group."""

    @hookspec
    def skillruntime_audit_event(self, event: AuditEvent) -> None:
        """Receive one finished operation's audit event (see
        :mod:`skillruntime.core.observability.audit`).

        Called synchronously on the thread that ran the operation: keep it fast, hand slow work
        to a queue. An exception is logged and ignored; it never fails the operation.
        """


_lock = threading.RLock()
_manager: pluggy.PluginManager | None = None
_problems: list[PluginProblem] = []
_distributions: dict[str, str] = {}


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, created and filled from entry points on first use.

    Each entry point of group ``skillruntime`` is loaded separately: one that fails to import is
    logged, recorded in :func:`plugin_problems` and skipped.
    """
    global _manager  # noqa: PLW0603 - one cached manager per process
    with _lock:
        if _manager is None:
            manager = pluggy.PluginManager(PROJECT_NAME)
            manager.add_hookspecs(SkillRuntimeHookSpecs)
            _load_entry_points(manager)
            _manager = manager
        return _manager


def loaded_plugin_manager() -> pluggy.PluginManager | None:
    """The process-wide plugin manager if it has been created, else ``None`` (never loads
    entry points, takes no lock: for hot paths that cache what they read from the manager)."""
    return _manager


def _entry_points() -> Sequence[importlib.metadata.EntryPoint]:
    """The installed entry points of group ``skillruntime`` (tests replace this)."""
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def _load_entry_points(manager: pluggy.PluginManager) -> None:
    for entry_point in _entry_points():
        distribution = entry_point.dist.name if entry_point.dist is not None else ""
        if manager.get_plugin(entry_point.name) is not None or manager.is_blocked(entry_point.name):
            continue
        try:
            plugin = entry_point.load()
            manager.register(plugin, name=entry_point.name)
        except Exception as error:  # a broken plugin must not break the others
            _report(entry_point.name, distribution, f"failed to load: {_describe(error)}")
            continue
        _distributions[entry_point.name] = distribution
        logger.debug("loaded skillruntime plugin %s from %s", entry_point.name, distribution)


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _report(plugin: str, distribution: str, message: str) -> None:
    problem = PluginProblem(plugin=plugin, distribution=distribution, message=message)
    with _lock:
        if problem not in _problems:
            _problems.append(problem)
    logger.warning(
        "skillruntime plugin %s (%s) %s", plugin, distribution or "unknown distribution", message
    )


def plugin_problems() -> list[PluginProblem]:
    """Plugins that failed to load or whose hooks raised, in the order they were found."""
    get_plugin_manager()
    with _lock:
        return list(_problems)


_audit_hook_cache: tuple[Any, Any] = (None, None)
"""(plugin manager, its ``skillruntime_audit_event`` hook caller), read without the lock;
rebuilt when the manager is created again (:func:`reset_plugin_manager`)."""


def audit_hook_implementations() -> list[Any]:
    """The current implementations of the ``skillruntime_audit_event`` hook, loading the entry
    points on first use: the source :func:`~skillruntime.core.observability.hooks.set_hook_source`
    is handed (registrations show at once: pluggy keeps one list per hook caller and edits it in
    place)."""
    global _audit_hook_cache  # noqa: PLW0603 - one cache per process
    cached_manager, caller = _audit_hook_cache
    manager = loaded_plugin_manager()
    if manager is None or manager is not cached_manager:
        manager = get_plugin_manager()
        caller = manager.hook.skillruntime_audit_event
        _audit_hook_cache = (manager, caller)
    implementations: list[Any] = caller.get_hookimpls()
    return implementations


def reset_plugin_manager() -> None:
    """Forget the cached manager and recorded problems; the next use reloads entry points."""
    global _manager  # noqa: PLW0603 - one cached manager per process
    with _lock:
        _manager = None
        _problems.clear()
        _distributions.clear()


def register_plugin(plugin: object, name: str | None = None) -> str:
    """Register a plugin object (a module or an instance with hook implementations).

    Meant for tests and applications that build plugins in code. Returns the registered name.
    """
    manager = get_plugin_manager()
    registered = manager.register(plugin, name=name)
    if registered is None:
        raise SkillRuntimeError(f"plugin {name or plugin!r} is blocked and cannot be registered")
    return registered


def unregister_plugin(name: str) -> None:
    """Remove a plugin registered under ``name`` (nothing happens when it is not registered)."""
    manager = get_plugin_manager()
    if manager.get_plugin(name) is not None:
        manager.unregister(name=name)


@contextmanager
def registered_plugin(plugin: object, name: str | None = None) -> Iterator[str]:
    """Register ``plugin`` for the duration of a ``with`` block (handy in tests)."""
    registered = register_plugin(plugin, name)
    try:
        yield registered
    finally:
        unregister_plugin(registered)


def _call_each(
    hook_name: str, skip: frozenset[str] = frozenset(), **kwargs: Any
) -> list[tuple[str, Any]]:
    """Call every implementation of ``hook_name`` separately, isolating failing plugins.

    Plugins named in ``skip`` are not called.
    """
    manager = get_plugin_manager()
    caller = getattr(manager.hook, hook_name)
    results: list[tuple[str, Any]] = []
    # pluggy returns implementations last-registered first; report in registration order.
    for impl in reversed(caller.get_hookimpls()):
        plugin_name = impl.plugin_name
        if plugin_name in skip:
            continue
        try:
            result = impl.function(*(kwargs[arg] for arg in impl.argnames))
        except Exception as error:  # a broken plugin must not break the others
            _report(
                plugin_name,
                _distributions.get(plugin_name, ""),
                f"{hook_name} raised: {_describe(error)}",
            )
            continue
        results.append((plugin_name, result))
    return results


def _collect(hook_name: str, kind: type[Any], key: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    owners: dict[str, str] = {}
    _gather(_call_each(hook_name), hook_name, kind=kind, key=key, found=found, owners=owners)
    return found


def _gather(
    results: list[tuple[str, Any]],
    hook_name: str,
    *,
    kind: type[Any],
    key: str,
    found: dict[str, Any],
    owners: dict[str, str],
    convert: Callable[[Any], Any] | None = None,
) -> None:
    """Add the providers of ``results`` (each passed through ``convert`` when given) to ``found``
    by ``key``; something that is not a ``kind`` is reported, two of one key are an error."""
    for plugin_name, result in results:
        if result is None:
            continue
        for item in result:
            if not isinstance(item, kind):
                _report(
                    plugin_name,
                    _distributions.get(plugin_name, ""),
                    f"{hook_name} returned {type(item).__name__}, expected {kind.__name__}",
                )
                continue
            provider = item if convert is None else convert(item)
            provider_key = getattr(provider, key)
            if provider_key in found:
                raise SkillRuntimeError(
                    f"two plugins provide {key} {provider_key!r}: {owners[provider_key]} and "
                    f"{_owner(plugin_name, provider)}; uninstall one of them"
                )
            found[provider_key] = provider
            owners[provider_key] = _owner(plugin_name, provider)


def _owner(plugin_name: str, provider: Any) -> str:
    distribution = getattr(provider, "distribution", "") or _distributions.get(plugin_name, "")
    return f"plugin {plugin_name!r}" + (f" ({distribution})" if distribution else "")


def available_runtimes() -> dict[str, RuntimeProvider[Any]]:
    """The installed runtime providers by name, sorted by name.

    Raises :class:`SkillRuntimeError` when two plugins provide the same runtime name.
    """
    found = _collect("skillruntime_runtimes", RuntimeProvider, "name")
    return dict(sorted(found.items()))


def runtime_listings() -> dict[str, RuntimeListing]:
    """What ``skillruntime runtimes`` shows of every installed runtime, sorted by name.

    A plugin implementing ``skillruntime_runtime_listings`` is described by those listings (its
    options models are not imported); the runtimes of the others are derived from their
    providers with :func:`describe_runtime`. Raises :class:`SkillRuntimeError` when two plugins
    provide the same runtime name.
    """
    found: dict[str, Any] = {}
    owners: dict[str, str] = {}
    listed = _call_each("skillruntime_runtime_listings")
    listing_hook = "skillruntime_runtime_listings"
    _gather(listed, listing_hook, kind=RuntimeListing, key="name", found=found, owners=owners)
    described = frozenset(plugin_name for plugin_name, _ in listed)
    providers = _call_each("skillruntime_runtimes", skip=described)
    _gather(
        providers,
        "skillruntime_runtimes",
        kind=RuntimeProvider,
        key="name",
        found=found,
        owners=owners,
        convert=describe_runtime,
    )
    return dict(sorted(found.items()))


def describe_runtime(provider: RuntimeProvider[Any]) -> RuntimeListing:
    """The listing of ``provider``, derived from its options model (imports the model)."""
    return RuntimeListing(
        name=provider.name,
        description=provider.description,
        distribution=provider.distribution,
        options=tuple(describe_options(provider)),
    )


def listing_drift(plugin: object) -> list[str]:
    """How the static listings of ``plugin`` differ from its providers (empty when they agree).

    ``plugin`` is a plugin module or object implementing both ``skillruntime_runtime_listings``
    and ``skillruntime_runtimes``; each difference is one line naming the runtime and field.
    """
    declared = {item.name: item for item in plugin.skillruntime_runtime_listings()}  # type: ignore[attr-defined]
    derived = {
        provider.name: describe_runtime(provider)
        for provider in plugin.skillruntime_runtimes()  # type: ignore[attr-defined]
    }
    drift = [f"{name}: listed but not provided" for name in sorted(set(declared) - set(derived))]
    drift += [f"{name}: provided but not listed" for name in sorted(set(derived) - set(declared))]
    for name in sorted(set(declared) & set(derived)):
        listing, real = declared[name], derived[name]
        for field in ("description", "distribution"):
            if getattr(listing, field) != getattr(real, field):
                drift.append(f"{name}: {field} is {getattr(real, field)!r}")
        if listing.options != real.options:
            drift.append(f"{name}: options are {real.options!r}")
    return drift


def available_artifact_stores() -> dict[str, ArtifactStoreProvider]:
    """The installed artifact store providers by URL scheme."""
    return dict(
        sorted(_collect("skillruntime_artifact_stores", ArtifactStoreProvider, "scheme").items())
    )


def available_conversation_stores() -> dict[str, ConversationStoreProvider]:
    """The installed conversation store providers by URL scheme."""
    found = _collect("skillruntime_conversation_stores", ConversationStoreProvider, "scheme")
    return dict(sorted(found.items()))


def available_conversation_reapers() -> dict[str, ConversationReaperProvider]:
    """The installed conversation reaper providers by runtime name."""
    found = _collect("skillruntime_conversation_reapers", ConversationReaperProvider, "runtime")
    return dict(sorted(found.items()))


def register_cli_commands(group: click.Group) -> None:
    """Let every plugin add commands to ``group`` through ``skillruntime_cli``."""
    _call_each("skillruntime_cli", group=group)


def get_runtime_provider(name: str) -> RuntimeProvider[Any]:
    """The provider of runtime ``name``.

    Raises :class:`PluginNotFoundError` listing the installed runtimes and naming the
    distribution to install.
    """
    runtimes = available_runtimes()
    provider = runtimes.get(name)
    if provider is not None:
        return provider
    installed = ", ".join(runtimes) if runtimes else "none"
    distribution = KNOWN_RUNTIME_DISTRIBUTIONS.get(name)
    if distribution is not None:
        advice = (
            f"install it with: pip install {distribution} (from a clone of the repository, "
            f"until it is published: pip install ./skillruntime-core ./{distribution})"
        )
    else:
        advice = (
            f"install the distribution that provides the {name!r} runtime (it registers a module "
            f"under the {ENTRY_POINT_GROUP!r} entry-point group)"
        )
    raise PluginNotFoundError(
        f"no runtime named {name!r} is installed (installed runtimes: {installed}); {advice}"
    )


def env_prefix_for(name: str) -> str:
    """The environment variable prefix of runtime ``name``: ``SKILLRUNTIME_<NAME>_``."""
    return "SKILLRUNTIME_" + "".join(ch if ch.isalnum() else "_" for ch in name).upper() + "_"


def _effective_prefix(provider: RuntimeProvider[Any]) -> str:
    configured = provider.options_model.model_config.get("env_prefix") or ""
    return str(configured) or env_prefix_for(provider.name)


def describe_options(provider: RuntimeProvider[Any]) -> list[RuntimeOptionInfo]:
    """The options of ``provider`` with type, default and environment variable name."""
    prefix = _effective_prefix(provider)
    infos: list[RuntimeOptionInfo] = []
    for field_name, field in provider.options_model.model_fields.items():
        required = field.is_required()
        default: str | None = None
        if not required:
            value = field.get_default(call_default_factory=True)
            default = None if value is None else _show_default(field.annotation, value)
        infos.append(
            RuntimeOptionInfo(
                name=field_name,
                type=_type_name(field.annotation),
                required=required,
                default=default,
                env_var=(prefix + field_name).upper(),
                description=field.description or "",
            )
        )
    return infos


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("pathlib.", "")


def _show_default(annotation: Any, value: Any) -> str:
    if "Secret" in _type_name(annotation):
        return "********"
    return str(value)


def build_runtime_options(
    provider: RuntimeProvider[OptionsT], options: Mapping[str, Any]
) -> OptionsT:
    """Validate ``options`` with the provider's model (environment variables fill the gaps).

    Option names may use ``-`` for ``_``. Raises :class:`RuntimeOptionsError` for an unknown option
    (listing the valid ones) or an invalid value (naming the option, never echoing the value).
    """
    model = provider.options_model
    normalized = {key.replace("-", "_"): value for key, value in options.items()}
    valid = list(model.model_fields)
    unknown = sorted(key for key in normalized if key not in model.model_fields)
    if unknown:
        raise RuntimeOptionsError(
            f"runtime {provider.name!r} has no option {', '.join(map(repr, unknown))}; "
            f"valid options: {', '.join(valid) if valid else 'none'}"
        )
    init: dict[str, Any] = dict(normalized)
    if not model.model_config.get("env_prefix"):
        init["_env_prefix"] = env_prefix_for(provider.name)
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    try:
        return model(**init)
    except ValidationError as error:
        raise RuntimeOptionsError(_format_validation_error(provider, error)) from None
    except SettingsError as error:
        raise RuntimeOptionsError(_format_settings_error(provider, error)) from None


def _format_settings_error(provider: RuntimeProvider[Any], error: SettingsError) -> str:
    """Name the environment variable pydantic-settings could not decode (never its value)."""
    found = re.search(r'field "([^"]+)"', str(error))
    if found is None:
        return f"invalid environment settings for runtime {provider.name!r}"
    variable = (_effective_prefix(provider) + found.group(1)).upper()
    return (
        f"environment variable {variable} is not valid JSON "
        f"(option {found.group(1)!r} of runtime {provider.name!r} takes a JSON value there)"
    )


def _format_validation_error(provider: RuntimeProvider[Any], error: ValidationError) -> str:
    prefix = _effective_prefix(provider)
    parts = []
    for item in error.errors(include_input=False, include_url=False):
        location = ".".join(str(part) for part in item["loc"]) or "options"
        hint = ""
        if item["type"] == "missing":
            hint = f" (pass it as an option or set {(prefix + location).upper()})"
        parts.append(f"{location}: {item['msg']}{hint}")
    return f"invalid options for runtime {provider.name!r}: " + "; ".join(parts)


def create_runtime(name: str, /, **options: Any) -> SkillRuntime:
    """Build the runtime ``name`` from validated ``options``.

    Options not given are read from ``SKILLRUNTIME_<NAME>_<OPTION>`` environment variables, then
    defaults. Raises :class:`PluginNotFoundError` when no installed plugin provides ``name`` and
    :class:`RuntimeOptionsError` for unknown or invalid options; nothing is built in either case.
    """
    provider = get_runtime_provider(name)
    validated = build_runtime_options(provider, options)
    logger.debug("creating runtime %s with options %s", name, sorted(options))
    return provider.factory(validated)


def create_async_runtime(name: str, /, **options: Any) -> AsyncSkillRuntime:
    """Build the async runtime ``name`` from validated ``options`` (same rules as
    :func:`create_runtime`).

    The provider's native async runtime is used when it has one (``async_factory``); otherwise
    its sync runtime is served through :func:`~skillruntime.core.runtime.bridge.to_async`, whose
    cancellation guarantees are weaker (see :mod:`skillruntime.core.runtime.bridge`).
    """
    provider = get_runtime_provider(name)
    validated = build_runtime_options(provider, options)
    logger.debug("creating async runtime %s with options %s", name, sorted(options))
    if provider.async_factory is not None:
        return provider.async_factory(validated)
    from ..runtime.bridge import to_async

    return to_async(provider.factory(validated))
