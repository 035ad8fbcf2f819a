"""The double's cross-cutting behaviour: auth modes, faults, stats, routing, /v1/sandbox."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import requests

from doubles._polling import process_gone, wait_until
from doubles.aio import AioDouble
from doubles.aio.rawclient import RawClient as Client


def test_bearer_auth(aio: AioDouble) -> None:
    url = aio.url + "/v1/sandbox"
    missing = requests.get(url, timeout=10)
    assert missing.status_code == 401
    assert missing.headers["Content-Type"].startswith("text/html")
    wrong = requests.get(url, headers={"Authorization": "Bearer nope"}, timeout=10)
    assert wrong.status_code == 401
    assert (
        requests.get(url, headers={"X-AIO-API-Key": aio.token or ""}, timeout=10).status_code == 401
    )
    assert requests.get(url, headers=aio.headers, timeout=10).status_code == 200
    assert aio.api_key is None
    assert aio.stats()["auth_failures"] >= 3


def test_api_key_auth() -> None:
    with AioDouble(auth="api_key") as aio:
        url = aio.url + "/v1/sandbox"
        assert aio.api_key is not None
        assert (
            requests.get(url, headers={"X-AIO-API-Key": aio.api_key}, timeout=10).status_code == 200
        )
        assert (
            requests.get(
                url, headers={"Authorization": f"Bearer {aio.api_key}"}, timeout=10
            ).status_code
            == 200
        )
        assert requests.get(url, params={"api_key": aio.api_key}, timeout=10).status_code == 200
        denied = requests.get(url, headers={"X-AIO-API-Key": "wrong"}, timeout=10)
        assert denied.status_code == 401
        assert denied.json()["success"] is False
        assert aio.api_key not in denied.text


def test_no_auth_mode() -> None:
    with AioDouble(auth="none") as aio:
        assert aio.token is None
        assert aio.headers == {}
        assert requests.get(aio.url + "/v1/sandbox", timeout=10).status_code == 200


def test_sandbox_context_is_flat(client: Client) -> None:
    body = client.get("/v1/sandbox").json()
    assert body["home_dir"] == "/home/gem"
    assert body["workspace"] == "/home/gem"
    assert body["detail"]["system"]["user"] == "gem"
    assert isinstance(body["version"], str)
    assert isinstance(body["data"], str)


def test_faults_then_recovery_and_stats(client: Client, aio: AioDouble) -> None:
    aio.reset_stats()
    aio.inject_fault("POST /v1/bash/exec", 503, count=2)
    first = client.post("/v1/bash/exec", {"command": "true"})
    assert first.status_code == 503
    assert "text/html" in first.headers["Content-Type"]
    assert client.post("/v1/bash/exec", {"command": "true"}).status_code == 503
    assert client.post("/v1/bash/exec", {"command": "true"}).status_code == 200
    aio.inject_fault("/v1/file/read", 502, body={"success": False, "message": "upstream"})
    assert client.post("/v1/file/read", {"file": "/x"}).json() == {
        "success": False,
        "message": "upstream",
    }
    stats = aio.stats()
    assert stats["requests"]["POST /v1/bash/exec"] == 3
    assert stats["statuses"]["503"] == 2
    assert stats["statuses"]["502"] == 1


def test_dropped_connection_fault(client: Client, aio: AioDouble) -> None:
    aio.inject_fault("POST /v1/shell/exec", 0)
    with pytest.raises(requests.ConnectionError):
        client.post("/v1/shell/exec", {"command": "true"})
    aio.inject_fault("/v1/sandbox", 503, count=5)
    aio.clear_faults()
    assert client.get("/v1/sandbox").status_code == 200


def test_unknown_route_and_method(client: Client) -> None:
    assert client.get("/v1/nothing").status_code == 404
    assert client.get("/v1/nothing").json() == {"detail": "Not Found"}
    assert client.get("/v1/bash/exec").status_code == 405


def test_chunked_request_bodies(client: Client, aio: AioDouble) -> None:
    boundary = "----aio-chunked"

    def body() -> Iterator[bytes]:
        yield (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="c.bin"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        for _ in range(20):
            yield b"\x00\xff" * 5000
        yield f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="path"\r\n\r\n'.encode()
        yield f"/home/gem/chunked.bin\r\n--{boundary}--\r\n".encode()

    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    response = client.http.post(
        aio.url + "/v1/file/upload", data=body(), headers=headers, timeout=30
    )
    assert response.json()["data"]["file_size"] == 200000
    assert aio.host_path("/home/gem/chunked.bin").read_bytes() == b"\x00\xff" * 100000
    json_parts = iter([b'{"file": "/home/gem/', b'chunked-missing"}'])
    read = client.http.post(
        aio.url + "/v1/file/read",
        data=json_parts,
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert read.json()["data"]["error_type"] == "not_found"


def test_stop_kills_background_processes_and_leaves_host_home_alone() -> None:
    with AioDouble(auth="none") as aio:
        client = Client(aio)
        data = client.ok("/v1/bash/exec", {"command": "setsid sleep 300 >/dev/null 2>&1 & echo $!"})
        host_pid = aio.host_pid(int(data["stdout"]))
        assert host_pid is not None
        assert not process_gone(host_pid)
        client.ok("/v1/file/write", {"file": "/home/gem/marker", "content": "x"})
        root = aio.root
        client.close()
    assert not os.path.exists("/home/gem/marker")
    assert not root.exists()
    assert wait_until(lambda: process_gone(host_pid), timeout=10)


def test_request_journal(client: Client, aio: AioDouble) -> None:
    aio.reset_stats()
    client.ok("/v1/bash/exec", {"command": "echo $K", "env": {"K": "v"}})
    client.get("/v1/file/download", params={"path": "/home/gem/none"})
    journal = aio.requests()
    assert [(e["method"], e["route"]) for e in journal] == [
        ("POST", "/v1/bash/exec"),
        ("GET", "/v1/file/download"),
    ]
    assert journal[0]["body"] == {"command": "echo $K", "env": {"K": "v"}}
    assert journal[0]["auth"] == "bearer"
    assert journal[1]["query"] == {"path": ["/home/gem/none"]}
    assert aio.token is not None
    assert aio.token not in str(journal)


def test_tool_level_failure_can_be_injected(client: Client, aio: AioDouble) -> None:
    aio.inject_fault(
        "POST /v1/file/write", 200, body={"success": False, "message": "disk", "data": None}
    )
    payload = client.post("/v1/file/write", {"file": "/home/gem/f", "content": "x"}).json()
    assert payload["success"] is False
    assert not aio.host_path("/home/gem/f").exists()


def test_server_log_is_readable(aio: AioDouble) -> None:
    assert "Traceback" not in aio.log_text()
