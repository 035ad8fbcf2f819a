"""execd file API of the OpenSandbox double over raw HTTP."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from typing import Any

import pytest

from doubles.opensandbox.rawclient import RawSandbox
from skillruntime.core.testing import immutable_host_directory

BOUNDARY = "testboundary1234"


def _multipart(entries: list[tuple[dict[str, Any] | None, bytes | None]]) -> Iterator[bytes]:
    """A chunked multipart body: each entry yields an optional metadata and file part."""
    for meta, data in entries:
        if meta is not None:
            yield (
                f"--{BOUNDARY}\r\n"
                'Content-Disposition: form-data; name="metadata"; filename="metadata"\r\n'
                "Content-Type: application/json\r\n\r\n"
            ).encode()
            yield json.dumps(meta).encode() + b"\r\n"
        if data is not None:
            yield (
                f"--{BOUNDARY}\r\n"
                'Content-Disposition: form-data; name="file"; filename="f"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            for start in range(0, len(data), 7000):
                yield data[start : start + 7000]
            yield b"\r\n"
    yield f"--{BOUNDARY}--\r\n".encode()


def _upload(sandbox: RawSandbox, entries: list[tuple[dict[str, Any] | None, bytes | None]]) -> Any:
    return sandbox.call(
        "POST",
        "/files/upload",
        data=_multipart(entries),
        headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
    )


def test_chunked_upload_with_decimal_digit_modes(sandbox: RawSandbox) -> None:
    payload = os.urandom(100_000) + b"\r\n--" + BOUNDARY.encode()[:-1]
    before = sandbox.double.stats()
    response = _upload(
        sandbox,
        [
            (
                {"path": "/workspace/a/b/data.bin", "owner": None, "group": None, "mode": 644},
                payload,
            ),
            ({"path": "/workspace/run.sh", "mode": 755}, b"#!/bin/sh\necho ran\n"),
        ],
    )
    assert response.status_code == 200, response.text
    root = sandbox.double.workspace_of(sandbox.id)
    assert (root / "a/b/data.bin").read_bytes() == payload
    assert stat.S_IMODE((root / "a/b/data.bin").stat().st_mode) == 0o644
    assert stat.S_IMODE((root / "run.sh").stat().st_mode) == 0o755
    after = sandbox.double.stats()
    assert after["upload_requests"] == before["upload_requests"] + 1
    assert after["uploaded_files"] == before["uploaded_files"] + 2
    info = sandbox.call(
        "GET", "/files/info", params={"path": ["/workspace/run.sh", "/workspace/a/b/data.bin"]}
    ).json()
    assert info["/workspace/run.sh"]["mode"] == 755
    assert info["/workspace/a/b/data.bin"]["mode"] == 644
    assert info["/workspace/a/b/data.bin"]["size"] == len(payload)
    assert info["/workspace/a/b/data.bin"]["type"] == "file"
    assert info["/workspace/run.sh"]["owner"] == "root"
    ran = sandbox.run({"command": "/workspace/run.sh"})
    assert [e["text"] for e in ran if e["type"] == "stdout"] == ["ran"]


def test_upload_with_content_length_body(sandbox: RawSandbox) -> None:
    files = [
        (
            "metadata",
            (
                "metadata",
                json.dumps({"path": "/workspace/cl.txt", "mode": 600}),
                "application/json",
            ),
        ),
        ("file", ("cl.txt", b"content-length body", "application/octet-stream")),
    ]
    response = sandbox.call("POST", "/files/upload", files=files)
    assert response.status_code == 200, response.text
    got = sandbox.call("GET", "/files/download", params={"path": "/workspace/cl.txt"})
    assert got.content == b"content-length body"
    assert (
        stat.S_IMODE((sandbox.double.workspace_of(sandbox.id) / "cl.txt").stat().st_mode) == 0o600
    )


@pytest.mark.parametrize(
    "entries",
    [
        [({"path": "/workspace/x", "mode": 644}, None)],
        [(None, b"data")],
        [({"path": "/workspace/x", "mode": 644}, b"1"), ({"path": "/workspace/y"}, None)],
        [({"mode": 644}, b"data")],
        [({"path": "/workspace/x", "mode": 648}, b"data")],
    ],
)
def test_upload_rejections_write_nothing(
    sandbox: RawSandbox, entries: list[tuple[dict[str, Any] | None, bytes | None]]
) -> None:
    response = _upload(sandbox, entries)
    assert response.status_code == 400, response.text
    assert response.json()["code"] in ("INVALID_FILE", "INVALID_FILE_METADATA")
    assert not (sandbox.double.workspace_of(sandbox.id) / "x").exists()


def test_upload_outside_workspace_and_tmp_is_refused(sandbox: RawSandbox) -> None:
    response = _upload(sandbox, [({"path": "/etc/opensandbox-double-test", "mode": 644}, b"x")])
    assert response.status_code == 500
    assert response.json()["code"] == "RUNTIME_ERROR"
    assert not os.path.exists("/etc/opensandbox-double-test")


def test_download_range_and_lines(sandbox: RawSandbox) -> None:
    _upload(sandbox, [({"path": "/workspace/t.txt", "mode": 644}, b"l1\nl2\nl3\nl4\n")])
    full = sandbox.call("GET", "/files/download", params={"path": "/workspace/t.txt"})
    assert full.status_code == 200
    assert full.content == b"l1\nl2\nl3\nl4\n"
    part = sandbox.call(
        "GET",
        "/files/download",
        params={"path": "/workspace/t.txt"},
        headers={"Range": "bytes=3-7"},
    )
    assert part.status_code == 206
    assert part.content == b"l2\nl3"
    assert part.headers["Content-Range"] == "bytes 3-7/12"
    suffix = sandbox.call(
        "GET", "/files/download", params={"path": "/workspace/t.txt"}, headers={"Range": "bytes=-3"}
    )
    assert suffix.content == b"l4\n"
    bad = sandbox.call(
        "GET",
        "/files/download",
        params={"path": "/workspace/t.txt"},
        headers={"Range": "bytes=50-"},
    )
    assert bad.status_code == 416
    lines = sandbox.call(
        "GET", "/files/download", params={"path": "/workspace/t.txt", "offset": 2, "limit": 2}
    )
    assert lines.content == b"l2\nl3"


def test_missing_paths_are_404_file_not_found(sandbox: RawSandbox) -> None:
    for path, params in (
        ("/files/download", {"path": "/workspace/none"}),
        ("/files/info", {"path": "/workspace/none"}),
        ("/directories/list", {"path": "/workspace/none"}),
        ("/files/search", {"path": "/workspace/none", "pattern": "*"}),
    ):
        response = sandbox.call("GET", path, params=params)
        assert response.status_code == 404, path
        assert response.json()["code"] == "FILE_NOT_FOUND"
        assert "/workspace/none" in response.json()["message"]


def test_directories_list_search_and_delete(sandbox: RawSandbox) -> None:
    made = sandbox.call("POST", "/directories", json={"/workspace/d/e": {"mode": 700}})
    assert made.status_code == 200
    root = sandbox.double.workspace_of(sandbox.id)
    assert stat.S_IMODE((root / "d/e").stat().st_mode) == 0o700
    _upload(
        sandbox,
        [
            ({"path": "/workspace/d/one.py", "mode": 644}, b"1"),
            ({"path": "/workspace/d/e/two.py", "mode": 644}, b"2"),
            ({"path": "/workspace/d/e/three.txt", "mode": 644}, b"3"),
        ],
    )
    shallow = sandbox.call("GET", "/directories/list", params={"path": "/workspace/d"}).json()
    assert sorted(e["path"] for e in shallow) == ["/workspace/d/e", "/workspace/d/one.py"]
    deep = sandbox.call("GET", "/directories/list", params={"path": "/workspace/d", "depth": 2})
    assert len(deep.json()) == 4
    found = sandbox.call("GET", "/files/search", params={"path": "/workspace", "pattern": "*.py"})
    assert sorted(e["path"] for e in found.json()) == [
        "/workspace/d/e/two.py",
        "/workspace/d/one.py",
    ]
    not_basename = sandbox.call(
        "GET", "/files/search", params={"path": "/workspace", "pattern": "d/*.py"}
    )
    assert not_basename.json() == []

    assert (
        sandbox.call("DELETE", "/files", params={"path": "/workspace/d/missing"}).status_code == 200
    )
    as_file = sandbox.call("DELETE", "/files", params={"path": "/workspace/d/e"})
    assert as_file.status_code == 500
    assert (
        sandbox.call("DELETE", "/files", params={"path": "/workspace/d/one.py"}).status_code == 200
    )
    assert not (root / "d/one.py").exists()
    assert (
        sandbox.call("DELETE", "/directories", params={"path": "/workspace/d"}).status_code == 200
    )
    assert not (root / "d").exists()


def test_move_permissions_and_replace(sandbox: RawSandbox) -> None:
    _upload(
        sandbox,
        [
            ({"path": "/workspace/m1", "mode": 644}, b"hello world hello"),
            ({"path": "/workspace/m2", "mode": 644}, b"x"),
        ],
    )
    clash = sandbox.call(
        "POST", "/files/mv", json=[{"src": "/workspace/m1", "dest": "/workspace/m2"}]
    )
    assert clash.status_code == 500
    missing = sandbox.call(
        "POST", "/files/mv", json=[{"src": "/workspace/no", "dest": "/workspace/n"}]
    )
    assert missing.status_code == 404
    moved = sandbox.call(
        "POST", "/files/mv", json=[{"src": "/workspace/m1", "dest": "/workspace/sub/m3"}]
    )
    assert moved.status_code == 200
    root = sandbox.double.workspace_of(sandbox.id)
    assert (root / "sub/m3").read_bytes() == b"hello world hello"
    chmod = sandbox.call("POST", "/files/permissions", json={"/workspace/sub/m3": {"mode": 600}})
    assert chmod.status_code == 200
    assert stat.S_IMODE((root / "sub/m3").stat().st_mode) == 0o600
    replaced = sandbox.call(
        "POST",
        "/files/replace",
        params={"verbose": "true"},
        json={"/workspace/sub/m3": {"old": "hello", "new": "bye"}},
    )
    assert replaced.json() == {"/workspace/sub/m3": {"replacedCount": 2}}
    assert (root / "sub/m3").read_bytes() == b"bye world bye"


def test_path_expansion_and_host_reads(sandbox: RawSandbox) -> None:
    _upload(sandbox, [({"path": "/workspace/e.txt", "mode": 644}, b"e")])
    undefined = sandbox.call("GET", "/files/download", params={"path": "/workspace/$NOPE/e.txt"})
    assert undefined.status_code == 400
    via_tilde = sandbox.call("GET", "/files/info", params={"path": "~"}).json()
    assert via_tilde["~"]["path"] == "/root"
    relative = sandbox.call("GET", "/files/info", params={"path": "workspace/e.txt"})
    assert relative.json()["workspace/e.txt"]["path"] == "/workspace/e.txt"
    host = sandbox.call("GET", "/files/info", params={"path": "/etc/passwd"})
    assert host.status_code == 200
    refused = sandbox.call("DELETE", "/files", params={"path": "/etc/passwd"})
    assert refused.status_code == 500
    assert os.path.exists("/etc/passwd")


def test_system_call_failures_answer_with_gos_error_text(sandbox: RawSandbox) -> None:
    """execd reports a failed system call as 500 ``RUNTIME_ERROR`` with Go's errno text; only
    ENOENT is a 404 (``os.IsNotExist``)."""
    assert _upload(sandbox, [({"path": "/workspace/plain.txt", "mode": 644}, b"p")]).ok
    below = _upload(sandbox, [({"path": "/workspace/plain.txt/inner.txt", "mode": 644}, b"x")])
    assert below.status_code == 500
    assert below.json() == {
        "code": "RUNTIME_ERROR",
        "message": "error creating target directory /workspace/plain.txt. "
        "mkdir /workspace/plain.txt: not a directory",
    }
    for route, params in (
        ("/files/info", {"path": "/workspace/plain.txt/inner.txt"}),
        ("/files/download", {"path": "/workspace/plain.txt/inner.txt"}),
    ):
        answer = sandbox.call("GET", route, params=params)
        assert answer.status_code == 500, route
        assert answer.json()["code"] == "RUNTIME_ERROR"
        assert answer.json()["message"].endswith("/workspace/plain.txt/inner.txt: not a directory")
    mkdir = sandbox.call("POST", "/directories", json={"/workspace/plain.txt": {"mode": 755}})
    assert mkdir.status_code == 500
    assert mkdir.json()["message"].endswith("not a directory")


def test_an_immutable_directory_refuses_root_with_operation_not_permitted(
    sandbox: RawSandbox,
) -> None:
    assert _upload(sandbox, [({"path": "/workspace/locked/kept.txt", "mode": 644}, b"k")]).ok
    undo = immutable_host_directory(sandbox.double.workspace_of(sandbox.id) / "locked")
    try:
        created = _upload(sandbox, [({"path": "/workspace/locked/new.txt", "mode": 644}, b"n")])
        assert created.status_code == 500
        assert created.json() == {
            "code": "RUNTIME_ERROR",
            "message": "error opening destination file /workspace/locked/new.txt. "
            "open /workspace/locked/new.txt: operation not permitted",
        }
        removed = sandbox.call("DELETE", "/files", params={"path": "/workspace/locked/kept.txt"})
        assert removed.status_code == 500
        assert removed.json()["message"].endswith(": operation not permitted")
        made = sandbox.call("POST", "/directories", json={"/workspace/locked/sub": {"mode": 755}})
        assert made.status_code == 500
        assert made.json()["message"] == (
            "error accessing file: mkdir /workspace/locked/sub: operation not permitted"
        )
        kept = sandbox.call("GET", "/files/download", params={"path": "/workspace/locked/kept.txt"})
        assert kept.content == b"k"
    finally:
        undo()
