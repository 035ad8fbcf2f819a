"""The one-command search of the AIO file system: hostile patterns and paths stay data."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillruntime.aio.files import _parse_entry
from skillruntime.aio.search import parse_search_output, search_script
from skillruntime.core.file_search import GrepQuery

_SHELLY = st.lists(
    st.sampled_from([*"ab $`'\"\\;|&()<>*?[]{}!#~-\t=%\n", "touch ", "PWNED", "$(", "-e "]),
    max_size=20,
).map("".join)


def _run(script: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["bash", "-c", "export LC_ALL=C; " + script],
        cwd=cwd,
        capture_output=True,
        timeout=30,
        check=False,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=_SHELLY, name=_SHELLY.filter(lambda s: s.strip("\n") and "/" not in s))
def test_hostile_patterns_and_paths_run_nothing(pattern: str, name: str) -> None:
    name = name.replace("\n", "_").replace("\0", "_")
    if name in (".", ".."):
        return
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        root = base / name
        root.mkdir()
        (root / "file.txt").write_text(f"x {pattern} y\nneedle\n")
        script = search_script(str(root), 100, content=GrepQuery(pattern or "x"))
        done = _run(script, base)
        assert done.returncode == 0, done.stderr
        leftovers = {p.name for p in base.rglob("*")} - {name, "file.txt"}
        assert leftovers == set()
        assert not Path("PWNED").exists()
        listing, contents = parse_search_output(done.stdout, _parse_entry)
        assert [e.path for e in listing.list(str(root))] == [str(root / "file.txt")]
        assert contents is not None
        assert contents[str(root / "file.txt")] == (root / "file.txt").read_bytes()


def test_literal_pattern_narrows_the_archive(tmp_path: Path) -> None:
    (tmp_path / "hit.txt").write_text("a needle here\n")
    (tmp_path / "miss.txt").write_text("nothing\n")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "noise.txt").write_text("needle\n")
    done = _run(search_script(str(tmp_path), 100, content=GrepQuery("needle")), tmp_path)
    listing, contents = parse_search_output(done.stdout, _parse_entry)
    assert contents is not None
    assert set(contents) == {str(tmp_path / "hit.txt")}
    names = sorted(os.path.basename(e.path) for e in listing.list(str(tmp_path)))
    assert names == ["hit.txt", "miss.txt"]
    regex = _run(search_script(str(tmp_path), 100, content=GrepQuery("ne+dle")), tmp_path)
    _, every = parse_search_output(regex.stdout, _parse_entry)
    assert every is not None
    assert set(every) == {str(tmp_path / "hit.txt"), str(tmp_path / "miss.txt")}


def test_missing_tools_fail_the_command_instead_of_reading_as_no_match(tmp_path: Path) -> None:
    (tmp_path / "hit.txt").write_text("needle\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("find", "xargs", "grep", "base64", "printf"):
        source = subprocess.run(
            ["bash", "-c", f"command -v {tool}"], capture_output=True, text=True, check=False
        ).stdout.strip()
        if source.startswith("/"):
            (bin_dir / tool).symlink_to(source)
    script = search_script(str(tmp_path), 100, content=GrepQuery("needle"))
    bash = shutil.which("bash")
    assert bash is not None
    done = subprocess.run(
        [bash, "-c", script],
        env={"PATH": str(bin_dir), "LC_ALL": "C"},
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 97
