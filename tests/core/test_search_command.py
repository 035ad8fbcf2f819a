"""The one-command search of sandbox file systems (AIO, OpenSandbox): hostile patterns and paths
stay data, the archive reader is strict, and a sandbox without the tools fails the command."""

from __future__ import annotations

import base64
import gzip
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillruntime.core.files import search_command
from skillruntime.core.files.search import GrepQuery
from skillruntime.core.files.search_command import (
    MISSING_TOOLS,
    parse_glob_output,
    parse_grep_output,
    read_archive,
    search_script,
)

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
        found = parse_grep_output(done.stdout, done.stderr)
        assert found is not None
        listing, contents = found
        assert [e.path for e in listing.list(str(root))] == [str(root / "file.txt")]
        assert contents[str(root / "file.txt")] == (root / "file.txt").read_bytes()


def test_literal_pattern_narrows_the_archive(tmp_path: Path) -> None:
    (tmp_path / "hit.txt").write_text("a needle here\n")
    (tmp_path / "miss.txt").write_text("nothing\n")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "noise.txt").write_text("needle\n")
    done = _run(search_script(str(tmp_path), 100, content=GrepQuery("needle")), tmp_path)
    found = parse_grep_output(done.stdout, done.stderr)
    assert found is not None
    listing, contents = found
    assert set(contents) == {str(tmp_path / "hit.txt")}
    names = sorted(os.path.basename(e.path) for e in listing.list(str(tmp_path)))
    assert names == ["hit.txt", "miss.txt"]
    regex = _run(search_script(str(tmp_path), 100, content=GrepQuery("ne+dle")), tmp_path)
    found = parse_grep_output(regex.stdout, regex.stderr)
    assert found is not None
    every = found[1]
    assert set(every) == {str(tmp_path / "hit.txt"), str(tmp_path / "miss.txt")}


def test_missing_tools_fail_the_command_instead_of_reading_as_no_match(tmp_path: Path) -> None:
    (tmp_path / "hit.txt").write_text("needle\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("find", "xargs", "grep", "base64"):
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
    assert done.returncode == MISSING_TOOLS


def _as_nobody(script: str) -> subprocess.CompletedProcess[bytes]:
    # An unprivileged user: root reads every directory.
    return subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-c", script],
        capture_output=True,
        timeout=30,
        check=False,
    )


def test_an_unreadable_directory_fails_the_command() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        base.chmod(0o755)
        (base / "open").mkdir()
        (base / "open" / "a.txt").write_text("needle\n")
        closed = base / "closed"
        closed.mkdir()
        (closed / "b.txt").write_text("needle\n")
        script = search_script(str(base), 100, content=GrepQuery("needle"))
        readable = _as_nobody(script)
        closed.chmod(0)
        try:
            unreadable = _as_nobody(script)
        finally:
            closed.chmod(0o755)
    assert readable.returncode == 0, readable.stderr
    assert unreadable.returncode != 0


def test_long_and_non_ascii_names_survive_the_archive(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120) / "ünïcødé"
    deep.mkdir(parents=True)
    target = deep / ("f" * 150 + ".txt")
    target.write_bytes(b"needle\r\nbytes \xff\n")
    done = _run(search_script(str(tmp_path), 100, content=GrepQuery("needle")), tmp_path)
    assert done.returncode == 0, done.stderr
    found = parse_grep_output(done.stdout, done.stderr)
    assert found is not None
    listing, contents = found
    assert contents == {str(target): target.read_bytes()}
    assert [e.path for e in listing.list(str(deep))] == [str(target)]
    glob = _run(search_script(str(tmp_path), 100, content=None), tmp_path)
    globbed = parse_glob_output(glob.stdout)
    assert globbed is not None
    assert [e.path for e in globbed.list(str(deep))] == [str(target)]


def test_a_corrupt_archive_is_refused() -> None:
    assert parse_grep_output(b"", b"not base64!") is None
    header = bytearray(512)
    header[:5] = b"/x.tx"
    header[124:136] = b"00000000010\0"
    header[148:156] = b"0000000\0"  # wrong checksum
    assert parse_grep_output(b"", base64.b64encode(bytes(header) + bytes(1024))) is None


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=4096))
def test_the_archive_reader_only_raises_value_error(data: bytes) -> None:
    try:
        files = read_archive(data)
    except ValueError:
        return
    assert sum(len(content) for content in files.values()) <= len(data)


def test_without_gzip_the_archive_goes_plain(tmp_path: Path) -> None:
    (tmp_path / "hit.txt").write_text("needle\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("find", "xargs", "grep", "tar", "base64", "cat", "bash"):
        source = shutil.which(tool)
        assert source is not None
        (bin_dir / tool).symlink_to(source)
    script = search_script(str(tmp_path), 100, content=GrepQuery("needle"))
    done = subprocess.run(
        [str(bin_dir / "bash"), "-c", script],
        env={"PATH": str(bin_dir), "LC_ALL": "C"},
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not base64.b64decode(done.stderr).startswith(b"\x1f\x8b")
    found = parse_grep_output(done.stdout, done.stderr)
    assert found is not None
    assert found[1] == {str(tmp_path / "hit.txt"): b"needle\n"}


def test_a_truncated_or_oversized_gzip_archive_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    packed = gzip.compress(bytes(4096))
    assert parse_grep_output(b"", base64.b64encode(packed[:-8])) is None
    monkeypatch.setattr(search_command, "MAX_UNPACKED_BYTES", 1024)
    assert parse_grep_output(b"", base64.b64encode(packed)) is None


_ODD_NAMES = (
    b"x\ny.txt",
    b"GHOST.txt\nf\t7\t1.0\t644\tphantom.txt",
    b"carriage\rreturn.txt",
    b"tab\tname.txt",
    b"bad\xff\xfe.txt",
)


def test_names_with_newlines_and_undecodable_bytes_survive_a_text_channel(tmp_path: Path) -> None:
    base = os.fsencode(tmp_path)
    for name in _ODD_NAMES:
        with open(base + b"/" + name, "wb") as handle:
            handle.write(b"needle\n")
    expected = sorted(os.fsdecode(base + b"/" + name) for name in _ODD_NAMES)
    glob = _run(search_script(str(tmp_path), 100, content=None), tmp_path)
    grep = _run(search_script(str(tmp_path), 100, content=GrepQuery("needle")), tmp_path)
    assert glob.returncode == 0, glob.stderr
    assert grep.returncode == 0, grep.stderr
    for done in (glob, grep):
        # Through JSON strings or line events (decoded, invalid bytes replaced) nothing changes.
        assert done.stdout.decode("utf-8", "replace").encode() == done.stdout
        assert done.stderr.decode("utf-8", "replace").encode() == done.stderr
    listing = parse_glob_output(glob.stdout)
    assert listing is not None
    assert sorted(e.path for e in listing.list(str(tmp_path))) == expected
    found = parse_grep_output(grep.stdout, grep.stderr)
    assert found is not None
    assert sorted(e.path for e in found[0].list(str(tmp_path))) == expected
    assert sorted(found[1]) == expected


def test_an_unreadable_listing_is_refused() -> None:
    assert parse_glob_output(b"not base64!") is None
    assert parse_grep_output(b"not base64!", b"") is None
