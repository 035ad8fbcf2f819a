"""Lifecycle API of the OpenSandbox double over raw HTTP."""

from __future__ import annotations

import datetime as dt
from urllib.parse import quote

import pytest
import requests

from doubles.opensandbox import OpenSandboxDouble
from doubles.opensandbox.rawclient import RawSandbox, create_raw

TIMEOUT = 30


def _headers(double: OpenSandboxDouble) -> dict[str, str]:
    return {"OPEN-SANDBOX-API-KEY": double.api_key}


def test_missing_and_wrong_api_key_are_401(
    opensandbox_double: OpenSandboxDouble, http: requests.Session
) -> None:
    missing = http.get(f"{opensandbox_double.url}/v1/sandboxes", timeout=TIMEOUT)
    assert missing.status_code == 401
    assert missing.json()["code"] == "MISSING_API_KEY"
    wrong = http.get(
        f"{opensandbox_double.url}/v1/sandboxes",
        headers={"OPEN-SANDBOX-API-KEY": "nope"},
        timeout=TIMEOUT,
    )
    assert wrong.status_code == 401
    assert wrong.json() == {
        "code": "INVALID_API_KEY",
        "message": "Authentication credentials are invalid. Check your API key and try again.",
    }


def test_create_get_delete_and_404_afterwards(sandbox: RawSandbox) -> None:
    got = sandbox.lifecycle("GET", f"/sandboxes/{sandbox.id}")
    assert got.status_code == 200
    body = got.json()
    assert body["id"] == sandbox.id
    assert body["status"]["state"] == "Running"
    assert body["entrypoint"] == ["tail", "-f", "/dev/null"]
    assert body["image"] == {"uri": "python:3.12"}
    created = dt.datetime.fromisoformat(body["createdAt"].replace("Z", "+00:00"))
    expires = dt.datetime.fromisoformat(body["expiresAt"].replace("Z", "+00:00"))
    assert (expires - created).total_seconds() == pytest.approx(600, abs=1)

    deleted = sandbox.lifecycle("DELETE", f"/sandboxes/{sandbox.id}")
    assert deleted.status_code == 204
    assert deleted.content == b""
    again = sandbox.lifecycle("GET", f"/sandboxes/{sandbox.id}")
    assert again.status_code == 404
    assert again.json()["code"] == "DOCKER::SANDBOX_NOT_FOUND"
    assert sandbox.lifecycle("DELETE", f"/sandboxes/{sandbox.id}").status_code == 404


def test_routes_also_served_without_v1_prefix(sandbox: RawSandbox) -> None:
    response = sandbox.http.get(
        f"{sandbox.double.url}/sandboxes/{sandbox.id}",
        headers=_headers(sandbox.double),
        timeout=TIMEOUT,
    )
    assert response.status_code == 200
    assert response.json()["id"] == sandbox.id


@pytest.mark.parametrize(
    ("patch", "status"),
    [
        ({"timeout": 59}, 422),
        ({"timeout": "60"}, 422),
        ({"resourceLimits": None}, 422),
        ({"entrypoint": []}, 422),
        ({"image": None}, 422),
        ({"metadata": {"k": "v" * 64}}, 400),
        ({"metadata": {"k": "-bad"}}, 400),
        ({"metadata": {"opensandbox.io/x": "v"}}, 400),
        ({"metadata": {"k" * 64: "v"}}, 400),
    ],
)
def test_create_validation(
    opensandbox_double: OpenSandboxDouble,
    http: requests.Session,
    patch: dict[str, object],
    status: int,
) -> None:
    body: dict[str, object] = {
        "image": {"uri": "python:3.12"},
        "entrypoint": ["tail", "-f", "/dev/null"],
        "resourceLimits": {"cpu": "1", "memory": "2Gi"},
        "timeout": 600,
    }
    body.update(patch)
    before = opensandbox_double.stats()["creates"]
    response = http.post(
        f"{opensandbox_double.url}/v1/sandboxes",
        json=body,
        headers=_headers(opensandbox_double),
        timeout=TIMEOUT,
    )
    assert response.status_code == status, response.text
    if status == 400:
        assert response.json()["code"] == "SANDBOX::INVALID_METADATA_LABEL"
    else:
        assert isinstance(response.json()["detail"], list)
    assert opensandbox_double.stats()["creates"] == before


def test_metadata_value_of_63_chars_is_accepted(
    opensandbox_double: OpenSandboxDouble, http: requests.Session
) -> None:
    raw = create_raw(opensandbox_double, http, metadata={"owner": "a" * 63, "app/x.y": "z"})
    try:
        body = raw.lifecycle("GET", f"/sandboxes/{raw.id}").json()
        assert body["metadata"] == {"owner": "a" * 63, "app/x.y": "z"}
    finally:
        raw.lifecycle("DELETE", f"/sandboxes/{raw.id}")


def test_null_timeout_means_no_expiry_and_renew_is_409(
    opensandbox_double: OpenSandboxDouble, http: requests.Session
) -> None:
    raw = create_raw(opensandbox_double, http, timeout=None)
    try:
        assert raw.lifecycle("GET", f"/sandboxes/{raw.id}").json()["expiresAt"] is None
        future = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)).isoformat()
        renewed = raw.lifecycle(
            "POST", f"/sandboxes/{raw.id}/renew-expiration", json={"expiresAt": future}
        )
        assert renewed.status_code == 409
        assert renewed.json()["code"] == "DOCKER::INVALID_EXPIRATION"
    finally:
        raw.lifecycle("DELETE", f"/sandboxes/{raw.id}")


def test_renew_sets_expiry_exactly_and_rejects_the_past(sandbox: RawSandbox) -> None:
    target = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=90)
    renewed = sandbox.lifecycle(
        "POST", f"/sandboxes/{sandbox.id}/renew-expiration", json={"expiresAt": target.isoformat()}
    )
    assert renewed.status_code == 200
    got = dt.datetime.fromisoformat(renewed.json()["expiresAt"].replace("Z", "+00:00"))
    assert abs((got - target).total_seconds()) < 0.01
    past = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)).isoformat()
    rejected = sandbox.lifecycle(
        "POST", f"/sandboxes/{sandbox.id}/renew-expiration", json={"expiresAt": past}
    )
    assert rejected.status_code == 400
    assert rejected.json()["code"] == "DOCKER::INVALID_EXPIRATION"


def test_expiry_reaps_the_sandbox_and_its_files(
    opensandbox_double: OpenSandboxDouble, http: requests.Session
) -> None:
    raw = create_raw(opensandbox_double, http, timeout=60)
    root = opensandbox_double.workspace_of(raw.id)
    assert root.is_dir()
    before = opensandbox_double.stats()["expired"]
    opensandbox_double.advance_clock(61)
    gone = raw.lifecycle("GET", f"/sandboxes/{raw.id}")
    assert gone.status_code == 404
    assert gone.json()["code"] == "DOCKER::SANDBOX_NOT_FOUND"
    assert not root.exists()
    assert opensandbox_double.stats()["expired"] == before + 1
    with pytest.raises(requests.ConnectionError):
        raw.call("GET", "/ping")


def test_endpoints_for_execd_and_egress_ports(sandbox: RawSandbox) -> None:
    for port in (44772, 18080):
        direct = sandbox.lifecycle(
            "GET", f"/sandboxes/{sandbox.id}/endpoints/{port}", params={"use_server_proxy": "false"}
        )
        assert direct.status_code == 200
        assert direct.json()["endpoint"] == (
            f"{sandbox.double.domain}/sandbox/{sandbox.id}/proxy/{port}"
        )
        proxied = sandbox.lifecycle(
            "GET", f"/sandboxes/{sandbox.id}/endpoints/{port}", params={"use_server_proxy": "true"}
        )
        assert proxied.json()["endpoint"] == (
            f"{sandbox.double.domain}/v1/sandboxes/{sandbox.id}/proxy/{port}"
        )
    assert sandbox.lifecycle("GET", f"/sandboxes/{sandbox.id}/endpoints/0").status_code == 400
    assert sandbox.lifecycle("GET", "/sandboxes/nope/endpoints/44772").status_code == 404


def test_server_proxy_requires_the_api_key(sandbox: RawSandbox) -> None:
    url = f"{sandbox.double.url}/v1/sandboxes/{sandbox.id}/proxy/44772/ping"
    assert sandbox.http.get(url, timeout=TIMEOUT).status_code == 401
    ok = sandbox.http.get(url, headers=_headers(sandbox.double), timeout=TIMEOUT)
    assert ok.status_code == 200


def test_list_filters_by_metadata_and_state_with_pagination(
    opensandbox_double: OpenSandboxDouble, http: requests.Session
) -> None:
    tag = "list-" + quote(str(id(http)))
    made = [
        create_raw(opensandbox_double, http, metadata={"tag": tag, "n": str(i)}) for i in range(3)
    ]
    try:
        assert made[0].lifecycle("POST", f"/sandboxes/{made[0].id}/pause").status_code == 202
        listed = (
            made[0]
            .lifecycle("GET", "/sandboxes", params={"metadata": f"tag={tag}", "pageSize": 2})
            .json()
        )
        assert listed["pagination"] == {
            "page": 1,
            "pageSize": 2,
            "totalItems": 3,
            "totalPages": 2,
            "hasNextPage": True,
        }
        assert len(listed["items"]) == 2
        running = (
            made[0]
            .lifecycle(
                "GET", "/sandboxes", params={"metadata": f"tag={tag}&n=1", "state": "Running"}
            )
            .json()
        )
        assert [s["id"] for s in running["items"]] == [made[1].id]
        paused = (
            made[0]
            .lifecycle("GET", "/sandboxes", params={"metadata": f"tag={tag}", "state": ["Paused"]})
            .json()
        )
        assert [s["id"] for s in paused["items"]] == [made[0].id]
    finally:
        for raw in made:
            raw.lifecycle("DELETE", f"/sandboxes/{raw.id}")


def test_a_listing_switched_to_ignore_the_metadata_filter_lists_every_sandbox(
    opensandbox_double: OpenSandboxDouble, http: requests.Session
) -> None:
    tag = "ignored-" + quote(str(id(http)))
    tagged = create_raw(opensandbox_double, http, metadata={"tag": tag})
    untagged = create_raw(opensandbox_double, http)
    opensandbox_double.set_ignore_metadata_filter(True)
    try:
        listed = tagged.lifecycle(
            "GET", "/sandboxes", params={"metadata": f"tag={tag}", "pageSize": 200}
        ).json()
    finally:
        opensandbox_double.set_ignore_metadata_filter(False)
        for raw in (tagged, untagged):
            raw.lifecycle("DELETE", f"/sandboxes/{raw.id}")
    assert {tagged.id, untagged.id} <= {item["id"] for item in listed["items"]}


def test_pause_freezes_execd_and_resume_restores_it(sandbox: RawSandbox) -> None:
    assert sandbox.lifecycle("POST", f"/sandboxes/{sandbox.id}/resume").status_code == 409
    assert sandbox.lifecycle("POST", f"/sandboxes/{sandbox.id}/pause").status_code == 202
    assert (
        sandbox.lifecycle("GET", f"/sandboxes/{sandbox.id}").json()["status"]["state"] == "Paused"
    )
    again = sandbox.lifecycle("POST", f"/sandboxes/{sandbox.id}/pause")
    assert again.status_code == 409
    assert again.json()["code"] == "DOCKER::SANDBOX_NOT_RUNNING"
    with pytest.raises(requests.ConnectionError):
        sandbox.call("GET", "/ping")
    assert sandbox.lifecycle("POST", f"/sandboxes/{sandbox.id}/resume").status_code == 202
    assert sandbox.call("GET", "/ping").status_code == 200


def test_patch_metadata_merges_and_deletes(
    opensandbox_double: OpenSandboxDouble, http: requests.Session
) -> None:
    raw = create_raw(opensandbox_double, http, metadata={"a": "1", "b": "2"})
    try:
        patched = raw.lifecycle(
            "PATCH", f"/sandboxes/{raw.id}/metadata", json={"a": None, "c": "3"}
        )
        assert patched.status_code == 200
        assert patched.json()["metadata"] == {"b": "2", "c": "3"}
        bad = raw.lifecycle("PATCH", f"/sandboxes/{raw.id}/metadata", json={"d": "x" * 64})
        assert bad.status_code == 400
    finally:
        raw.lifecycle("DELETE", f"/sandboxes/{raw.id}")


def test_kill_behind_back_is_invisible_until_the_next_call(
    opensandbox_double: OpenSandboxDouble, http: requests.Session
) -> None:
    raw = create_raw(opensandbox_double, http)
    before = opensandbox_double.stats()
    assert opensandbox_double.kill_behind_back(raw.id) is True
    assert opensandbox_double.kill_behind_back(raw.id) is False
    after = opensandbox_double.stats()
    assert after["kills_behind_back"] == before["kills_behind_back"] + 1
    assert raw.id not in after["live_sandbox_ids"]
    assert raw.lifecycle("GET", f"/sandboxes/{raw.id}").status_code == 404
    with pytest.raises(requests.ConnectionError):
        raw.call("GET", "/ping")


def test_stats_count_requests_by_route(sandbox: RawSandbox) -> None:
    sandbox.double.reset_stats()
    sandbox.lifecycle("GET", f"/sandboxes/{sandbox.id}")
    sandbox.lifecycle("GET", f"/sandboxes/{sandbox.id}")
    sandbox.call("GET", "/ping")
    requests_by_route = sandbox.double.stats()["requests"]
    assert requests_by_route["GET /sandboxes/{id}"] == 2
    assert requests_by_route["execd GET /ping"] == 1
