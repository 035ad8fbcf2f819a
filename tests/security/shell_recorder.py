"""Run shell commands under real shells with recorder programs that log the argv they receive.

A :class:`ShellRecorder` owns a directory holding ``bin/`` (one recorder executable per name; each
appends ``I NUL <argc> NUL <name> NUL <arg> NUL ...`` to the log), an empty ``work/`` directory (the
commands' working directory, so a glob that slipped through would have nothing to expand against
but would still be caught) and the log. :meth:`ShellRecorder.run` hands a whole batch of commands to
one driver process, which runs each command as
``env -i PATH=<bin> [LC_ALL=<locale>] <shell> [--norc --noprofile] -c CMD`` in turn (stdin empty,
output discarded) and writes a marker before each, so the log says exactly which programs each
command made the shell execute and with which words.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ShellRecorder", "shell_builtins"]

_RECORDER = """#!/bin/sh
printf 'I\\0%s\\0' "$#" >> {log}
printf '%s\\0' "${{0##*/}}" "$@" >> {log}
"""

_DRIVER = """
set -u
while IFS= read -r -d '' cmd; do
  for shell in $SHELLS; do
    printf 'M\\0' >> {log}
    case "$shell" in
      */bash) env -i PATH={bin} LC_ALL="$LOCALE" "$shell" --norc --noprofile -c "$cmd" ;;
      *) env -i PATH={bin} LC_ALL="$LOCALE" "$shell" -c "$cmd" ;;
    esac </dev/null >/dev/null 2>&1
  done
done
exit 0
"""


def _quote(path: Path | str) -> str:
    return "'" + str(path).replace("'", "'\\''") + "'"


def shell_builtins(bash: str) -> frozenset[str]:
    """Names bash runs without searching ``PATH`` (builtins and keywords)."""
    output = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", "compgen -b; compgen -k"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return frozenset(output.split())


class ShellRecorder:
    """Recorder executables named ``names`` plus a driver that runs batches of commands."""

    def __init__(self, root: Path, names: Sequence[str]) -> None:
        bash = shutil.which("bash")
        assert bash is not None, "bash is needed for the differential test"
        self.root = root
        self.bin = root / "bin"
        self.work = root / "work"
        self.log = root / "log"
        self.bin.mkdir(parents=True)
        self.work.mkdir()
        self.names = frozenset(names)
        for name in names:
            program = self.bin / name
            program.write_text(_RECORDER.format(log=_quote(self.log)))
            program.chmod(0o755)
        self._driver = _DRIVER.format(
            log=_quote(self.log),
            bin=_quote(self.bin),
        )
        self._bash = bash

    def run(
        self, commands: Sequence[str], shells: Sequence[str], locale: str = "C"
    ) -> list[list[tuple[str, ...]]]:
        """Run every command under every shell (absolute paths without blanks); per (command,
        shell) the list of argv the recorders saw. ``len(commands) * len(shells)`` entries,
        command-major.
        """
        self.log.write_bytes(b"")
        payload = b"".join(command.encode("utf-8") + b"\0" for command in commands)
        subprocess.run(
            [self._bash, "--norc", "--noprofile", "-c", self._driver],
            input=payload,
            cwd=self.work,
            env={"LOCALE": locale, "SHELLS": " ".join(shells), "PATH": "/usr/bin:/bin"},
            check=True,
            timeout=300,
        )
        assert not any(self.work.iterdir()), "a command created files in the work directory"
        return _parse_log(self.log.read_bytes())


def _parse_log(data: bytes) -> list[list[tuple[str, ...]]]:
    fields = data.split(b"\0")
    assert fields[-1] == b"", "the recorder log ends in the middle of a record"
    fields.pop()
    runs: list[list[tuple[str, ...]]] = []
    index = 0
    while index < len(fields):
        kind = fields[index]
        if kind == b"M":
            runs.append([])
            index += 1
        elif kind == b"I":
            count = int(fields[index + 1])
            argv = fields[index + 2 : index + 3 + count]
            assert len(argv) == count + 1, "truncated recorder record"
            runs[-1].append(tuple(item.decode("utf-8", "surrogateescape") for item in argv))
            index += 3 + count
        else:
            raise AssertionError(f"unexpected recorder log field {kind!r}")
    return runs
