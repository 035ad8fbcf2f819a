"""The double's ``/v1/file/*``: shapes, FileOperationError, streaming upload/download."""

from __future__ import annotations

import base64
import email.message
import email.utils
import hashlib
import os
import socket
from typing import Any
from urllib.parse import quote

import pytest

from doubles.aio import AioDouble
from doubles.aio.rawclient import RawClient as Client


def _fail(client: Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(path, body)
    assert response.status_code == 200, response.text
    payload: dict[str, Any] = response.json()
    assert payload["success"] is False, payload
    return payload


def test_write_then_read_text_with_line_slices(client: Client, aio: AioDouble) -> None:
    data = client.ok("/v1/file/write", {"file": "/home/gem/t.txt", "content": "a\nb\nc\n"})
    assert data == {"file": "/home/gem/t.txt", "bytes_written": 6}
    assert aio.host_path("/home/gem/t.txt").read_bytes() == b"a\nb\nc\n"
    assert client.ok("/v1/file/read", {"file": "/home/gem/t.txt"})["content"] == "a\nb\nc\n"
    sliced = client.ok("/v1/file/read", {"file": "/home/gem/t.txt", "start_line": 1, "end_line": 2})
    assert sliced["content"] == "b\n"
    client.ok(
        "/v1/file/write",
        {
            "file": "/home/gem/t.txt",
            "content": "d",
            "append": True,
            "leading_newline": False,
            "trailing_newline": True,
        },
    )
    assert aio.host_path("/home/gem/t.txt").read_text() == "a\nb\nc\nd\n"


def test_base64_and_raw_encodings(client: Client, aio: AioDouble) -> None:
    blob = bytes(range(256))
    data = client.ok(
        "/v1/file/write",
        {
            "file": "/home/gem/b.bin",
            "content": base64.b64encode(blob).decode(),
            "encoding": "base64",
        },
    )
    assert data["bytes_written"] == 256
    assert aio.host_path("/home/gem/b.bin").read_bytes() == blob
    client.ok(
        "/v1/file/write", {"file": "/home/gem/r.bin", "content": "\xff\x00", "encoding": "raw"}
    )
    assert aio.host_path("/home/gem/r.bin").read_bytes() == b"\xff\x00"
    response = client.post(
        "/v1/file/write", {"file": "/home/gem/x", "content": "", "encoding": "utf-16"}
    )
    assert response.status_code == 422


def test_file_errors_are_http_200_with_file_operation_error(client: Client) -> None:
    payload = _fail(client, "/v1/file/read", {"file": "/home/gem/missing.txt"})
    error = payload["data"]
    assert error["error_type"] == "not_found"
    assert error["errno"] == 2
    assert error["errno_name"] == "ENOENT"
    assert error["operation"] == "read"
    assert error["retryable"] is False
    assert error["exception_type"] == "FileNotFoundError"
    assert payload["message"].startswith("Failed to read file: [Errno 2]")


def test_read_of_binary_is_decode_error(client: Client, aio: AioDouble) -> None:
    aio.host_path("/home/gem/bin.dat").write_bytes(b"\xff\xfe\x00")
    assert (
        _fail(client, "/v1/file/read", {"file": "/home/gem/bin.dat"})["data"]["error_type"]
        == "decode_error"
    )


def test_write_does_not_create_parents_and_needs_absolute_paths(client: Client) -> None:
    payload = _fail(client, "/v1/file/write", {"file": "/home/gem/no/such/dir/f", "content": "x"})
    assert payload["data"]["error_type"] == "not_found"
    assert (
        _fail(client, "/v1/file/read", {"file": "rel.txt"})["data"]["error_type"] == "invalid_path"
    )
    assert (
        _fail(client, "/v1/file/read", {"file": "/home/gem"})["data"]["error_type"]
        == "invalid_target"
    )


def test_commands_and_files_share_paths(client: Client) -> None:
    client.ok(
        "/v1/bash/exec",
        {"command": "mkdir -p /home/gem/shared && echo from-cmd > /home/gem/shared/c.txt"},
    )
    assert client.ok("/v1/file/read", {"file": "/home/gem/shared/c.txt"})["content"] == "from-cmd\n"
    client.ok("/v1/file/write", {"file": "/home/gem/shared/f.txt", "content": "from-api"})
    assert (
        client.ok("/v1/bash/exec", {"command": "cat /home/gem/shared/f.txt"})["stdout"]
        == "from-api"
    )
    assert not os.path.exists("/home/gem/shared")  # nothing leaks into the host's /home/gem


def test_upload_streams_and_download_round_trips(client: Client, aio: AioDouble) -> None:
    aio.reset_stats()
    blob = os.urandom(3 * 1024 * 1024 + 17)
    client.ok("/v1/bash/exec", {"command": "mkdir -p /home/gem/up"})
    response = client.http.post(
        aio.url + "/v1/file/upload",
        files={"file": ("big.bin", blob)},
        data={"path": "/home/gem/up/big.bin"},
        timeout=60,
    )
    payload = response.json()
    assert payload["success"] is True
    assert payload["data"] == {
        "file_path": "/home/gem/up/big.bin",
        "file_size": len(blob),
        "success": True,
    }
    assert aio.stats()["bytes_uploaded"] == len(blob)
    with client.get(
        "/v1/file/download", params={"path": "/home/gem/up/big.bin"}, stream=True
    ) as down:
        assert down.status_code == 200
        assert down.headers["Content-Type"] == "application/octet-stream"
        digest = hashlib.sha256()
        for chunk in down.iter_content(65536):
            digest.update(chunk)
    assert digest.hexdigest() == hashlib.sha256(blob).hexdigest()


def test_upload_into_directory_and_validation(client: Client, aio: AioDouble) -> None:
    response = client.http.post(
        aio.url + "/v1/file/upload",
        files={"file": ("n.txt", b"hi")},
        data={"path": "/home/gem"},
        timeout=30,
    )
    assert response.json()["data"]["file_path"] == "/home/gem/n.txt"
    missing = client.http.post(
        aio.url + "/v1/file/upload", data={"path": "/home/gem/x"}, timeout=30
    )
    assert missing.status_code == 422
    assert missing.json()["detail"][0]["loc"] == ["body", "file"]
    no_parent = client.http.post(
        aio.url + "/v1/file/upload",
        files={"file": ("n.txt", b"hi")},
        data={"path": "/home/gem/q/w.txt"},
        timeout=30,
    )
    assert no_parent.json()["success"] is False
    assert no_parent.json()["data"]["error_type"] == "not_found"


def _raw_download_head(aio: AioDouble, path: str) -> bytes:
    """The status line and headers of a download exactly as they arrived, bytes included."""
    with socket.create_connection(("127.0.0.1", aio.port), timeout=30) as sock:
        headers = "".join(f"{key}: {value}\r\n" for key, value in aio.headers.items())
        target = f"/v1/file/download?path={quote(path)}"
        sock.sendall(
            f"GET {target} HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\n\r\n".encode()
        )
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            assert chunk, answer
            answer += chunk
    return answer.split(b"\r\n\r\n", 1)[0]


@pytest.mark.parametrize(
    ("name", "plain"),
    [
        ("plain name.txt", True),
        ("ファイル.txt", False),
        ("café.txt", False),
        ("new\nline\r.txt", False),
        ('say "hi" \\ bye.txt', False),
        ("100%.txt", True),
    ],
)
def test_download_names_the_file_in_ascii_headers_the_rfc_6266_way(
    client: Client, aio: AioDouble, name: str, plain: bool
) -> None:
    """``send_header`` encodes Latin-1: the double dropped the connection on ``ファイル.txt`` and
    split its headers on a newline. Every header byte is printable ASCII now, ``filename`` an
    ASCII fallback and ``filename*`` (RFC 5987) the exact name."""
    aio.host_path("/home/gem/names").mkdir(exist_ok=True)
    aio.host_path(f"/home/gem/names/{name}").write_bytes(b"body")
    head = _raw_download_head(aio, f"/home/gem/names/{name}")
    status, *lines = head.split(b"\r\n")
    assert status == b"HTTP/1.1 200 OK"
    assert all(0x20 <= byte < 0x7F for line in lines for byte in line), head
    (disposition,) = [
        line.split(b":", 1)[1].strip()
        for line in lines
        if line.lower().startswith(b"content-disposition:")
    ]
    parsed = email.message.Message()
    parsed["Content-Disposition"] = disposition.decode("ascii")
    kind, *params = parsed.get_params(header="Content-Disposition") or []
    assert kind == ("attachment", "")
    fallbacks = [value for key, value in params if key == "filename" and isinstance(value, str)]
    extended = [value for key, value in params if key == "filename" and isinstance(value, tuple)]
    (fallback,) = fallbacks
    if plain:
        assert fallback == name
        assert not extended
    else:  # an ASCII stand-in, then the exact name (RFC 5987), which a client prefers
        assert fallback.isascii()
        assert len(fallback) == len(name)
        (exact,) = extended
        assert exact[0] == "UTF-8"
        assert email.utils.collapse_rfc2231_value(exact) == name


def test_download_errors(client: Client) -> None:
    missing = client.get("/v1/file/download", params={"path": "/home/gem/nothing"})
    assert missing.status_code == 404
    assert missing.json()["success"] is False
    assert client.get("/v1/file/download", params={"path": "/home/gem"}).status_code == 400
    assert client.get("/v1/file/download").status_code == 422
    bad = client.get("/v1/file/download", params={"path": "/home/gem/x", "change_policy": "maybe"})
    assert bad.status_code == 422


def test_list_find_search_replace_grep_glob(client: Client, aio: AioDouble) -> None:
    client.ok(
        "/v1/bash/exec",
        {
            "command": "mkdir -p /home/gem/tree/sub "
            "&& printf 'alpha\\nbeta\\n' > /home/gem/tree/a.py "
            "&& printf 'gamma alpha\\n' > /home/gem/tree/sub/b.txt && touch /home/gem/tree/.hidden"
        },
    )
    listing = client.ok("/v1/file/list", {"path": "/home/gem/tree"})
    assert [f["name"] for f in listing["files"]] == [".hidden", "a.py", "sub"]
    assert listing["directory_count"] == 1
    assert listing["file_count"] == 2
    assert listing["files"][1]["size"] == 11
    assert listing["files"][1]["extension"] == ".py"
    deep = client.ok(
        "/v1/file/list", {"path": "/home/gem/tree", "recursive": True, "show_hidden": False}
    )
    assert sorted(f["path"] for f in deep["files"]) == [
        "/home/gem/tree/a.py",
        "/home/gem/tree/sub",
        "/home/gem/tree/sub/b.txt",
    ]
    found = client.ok("/v1/file/find", {"path": "/home/gem/tree", "glob": "*.txt"})
    assert found["files"] == ["/home/gem/tree/sub/b.txt"]
    search = client.ok("/v1/file/search", {"file": "/home/gem/tree/a.py", "regex": "^b"})
    assert search["matches"] == ["beta"]
    replaced = client.ok(
        "/v1/file/replace", {"file": "/home/gem/tree/a.py", "old_str": "alpha", "new_str": "ALPHA"}
    )
    assert replaced["replaced_count"] == 1
    assert aio.host_path("/home/gem/tree/a.py").read_text() == "ALPHA\nbeta\n"
    grep = client.ok(
        "/v1/file/grep", {"path": "/home/gem/tree", "pattern": "alpha", "case_insensitive": True}
    )
    assert grep["match_count"] == 2
    assert {m["line_number"] for m in grep["matches"]} == {1}
    glob = client.ok("/v1/file/glob", {"path": "/home/gem/tree", "pattern": "**/*.txt"})
    assert [f["path"] for f in glob["files"]] == ["/home/gem/tree/sub/b.txt"]
    assert (
        _fail(client, "/v1/file/list", {"path": "/home/gem/nope"})["data"]["error_type"]
        == "not_found"
    )


def test_validation(client: Client, aio: AioDouble) -> None:
    response = client.post("/v1/file/write", {"file": "/home/gem/x"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "content"]
    not_json = client.http.post(
        aio.url + "/v1/file/read",
        data=b'{"file": "/home/gem/t.txt"}',
        headers={"Content-Type": "text/plain"},
        timeout=10,
    )
    assert not_json.status_code == 422
    broken = client.http.post(
        aio.url + "/v1/file/read",
        data=b"{",
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert broken.status_code == 422
    assert broken.json()["detail"][0]["type"] == "json_invalid"


def test_str_replace_editor(client: Client, aio: AioDouble) -> None:
    path = "/home/gem/ed.py"
    created = client.ok(
        "/v1/file/str_replace_editor",
        {"command": "create", "path": path, "file_text": "a = 1\nb = 1\n"},
    )
    assert created["prev_exist"] is False
    again = client.post(
        "/v1/file/str_replace_editor", {"command": "create", "path": path, "file_text": "x"}
    )
    assert again.status_code == 400
    assert "already exists" in again.json()["message"]
    ambiguous = client.post(
        "/v1/file/str_replace_editor",
        {"command": "str_replace", "path": path, "old_str": "= 1", "new_str": "= 2"},
    )
    assert "Multiple occurrences" in ambiguous.json()["message"]
    missing = client.post(
        "/v1/file/str_replace_editor",
        {"command": "str_replace", "path": path, "old_str": "zzz", "new_str": ""},
    )
    assert "did not appear" in missing.json()["message"]
    edited = client.ok(
        "/v1/file/str_replace_editor",
        {
            "command": "str_replace",
            "path": path,
            "old_str": "= 1",
            "new_str": "= 2",
            "replace_mode": "LAST",
        },
    )
    assert edited["new_content"] == "a = 1\nb = 2\n"
    client.ok(
        "/v1/file/str_replace_editor",
        {"command": "insert", "path": path, "insert_line": 0, "new_str": "# top"},
    )
    assert aio.host_path(path).read_text() == "# top\na = 1\nb = 2\n"
    view = client.ok(
        "/v1/file/str_replace_editor", {"command": "view", "path": path, "view_range": [2, 3]}
    )
    assert view["output"].endswith("     2\ta = 1\n     3\tb = 2")
    client.ok("/v1/file/str_replace_editor", {"command": "undo_edit", "path": path})
    assert aio.host_path(path).read_text() == "a = 1\nb = 2\n"
    gone = client.post("/v1/file/str_replace_editor", {"command": "view", "path": "/home/gem/none"})
    assert "does not exist" in gone.json()["message"]
    assert (
        client.post("/v1/file/str_replace_editor", {"command": "rm", "path": path}).status_code
        == 422
    )


def test_tmp_is_private_to_the_double(client: Client, aio: AioDouble) -> None:
    name = f"aio-private-{os.getpid()}-{id(aio)}"
    client.ok("/v1/bash/exec", {"command": f"echo t > /tmp/{name}"})
    assert client.ok("/v1/file/read", {"file": f"/tmp/{name}"})["content"] == "t\n"
    assert aio.host_path(f"/tmp/{name}").read_text() == "t\n"
    assert not os.path.exists(f"/tmp/{name}")


def test_legacy_file_errors() -> None:
    with AioDouble(auth="none", file_errors="legacy") as aio:
        client = Client(aio)
        missing = client.post("/v1/file/read", {"file": "/home/gem/none"})
        assert missing.status_code == 200
        assert missing.json()["success"] is False
        assert missing.json()["data"] is None
        aio.host_path("/home/gem/bin").write_bytes(b"\xff\xfe")
        binary = client.post("/v1/file/read", {"file": "/home/gem/bin"})
        assert binary.status_code == 500
        assert binary.text == "Internal Server Error"
        client.close()
