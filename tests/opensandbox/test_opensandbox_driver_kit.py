"""The driver kit on the OpenSandbox driver against the protocol double: every conversation rule
of core's lifecycle, with sandboxes and metadata (docs/custom-runtime.md, "Writing a sandbox
driver")."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
from opensandbox.transport import RetryPolicy

from doubles.opensandbox.harness import OpenSandboxDouble
from skillruntime.core.conversations.sandboxes import SandboxDriver
from skillruntime.core.testing import DriverConformance
from skillruntime.opensandbox._tls import connection_config
from skillruntime.opensandbox.driver import OpenSandboxDriver
from skillruntime.opensandbox.options import DEFAULT_IMAGE
from skillruntime.opensandbox.sandbox import SandboxClient, SandboxSettings


class TestOpenSandboxDriver(DriverConformance):
    runtime_tag = "opensandbox"

    @pytest.fixture(autouse=True)
    def _double(self, opensandbox_double: OpenSandboxDouble) -> None:
        self.double = opensandbox_double

    def make_driver(self, tags: Mapping[str, str], *, private: bool = False) -> SandboxDriver[Any]:
        config = connection_config(
            domain=self.double.domain,
            api_key=self.double.api_key,
            protocol="http",
            request_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy.disabled(),
            disable_metrics=True,
        )
        client = SandboxClient(config, SandboxSettings(image=DEFAULT_IMAGE, retry_seconds=5.0))
        driver: SandboxDriver[Any] = OpenSandboxDriver(client)
        return driver

    def vanish(self, driver: SandboxDriver[Any], sandbox_id: str) -> None:
        # Gone behind the driver's back, as an expiry or an eviction removes it.
        assert self.double.kill_behind_back(sandbox_id)

    def cleanup(self, driver: SandboxDriver[Any]) -> None:
        assert isinstance(driver, OpenSandboxDriver)
        driver.client.close()
