"""``skillruntime conversations sweep`` runs only the reapers it needs and fails in one line.

An installed backend nobody uses (an OpenSandbox server that is not configured) must not cost a
sweep its retries: without ``--runtime`` only the reapers of runtimes the store has conversations
of are built. A reaper that fails is reported as one log line, never a traceback.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillruntime.core.cli import build_cli
from skillruntime.core.conversations import ConversationRecord, open_conversation_store
from skillruntime.core.conversations.sweeps import OrphanSandbox
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.plugins.registry import ConversationReaperProvider
from skillruntime.local import LocalSkillRuntime


@dataclass
class CountingReaper:
    """A reaper that records what it was asked; ``fail`` makes its orphan listing raise."""

    runtime: str
    fail: bool = False
    orphan_calls: list[int] = field(default_factory=list)

    def destroy(self, record: ConversationRecord) -> None:
        """Nothing to destroy."""

    def orphans(self, records: Sequence[ConversationRecord]) -> list[OrphanSandbox]:
        self.orphan_calls.append(len(records))
        if self.fail:
            raise RuntimeError("server unreachable")
        return []

    def destroy_orphan(self, orphan: OrphanSandbox) -> None:
        """Nothing to destroy."""


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[CountingReaper]]:
    """The reapers the sweep builds, by runtime: a ``local`` one and an ``opensandbox`` one."""
    made: dict[str, list[CountingReaper]] = {"local": [], "opensandbox": []}

    def provider(runtime: str) -> ConversationReaperProvider:
        def factory() -> CountingReaper:
            reaper = CountingReaper(runtime, fail=runtime == "opensandbox")
            made[runtime].append(reaper)
            return reaper

        return ConversationReaperProvider(runtime=runtime, description="", factory=factory)

    monkeypatch.setattr(
        "skillruntime.core.plugins.registry.available_conversation_reapers",
        lambda: {name: provider(name) for name in made},
    )
    return made


def _sweep(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        build_cli(), ["conversations", "sweep", "--idle", "7d", "--dry-run", "--url", url, *args]
    )
    return result.exit_code, result.stdout, result.stderr


def test_an_empty_store_runs_no_reaper(
    built: dict[str, list[CountingReaper]], tmp_path: Path
) -> None:
    code, out, err = _sweep(f"sqlite:///{tmp_path / 'x.db'}")

    assert code == 0, err
    assert built == {"local": [], "opensandbox": []}
    assert out.startswith("found 0, kept 0, destroyed 0, failed 0 (dry run")
    assert err == ""


def test_only_the_reapers_of_recorded_runtimes_run(
    built: dict[str, list[CountingReaper]], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with (
        open_conversation_store(url) as store,
        LocalSkillRuntime(
            conversation_id="c1", conversations_root=tmp_path / "convs", conversation_store=store
        ) as runtime,
    ):
        runtime.execute(SkillExecutionRequest(command="true"))

    code, out, err = _sweep(url)

    assert code == 0, err
    assert [reaper.orphan_calls for reaper in built["local"]] == [[1]]
    assert built["opensandbox"] == []
    assert "found 1, kept 1" in out


def test_a_named_runtime_runs_its_reaper_once(
    built: dict[str, list[CountingReaper]], tmp_path: Path
) -> None:
    code, out, _ = _sweep(f"sqlite:///{tmp_path / 'x.db'}", "--runtime", "opensandbox")

    assert code == 1
    assert [reaper.orphan_calls for reaper in built["opensandbox"]] == [[0]]
    assert built["local"] == []
    assert "1 listing error(s)" in out


_PROBE = """
import sys
from skillruntime.core.plugins import registry as plugins
from skillruntime.core.plugins.registry import ConversationReaperProvider


class Failing:
    runtime = "opensandbox"

    def destroy(self, record):
        pass

    def orphans(self, records):
        try:
            try:
                raise ConnectionRefusedError(111, "Connection refused")
            except OSError as error:
                raise RuntimeError("transport failed") from error
        except RuntimeError as error:
            raise LookupError("Network connectivity error: Connection refused") from error

    def destroy_orphan(self, orphan):
        pass


plugins.available_conversation_reapers = lambda: {
    "opensandbox": ConversationReaperProvider("opensandbox", "", Failing)
}
from skillruntime.core.cli import main
main(sys.argv[1:])
"""


def test_a_failing_reaper_is_one_stderr_line_without_a_traceback(tmp_path: Path) -> None:
    args = ["conversations", "sweep", "--idle", "7d", "--dry-run"]
    args += ["--url", f"sqlite:///{tmp_path / 'x.db'}", "--runtime", "opensandbox"]
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_PROBE), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("skillruntime: WARNING: skillruntime.core.conversations.sweeps: ")
    assert "listing orphans of opensandbox failed: LookupError: Network connectivity" in line
    assert "caused by ConnectionRefusedError" in line
    assert "Traceback" not in done.stderr
    debug = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_PROBE), "--debug", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" in debug.stderr  # --debug keeps the whole story


@pytest.mark.slow  # imports the OpenSandbox SDK (about 0.6 s)
def test_an_opensandbox_reaper_without_a_server_names_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The sweep has no -o option: its message names the variables (it said `-o domain=…`)."""
    from skillruntime.opensandbox import sandbox

    for name in ("OPEN_SANDBOX_DOMAIN", "SKILLRUNTIME_OPENSANDBOX_DOMAIN"):
        monkeypatch.delenv(name, raising=False)

    def refused(*args: object, **kwargs: object) -> None:
        raise ConnectionRefusedError(111, "Connection refused")  # the SDK's default server

    monkeypatch.setattr(sandbox.SandboxClient, "list_tagged_infos", refused)

    code, out, err = _sweep(f"sqlite:///{tmp_path / 'x.db'}", "--runtime", "opensandbox")

    assert code == 1
    assert "1 listing error(s)" in out
    [record] = [r for r in caplog.records if "listing orphans of opensandbox" in r.getMessage()]
    assert record.exc_info is not None
    reason = str(record.exc_info[1])
    assert "set SKILLRUNTIME_OPENSANDBOX_DOMAIN or OPEN_SANDBOX_DOMAIN" in reason
    assert "-o domain" not in reason + err
