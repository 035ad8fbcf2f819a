"""The Docker runtime's file operations against a command that swaps a directory of the workspace
for a symbolic link while they run (docs/security.md, "the Docker runtime").

In each test a command of the conversation loops, as fast as busybox's shell goes, making
``race/d`` the real directory ``race/real`` and then a link to a directory outside the workspace
(in turn ``/opt/x``, root's and not writable by the container's user; ``/opt/secret``, root's and
closed to the user; ``/tmp/out``, the user's own), while the client runs one file operation
again and again on a path below ``race/d``. Whatever each operation answers (a result or a typed
error), nothing may land in or come from those directories: no file written, created or removed
there, no byte or listing of theirs returned. The racer counts its swaps, so a test that did not
race fails instead of passing.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import docker_fixtures
from docker_fixtures import IMAGE, suite_labels
from skillruntime.core.errors import SkillRuntimeError
from skillruntime.core.files.search import GrepQuery
from skillruntime.core.models import SkillExecutionRequest, SkillPreparationRequest
from skillruntime.core.skills import load_skill
from skillruntime.docker import DockerSkillRuntime

pytestmark = pytest.mark.slow

docker_run = docker_fixtures.docker_run
_RACE_SECONDS = 6.0
_INSIDE = "inside\n"

_ROOT_SETUP = (
    "mkdir -p /opt/x /opt/secret && chmod 755 /opt/x && chmod 700 /opt/secret"
    " && echo ROOTDIR-CONTENT > /opt/x/s && echo rootdir > /opt/x/victim"
    " && echo TOPSECRET > /opt/secret/s && chmod 600 /opt/secret/s"
)
_USER_SETUP = (
    "mkdir -p race/real /tmp/out && printf 'inside\\n' > race/real/s && : > race/real/victim"
    " && echo OUTSIDE-CONTENT > /tmp/out/s && : > /tmp/out/victim && : > /tmp/out/marker"
)
_RACER = """
cd "$1" || exit 1
n=0
while [ ! -e "$1/stop" ]; do
  for t in /opt/x /opt/secret /tmp/out; do
    rm -f d; mv -T real d; mv -T d real; ln -s "$t" d
  done
  n=$((n + 1)); echo "$n" > "$1/../swaps"
done
""".strip()
_OUTSIDE = (
    "ls -A /opt/x | sort | tr '\\n' ' '; echo '|'; ls -A /tmp/out | sort | tr '\\n' ' ';"
    " echo '|'; cat /opt/x/s /tmp/out/s"
)
_CLEAN = "s victim |\nmarker s victim |\nROOTDIR-CONTENT\nOUTSIDE-CONTENT\n"


def _as_root(runtime: DockerSkillRuntime, script: str) -> str:
    """``script`` run as root in the runtime's container (set-up only: the runtime never does)."""
    api = runtime.engine.api
    container = runtime.container_id
    exec_id = api.exec_create(container, ["/bin/sh", "-c", script], user="0")["Id"]
    # The engine client's own stream: the SDK's exec_start can lose output the engine sends
    # together with the response headers (a command that prints and exits at once).
    stream = runtime.engine.exec_stream(exec_id)
    try:
        output = b"".join(out for out, _ in stream if out)
    finally:
        stream.close()
    assert api.exec_inspect(exec_id)["ExitCode"] == 0, output
    return output.decode()


def _run(runtime: DockerSkillRuntime, command: str, **extra: Any) -> Any:
    return runtime.execute(SkillExecutionRequest(command=command, **extra))


@contextlib.contextmanager
def _racing(runtime: DockerSkillRuntime, directory: str) -> Iterator[Callable[[], int]]:
    """The racer running on ``<workspace>/<directory>`` for the block; yields the swap count."""
    base = f"{runtime.default_working_directory}/{directory}"
    done = threading.Event()

    def race() -> None:
        try:
            _run(runtime, f"sh -c '{_RACER}' racer {base}", timeout_seconds=120)
        finally:
            done.set()

    thread = threading.Thread(target=race, daemon=True)
    thread.start()

    def swaps() -> int:
        text = _run(runtime, f"cat {base}/../swaps 2>/dev/null || echo 0").stdout.strip()
        return int(text or "0")

    deadline = time.monotonic() + 30
    while swaps() == 0:
        assert time.monotonic() < deadline, "the racer never started"
    try:
        yield swaps
    finally:
        _run(runtime, f"touch {base}/stop")
        assert done.wait(60)
        thread.join(5)


@pytest.fixture
def racing_runtime(docker_run: str) -> Iterator[DockerSkillRuntime]:
    runtime = DockerSkillRuntime(
        image=IMAGE, labels=suite_labels(docker_run), conversation_id=f"race-{docker_run}"
    )
    try:
        _run(runtime, _USER_SETUP)
        _as_root(runtime, _ROOT_SETUP)
        yield runtime
    finally:
        with contextlib.suppress(SkillRuntimeError):
            runtime.destroy_conversation()
        runtime.close()


def _repeat(operation: Callable[[int], object]) -> tuple[list[object], int]:
    """``operation(i)`` again and again for the race's time: its results and its errors."""
    results: list[object] = []
    errors = 0
    deadline = time.monotonic() + _RACE_SECONDS
    index = 0
    while time.monotonic() < deadline:
        index += 1
        try:
            results.append(operation(index))
        except SkillRuntimeError:
            errors += 1
    return results, errors


def _assert_outside_untouched(runtime: DockerSkillRuntime) -> None:
    assert _as_root(runtime, _OUTSIDE) == _CLEAN


def test_racing_writes_never_land_outside_the_workspace(
    racing_runtime: DockerSkillRuntime,
) -> None:
    fs = racing_runtime.get_file_system()
    with _racing(racing_runtime, "race") as swaps:
        results, _ = _repeat(lambda i: fs.write_text(f"race/d/w{i}", "written\n"))
        assert swaps() > 0
    assert results, "no write succeeded while racing"
    _assert_outside_untouched(racing_runtime)


def test_racing_uploads_and_directories_never_land_outside_the_workspace(
    racing_runtime: DockerSkillRuntime, tmp_path: Path
) -> None:
    fs = racing_runtime.get_file_system()
    local = tmp_path / "up.txt"
    local.write_text("uploaded\n")

    def operation(index: int) -> object:
        if index % 2:
            return fs.upload(local, f"race/d/u{index}")
        fs.make_directory(f"race/d/m{index}/n")
        return True

    with _racing(racing_runtime, "race") as swaps:
        results, _ = _repeat(operation)
        assert swaps() > 0
    assert results, "no operation succeeded while racing"
    _assert_outside_untouched(racing_runtime)


def test_racing_reads_and_downloads_return_only_the_workspace_file(
    racing_runtime: DockerSkillRuntime, tmp_path: Path
) -> None:
    fs = racing_runtime.get_file_system()

    def operation(index: int) -> object:
        if index % 2:
            return fs.read_text("race/d/s")
        target = tmp_path / f"dl{index}"
        fs.download("race/d/s", target)
        return target.read_text()

    with _racing(racing_runtime, "race") as swaps:
        results, _ = _repeat(operation)
        assert swaps() > 0
    assert results, "no read succeeded while racing"
    assert set(results) == {_INSIDE}


def test_racing_stats_listings_and_searches_show_only_the_workspace(
    racing_runtime: DockerSkillRuntime,
) -> None:
    fs = racing_runtime.get_file_system()
    base = f"{racing_runtime.default_working_directory}/race/d"

    def operation(index: int) -> object:
        if index % 3 == 0:
            found = fs.stat("race/d/s")
            return None if found is None else ("stat", found.size)
        if index % 3 == 1:
            listed = fs.list_directory("race/d")
            return ("list", tuple(sorted(item.path.removeprefix(base + "/") for item in listed)))
        root = fs.stat("race/d")
        if root is None or not root.is_directory:
            return None
        query = GrepQuery(pattern="CONTENT|SECRET|inside", output_mode="content")
        hits = fs.grep(root, query)
        return ("grep", tuple(sorted(entry.rsplit(":", 1)[-1] for entry in hits.entries)))

    with _racing(racing_runtime, "race") as swaps:
        results, _ = _repeat(operation)
        assert swaps() > 0
    seen = {result for result in results if result is not None}
    assert seen, "no stat, listing or search succeeded while racing"
    allowed = {
        ("stat", len(_INSIDE)),
        ("list", ("s", "victim")),
        ("list", (base,)),  # the link itself, listed as one entry
        ("grep", ("inside",)),
        ("grep", ()),  # the root was no directory any more when the search ran
    }
    assert seen <= allowed


def test_racing_deletes_never_remove_outside_the_workspace(
    racing_runtime: DockerSkillRuntime,
) -> None:
    fs = racing_runtime.get_file_system()

    def operation(index: int) -> object:
        fs.delete("race/d/victim")
        fs.write_text("race/d/victim", "")  # back for the next delete, when inside
        return True

    with _racing(racing_runtime, "race") as swaps:
        results, _ = _repeat(operation)
        assert swaps() > 0
    assert results, "no delete succeeded while racing"
    _assert_outside_untouched(racing_runtime)


def test_racing_skill_uploads_never_land_outside_the_workspace(
    racing_runtime: DockerSkillRuntime, tmp_path: Path
) -> None:
    runtime = racing_runtime
    _run(runtime, "rm -rf skills && mkdir -p skill-race/real && ln -s skill-race/real skills")
    fs = runtime.get_file_system()

    def operation(index: int) -> object:
        source = tmp_path / f"s{index}"
        (source / "bin").mkdir(parents=True)
        (source / "SKILL.md").write_text(f"---\nname: s{index}\ndescription: race\n---\nbody\n")
        (source / "bin" / "tool.sh").write_text(f"echo {index}\n")
        (prepared,) = runtime.prepare(SkillPreparationRequest(skills=(load_skill(source),)))
        return fs.exists(f"{prepared.base_path}/bin/tool.sh")

    # The racer swaps skill-race/d; "skills" is made a link to it, so the copy's way runs
    # through the swapped directory.
    _run(runtime, "rm -f skills && ln -s skill-race/d skills")
    with _racing(runtime, "skill-race") as swaps:
        _repeat(operation)
        assert swaps() > 0
    _assert_outside_untouched(runtime)


def test_racing_grouped_uploads_never_land_outside_the_workspace(
    racing_runtime: DockerSkillRuntime, tmp_path: Path
) -> None:
    """``upload_files`` of several files into one directory moves them as a group (one ``mv``
    into the directory the pinned walk reached): names that exist outside (``s``, ``victim``)
    are never written there."""
    fs = racing_runtime.get_file_system()
    base = racing_runtime.default_working_directory
    local = tmp_path / "up.txt"
    local.write_text("uploaded\n")

    def operation(index: int) -> object:
        names = ["s", "victim", "marker", f"g{index}a", f"g{index}b"]
        return fs.upload_files((local, f"{base}/race/d/{name}", False) for name in names)

    with _racing(racing_runtime, "race") as swaps:
        results, _ = _repeat(operation)
        assert swaps() > 0
    assert results, "no upload succeeded while racing"
    _assert_outside_untouched(racing_runtime)
