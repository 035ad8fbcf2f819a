"""Static runtime listings: equal to what the options models give, used without importing them."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from pydantic import Field

from skillruntime.core.errors import SkillRuntimeError
from skillruntime.core.plugins import registry as plugins
from skillruntime.core.plugins.listings import REQUIRED, UPLOAD_POLICY_DEFAULT, options
from skillruntime.core.plugins.registry import (
    RuntimeListing,
    RuntimeOptions,
    RuntimeProvider,
    describe_options,
    describe_runtime,
    hookimpl,
    listing_drift,
    plugin_problems,
    register_plugin,
    reset_plugin_manager,
    runtime_listings,
)
from skillruntime.core.skills.policy import UploadPolicy

BACKENDS = (
    "skillruntime.local.plugin",
    "skillruntime.aio.plugin",
    "skillruntime.opensandbox.plugin",
    "skillruntime.docker.plugin",
)


@pytest.fixture(autouse=True)
def no_installed_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(plugins, "_entry_points", list)
    reset_plugin_manager()
    yield
    reset_plugin_manager()


class KvOptions(RuntimeOptions):
    endpoint: str = Field(description="Server URL")
    retries: int = Field(default=3, description="Attempts")
    label: str | None = None


def kv_provider(name: str = "kv") -> RuntimeProvider[Any]:
    return RuntimeProvider(name, "A key-value runtime", KvOptions, lambda o: None, "kv-dist")  # type: ignore[arg-type,return-value]


KV_LISTING = RuntimeListing(
    name="kv",
    description="A key-value runtime",
    distribution="kv-dist",
    options=options(
        "SKILLRUNTIME_KV_",
        [
            ("endpoint", "str", REQUIRED, "Server URL"),
            ("retries", "int", "3", "Attempts"),
            ("label", "str | None", None, ""),
        ],
    ),
)


class ListedPlugin:
    """Declares a listing; its providers hook records whether it was asked."""

    def __init__(self, listing: RuntimeListing = KV_LISTING) -> None:
        self.listing = listing
        self.asked_for_providers = 0

    @hookimpl
    def skillruntime_runtime_listings(self) -> list[RuntimeListing]:
        return [self.listing]

    @hookimpl
    def skillruntime_runtimes(self) -> list[RuntimeProvider[Any]]:
        self.asked_for_providers += 1
        return [kv_provider()]


class UnlistedPlugin:
    def __init__(self, name: str = "plain") -> None:
        self.name = name

    @hookimpl
    def skillruntime_runtimes(self) -> list[RuntimeProvider[Any]]:
        return [kv_provider(self.name)]


@pytest.mark.parametrize("module_name", BACKENDS)
def test_each_backend_listing_equals_the_one_derived_from_its_options_model(
    module_name: str,
) -> None:
    module = importlib.import_module(module_name)
    assert listing_drift(module) == []
    (provider,) = module.skillruntime_runtimes()
    (listing,) = module.skillruntime_runtime_listings()
    assert listing.options == tuple(describe_options(provider))
    assert listing.options  # a listing with no options would hide a broken declaration


def test_the_upload_policy_default_text_is_the_model_default() -> None:
    assert str(UploadPolicy()) == UPLOAD_POLICY_DEFAULT


def test_options_rows_give_the_infos_describe_options_derives() -> None:
    assert listing_drift(ListedPlugin()) == []
    assert describe_runtime(kv_provider()) == KV_LISTING


def test_a_listed_plugin_is_not_asked_for_its_providers() -> None:
    listed = ListedPlugin()
    register_plugin(listed, "listed")
    register_plugin(UnlistedPlugin(), "unlisted")

    found = runtime_listings()

    assert list(found) == ["kv", "plain"]
    assert found["kv"] is listed.listing
    assert found["plain"] == describe_runtime(kv_provider("plain"))
    assert found["plain"].options[0].env_var == "SKILLRUNTIME_PLAIN_ENDPOINT"
    assert listed.asked_for_providers == 0
    assert plugin_problems() == []


def test_a_failing_listing_hook_falls_back_to_the_providers_and_is_reported() -> None:
    class Broken(ListedPlugin):
        @hookimpl
        def skillruntime_runtime_listings(self) -> list[RuntimeListing]:
            raise RuntimeError("no listing")

    broken = Broken()
    register_plugin(broken, "broken")

    assert runtime_listings() == {"kv": KV_LISTING}
    assert broken.asked_for_providers == 1
    assert any("RuntimeError: no listing" in p.message for p in plugin_problems())


def test_wrong_items_are_reported_with_the_type_their_hook_expects() -> None:
    class Wrong:
        @hookimpl
        def skillruntime_runtime_listings(self) -> list[object]:
            return ["not a listing"]

    class WrongProvider:
        @hookimpl
        def skillruntime_runtimes(self) -> list[object]:
            return [KV_LISTING]

    register_plugin(Wrong(), "wrong")
    register_plugin(WrongProvider(), "wrong-provider")

    assert runtime_listings() == {}
    messages = [p.message for p in plugin_problems()]
    assert "skillruntime_runtime_listings returned str, expected RuntimeListing" in messages
    assert "skillruntime_runtimes returned RuntimeListing, expected RuntimeProvider" in messages


def test_a_runtime_listed_by_one_plugin_and_provided_by_another_is_a_clear_error() -> None:
    register_plugin(ListedPlugin(), "listed")
    register_plugin(UnlistedPlugin("kv"), "unlisted")

    with pytest.raises(SkillRuntimeError, match="two plugins provide name 'kv'"):
        runtime_listings()


@pytest.mark.parametrize(
    ("listing", "expected"),
    [
        (replace(KV_LISTING, description="old words"), "kv: description is 'A key-value runtime'"),
        (replace(KV_LISTING, distribution="kv"), "kv: distribution is 'kv-dist'"),
        (replace(KV_LISTING, options=KV_LISTING.options[:2]), "kv: options are"),
        (
            replace(KV_LISTING, options=(replace(KV_LISTING.options[0], required=False),)),
            "kv: options are",
        ),
        (replace(KV_LISTING, name="other"), "other: listed but not provided"),
    ],
)
def test_listing_drift_names_what_differs(listing: RuntimeListing, expected: str) -> None:
    drift = listing_drift(ListedPlugin(listing))
    assert any(line.startswith(expected) for line in drift), drift
    if listing.name == "other":
        assert "kv: provided but not listed" in drift


def test_runtime_options_is_served_from_its_own_module() -> None:
    from skillruntime.core.plugins.options import RuntimeOptions as Base

    assert plugins.RuntimeOptions is Base
    assert "RuntimeOptions" in dir(plugins)
