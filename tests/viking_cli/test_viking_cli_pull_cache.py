"""``skillruntime viking pull`` never prints a directory that is gone when the command ends.

Against the OpenViking endpoint double: with a usable cache the printed directory is the cache
entry and still exists afterwards; when the cache cannot be written (from the start, or for one
call) the store's copy is private and deleted at close, so ``pull`` without ``--dest`` fails with
exit status 2 and asks for ``--dest``, and ``pull --dest`` keeps a copy there.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from doubles.viking import VikingDouble
from doubles.viking.samples import DEMO_ROOT, demo_files, tree
from skillruntime.core.cli import build_cli
from skillruntime.viking import cache as cache_module

Invoke = Callable[..., Result]


@pytest.fixture
def viking() -> Iterator[VikingDouble]:
    with VikingDouble() as double:
        double.add_skill(DEMO_ROOT, demo_files(), description="A demo skill")
        yield double


@pytest.fixture
def invoke(viking: VikingDouble, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """Run ``skillruntime viking ARGS`` against the double with ``cache_dir`` as the cache."""
    for name in ("API_KEY", "ACCOUNT", "AGENT", "USER"):
        monkeypatch.delenv(f"SKILLRUNTIME_VIKING_{name}", raising=False)

    def run(cache_dir: Path, *args: str) -> Result:
        env = {
            "SKILLRUNTIME_VIKING_SERVER_URL": viking.url,
            "SKILLRUNTIME_VIKING_CACHE_DIR": str(cache_dir),
        }
        return CliRunner().invoke(build_cli(), ["viking", *args], env=env)

    return run


def _blocked_cache(tmp_path: Path) -> Path:
    """A cache path that cannot be created (its parent is a regular file; root ignores modes)."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_bytes(b"")
    return blocker / "cache"


def test_pull_prints_the_cache_entry_which_outlives_the_command(
    invoke: Invoke, tmp_path: Path
) -> None:
    cache_dir = tmp_path / "cache"
    result = invoke(cache_dir, "pull", DEMO_ROOT)
    assert result.exit_code == 0, result.output
    directory = Path(result.stdout.strip())
    assert directory.is_relative_to(cache_dir)
    assert tree(directory) == demo_files()


def test_pull_without_dest_refuses_an_unwritable_cache_and_asks_for_dest(
    invoke: Invoke, viking: VikingDouble, tmp_path: Path
) -> None:
    result = invoke(_blocked_cache(tmp_path), "pull", DEMO_ROOT)
    assert result.exit_code == 2
    assert result.stdout == ""  # no directory is printed
    assert result.stderr.startswith("Error: ")
    assert "--dest" in result.stderr
    assert "cannot be written" in result.stderr


def test_pull_with_dest_keeps_a_copy_when_the_cache_is_unwritable(
    invoke: Invoke, tmp_path: Path
) -> None:
    dest = tmp_path / "out" / "demo"
    result = invoke(_blocked_cache(tmp_path), "pull", DEMO_ROOT, "--dest", str(dest))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(dest)
    assert tree(dest) == demo_files()


def test_pull_without_dest_refuses_a_cache_write_failing_during_the_call(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(self: Any, key: Any) -> Path:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache_module.SnapshotCache, "new_staging", full_disk)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the private copy goes
    result = invoke(tmp_path / "cache", "pull", DEMO_ROOT)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "--dest" in result.stderr
    assert list(scratch.iterdir()) == []  # the private copy was removed, nothing printed

    dest = tmp_path / "kept"
    kept = invoke(tmp_path / "cache", "pull", DEMO_ROOT, "--dest", str(dest))
    assert kept.exit_code == 0, kept.output
    assert tree(dest) == demo_files()
