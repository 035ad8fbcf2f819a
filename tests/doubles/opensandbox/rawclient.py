"""Raw-HTTP helpers for talking to the OpenSandbox double without the SDK (tests only)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import requests

from doubles.opensandbox.harness import OpenSandboxDouble

TIMEOUT = 30


@dataclass
class RawSandbox:
    """A sandbox created over raw HTTP, with helpers for both APIs."""

    double: OpenSandboxDouble
    id: str
    execd: str
    http: requests.Session

    def lifecycle(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {"OPEN-SANDBOX-API-KEY": self.double.api_key, **kwargs.pop("headers", {})}
        return self.http.request(
            method, f"{self.double.url}/v1{path}", headers=headers, timeout=TIMEOUT, **kwargs
        )

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.http.request(method, f"{self.execd}{path}", timeout=TIMEOUT, **kwargs)

    def run(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """POST /command and parse the bare-JSON frames."""
        response = self.call("POST", "/command", json=body, stream=True)
        assert response.status_code == 200, response.text
        raw = b"".join(response.iter_content(chunk_size=None))
        frames = [f for f in raw.split(b"\n\n") if f.strip()]
        return [json.loads(f) for f in frames]


def create_raw(double: OpenSandboxDouble, http: requests.Session, **extra: Any) -> RawSandbox:
    """Create a sandbox over raw HTTP and resolve its execd endpoint."""
    headers = {"OPEN-SANDBOX-API-KEY": double.api_key}
    body = {
        "image": {"uri": "python:3.12"},
        "entrypoint": ["tail", "-f", "/dev/null"],
        "resourceLimits": {"cpu": "1", "memory": "2Gi"},
        "timeout": 600,
        **extra,
    }
    created = http.post(f"{double.url}/v1/sandboxes", json=body, headers=headers, timeout=TIMEOUT)
    assert created.status_code == 202, created.text
    sandbox_id = created.json()["id"]
    endpoint = http.get(
        f"{double.url}/v1/sandboxes/{sandbox_id}/endpoints/44772",
        params={"use_server_proxy": "false"},
        headers=headers,
        timeout=TIMEOUT,
    )
    assert endpoint.status_code == 200, endpoint.text
    return RawSandbox(double, sandbox_id, "http://" + endpoint.json()["endpoint"], http)
