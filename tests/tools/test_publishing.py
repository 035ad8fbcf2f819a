"""FilePublisher SPI, LocalDirectoryPublisher and the ``publish_file`` tool."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote, urlparse

import pytest

from skillruntime.core.files.publishing import (
    FilePublisher,
    LocalDirectoryPublisher,
    PublishedFile,
    safe_file_name,
)
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.tools import SkillTools


def test_local_publisher_returns_file_url_with_the_content(tmp_path: Path) -> None:
    publisher = LocalDirectoryPublisher(tmp_path / "out")
    first = publisher.publish("report.html", io.BytesIO(b"<p>1</p>"))
    second = publisher.publish("report.html", io.BytesIO(b"<p>2</p>"))
    assert first.url != second.url
    assert first.expires_at is None
    path = Path(unquote(urlparse(first.url).path))
    assert first.url.startswith("file://")
    assert path.read_bytes() == b"<p>1</p>"
    assert path.name == "report.html"
    assert path.parent.parent == tmp_path / "out"
    assert not list(path.parent.glob("*.part"))


def test_local_publisher_base_url_and_name_sanitising(tmp_path: Path) -> None:
    publisher = LocalDirectoryPublisher(tmp_path, base_url="https://files.example/p/")
    result = publisher.publish("../../etc/my report.md", io.BytesIO(b"x"))
    assert result.url.startswith("https://files.example/p/")
    assert result.url.endswith("/my%20report.md")
    token = result.url.split("/")[-2]
    assert (tmp_path / token / "my report.md").read_bytes() == b"x"
    with pytest.raises(ValueError, match="Unable to determine a file name"):
        publisher.publish("..", io.BytesIO(b"x"))
    assert safe_file_name("a\\b\\c.txt") == "c.txt"


class RecordingPublisher(FilePublisher):
    def __init__(self, *, read: bool = True) -> None:
        self.calls: list[tuple[str, bytes, str | None]] = []
        self.read = read

    def publish(
        self, name: str, stream: BinaryIO, *, content_type: str | None = None
    ) -> PublishedFile:
        data = stream.read() if self.read else stream.read(3)
        self.calls.append((name, data, content_type))
        return PublishedFile(
            url=f"https://cdn.example/{name}",
            expires_at=datetime(2030, 1, 1, tzinfo=UTC),
        )


def test_publish_file_streams_runtime_bytes(runtime: SkillRuntime) -> None:
    publisher = RecordingPublisher()
    tools = SkillTools(runtime, publisher=publisher)
    path = runtime.default_working_directory + "/out/data.bin"
    payload = bytes(range(256)) * 1000
    runtime.get_file_system().write_bytes(path, payload)
    result = tools.dispatch("publish_file", {"file_path": "out/data.bin", "file_name": "x/r.csv"})
    assert publisher.calls == [("r.csv", payload, "text/csv")]
    assert result == (
        "File published successfully.\nURL: https://cdn.example/r.csv\nFile name: r.csv\n"
        f"Content type: text/csv\nSize: {len(payload)} bytes\n"
        "Expires at: 2030-01-01T00:00:00+00:00"
    )


def test_publish_file_content_type_fallbacks(runtime: SkillRuntime) -> None:
    publisher = RecordingPublisher()
    tools = SkillTools(runtime, publisher=publisher)
    path = runtime.default_working_directory + "/blob"
    runtime.get_file_system().write_bytes(path, b"abc")
    tools.dispatch("publish_file", {"file_path": path})
    tools.dispatch("publish_file", {"file_path": path, "content_type": " text/x-custom "})
    assert [call[2] for call in publisher.calls] == ["application/octet-stream", "text/x-custom"]


def test_publish_file_errors(runtime: SkillRuntime, tmp_path: Path) -> None:
    tools = SkillTools(runtime, publisher=RecordingPublisher())
    base = runtime.default_working_directory
    runtime.get_file_system().make_directory(base + "/dir")
    assert tools.dispatch("publish_file", {"file_path": base + "/none"}) == (
        f"Error: File does not exist in {runtime.name} runtime: {base}/none"
    )
    assert tools.dispatch("publish_file", {"file_path": base + "/dir"}) == (
        f"Error: Only regular files can be published: {base}/dir"
    )


def test_publisher_that_does_not_consume_the_stream_is_an_error(runtime: SkillRuntime) -> None:
    tools = SkillTools(runtime, publisher=RecordingPublisher(read=False))
    path = runtime.default_working_directory + "/f.txt"
    runtime.get_file_system().write_text(path, "0123456789")
    result = tools.dispatch("publish_file", {"file_path": path})
    assert result == (
        f"Error: the file publisher returned before reading all of {path}; "
        "the file was not delivered"
    )


def test_publisher_exception_is_an_error_string(runtime: SkillRuntime) -> None:
    class Failing(FilePublisher):
        def publish(
            self, name: str, stream: BinaryIO, *, content_type: str | None = None
        ) -> PublishedFile:
            raise OSError("bucket unavailable")

    tools = SkillTools(runtime, publisher=Failing())
    path = runtime.default_working_directory + "/f.txt"
    runtime.get_file_system().write_text(path, "x")
    assert tools.dispatch("publish_file", {"file_path": path}) == (
        f"Error: publishing the file from the {runtime.name} runtime failed: bucket unavailable"
    )


def test_publish_to_local_directory_end_to_end(runtime: SkillRuntime, tmp_path: Path) -> None:
    tools = SkillTools(runtime, publisher=LocalDirectoryPublisher(tmp_path / "published"))
    path = runtime.default_working_directory + "/report.md"
    runtime.get_file_system().write_text(path, "# Report\n")
    result = tools.dispatch("publish_file", {"file_path": path})
    url = next(line[5:] for line in result.splitlines() if line.startswith("URL: "))
    assert Path(unquote(urlparse(url).path)).read_text() == "# Report\n"
    assert "Content type: text/markdown" in result
    assert "Expires at" not in result
