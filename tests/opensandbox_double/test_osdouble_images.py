"""Image profiles of the OpenSandbox double: a sandbox whose image lacks a program really lacks
it (a slim image without ``setsid``, say), whatever the host ships."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from doubles.opensandbox import OpenSandboxDouble
from doubles.opensandbox.rawclient import RawSandbox, create_raw


def _texts(events: list[dict[str, Any]], kind: str) -> list[str]:
    return [e["text"] for e in events if e["type"] == kind]


@pytest.fixture
def slim_image(opensandbox_double: OpenSandboxDouble) -> Iterator[str]:
    uri = f"slim-no-setsid-{uuid.uuid4().hex[:8]}:1"
    opensandbox_double.set_image_profile(uri, missing_tools=["setsid", "base64"])
    yield uri
    opensandbox_double.set_image_profile(uri, missing_tools=[])


@pytest.fixture
def slim(
    opensandbox_double: OpenSandboxDouble, http: requests.Session, slim_image: str
) -> Iterator[RawSandbox]:
    raw = create_raw(opensandbox_double, http, image={"uri": slim_image})
    yield raw
    raw.lifecycle("DELETE", f"/sandboxes/{raw.id}")


@pytest.mark.slow
def test_a_missing_program_is_not_found_on_any_path(slim: RawSandbox) -> None:
    events = slim.run({"command": "setsid true"})
    assert events[-1]["error"]["evalue"] == "127"
    assert _texts(events, "stderr") == ["bash: line 1: setsid: command not found"]
    probes = (
        "command -p -v setsid",
        "command -v setsid",
        "ls /bin/setsid",
        "ls /usr/bin/setsid",
        "command -v base64",
    )
    script = "; ".join(f"{probe} >/dev/null 2>&1; echo $?" for probe in probes)
    events = slim.run({"command": script})
    assert [int(code) != 0 for code in _texts(events, "stdout")] == [True] * len(probes)


@pytest.mark.slow
def test_the_other_programs_and_the_sandbox_files_are_untouched(slim: RawSandbox) -> None:
    events = slim.run(
        {"command": "command -p -v sleep && echo hi > /workspace/f && cat /workspace/f"}
    )
    assert events[-1]["type"] == "execution_complete"
    assert _texts(events, "stdout")[-1] == "hi"
    events = slim.run({"command": "ls /usr/bin | wc -l"})
    assert int(_texts(events, "stdout")[0]) > 10


@pytest.mark.slow
def test_session_runs_of_a_slim_sandbox_lack_it_too(slim: RawSandbox) -> None:
    created = slim.call("POST", "/session", json={})
    assert created.status_code == 200, created.text
    session = created.json()["session_id"]
    response = slim.call(
        "POST", f"/session/{session}/run", json={"command": "command -v setsid"}, stream=True
    )
    body = b"".join(response.iter_content(chunk_size=None)).decode()
    assert '"evalue": "1"' in body


@pytest.mark.slow
def test_other_images_keep_the_hosts_programs(
    opensandbox_double: OpenSandboxDouble, http: requests.Session, slim_image: str
) -> None:
    raw = create_raw(opensandbox_double, http)
    try:
        events = raw.run({"command": "command -p -v setsid"})
        assert events[-1]["type"] == "execution_complete"
    finally:
        raw.lifecycle("DELETE", f"/sandboxes/{raw.id}")


def test_a_bad_program_name_is_refused(opensandbox_double: OpenSandboxDouble) -> None:
    with pytest.raises(RuntimeError, match="400"):
        opensandbox_double.set_image_profile("x:1", missing_tools=["../etc/passwd"])
