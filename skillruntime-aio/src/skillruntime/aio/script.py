"""The POSIX shell wrapper every command runs in, and the parser of what it reports.

The wrapper makes both command APIs of the service behave the same way:

* the command runs with ``bash -c`` (``sh -c`` where bash is missing) in its own session and
  process group, stdin from ``/dev/null``, stdout and stderr into two files of a private run
  directory, so the streams stay separate even on the PTY-based ``/v1/shell`` API;
* a watchdog kills the whole process group at the deadline and records that it did;
* each stream is cut to ``cap`` bytes on the service (head and tail around a marker giving the
  dropped byte count), so no more than that ever crosses the network or sits in memory here;
* the exit code, the timeout flag and the stream sizes are reported in a trailer tagged with a
  random nonce that the command cannot forge.

In *stream* mode (``/v1/bash``) the kept stdout, then the trailer, go to the wrapper's stdout and
the kept stderr to its stderr. In *file* mode (``/v1/shell``) everything goes into
``<run_dir>/result`` — a header line, then stdout bytes, then stderr bytes — which the client
downloads.
"""

from __future__ import annotations

import base64
import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "RESULT_FILE",
    "WrapperOutcome",
    "build_wrapper",
    "parse_file_result",
    "parse_stream_result",
    "shell_line",
]

RESULT_FILE = "result"
"""Name of the result file of a file-mode run inside its run directory."""

STARTED_FILE = "started"
"""Name of the file a run creates first: its presence proves the command may have started."""

_TAG = "SRAIO"

_MARKER = "\\n... [%s bytes truncated] ...\\n"
"""``printf`` format of the marker put between the kept head and tail of a cut stream."""


def kept_size(size: int, cap: int) -> int:
    """Bytes the wrapper keeps of a stream of ``size`` bytes under ``cap``."""
    if size <= cap:
        return size
    return cap + len(f"\n... [{size - cap} bytes truncated] ...\n")


@dataclass(frozen=True)
class WrapperOutcome:
    """What a wrapper run reported.

    ``exit_code`` is the command's exit status (``-1`` on timeout); ``missing_cwd`` is true when
    the working directory did not exist (the command never started). ``stdout_size`` and
    ``stderr_size`` are the full sizes the command printed.
    """

    exit_code: int
    timed_out: bool
    missing_cwd: bool
    stdout: bytes
    stderr: bytes
    stdout_size: int
    stderr_size: int


def build_wrapper(
    *,
    command: str,
    cwd: str,
    run_dir: str,
    nonce: str,
    cap: int,
    timeout: float,
    to_file: bool,
    env_file: str | None = None,
    reset_dir: str | None = None,
    make_dirs: Sequence[str] = (),
) -> str:
    """The wrapper script for one command (see the module docs).

    ``env_file`` is a file of ``export NAME='value'`` lines sourced for the command and deleted;
    ``reset_dir`` a directory removed first (older run directories of the same shell session);
    ``make_dirs`` directories created before changing into ``cwd``.
    """
    q = shlex.quote
    head = cap // 2
    tail = cap - head
    interval = 0.1 if timeout <= 10 else 0.5
    ticks = max(1, math.ceil(timeout / interval))
    lines = ["set +m 2>/dev/null", f"D={q(run_dir)}", f"C={q(command)}"]
    if reset_dir:
        lines.append(f"rm -rf -- {q(reset_dir)} 2>/dev/null")
    lines.append(
        'mkdir -p -m 700 -- "$D" 2>/dev/null && : > "$D/started" '
        '|| { echo "skillruntime: cannot create the run directory" >&2; exit 125; }'
    )
    if env_file:
        lines.append(
            f"if [ -f {q(env_file)} ]; then set -a; . {q(env_file)}; set +a; "
            f"rm -f -- {q(env_file)}; fi"
        )
    if make_dirs:
        lines.append("mkdir -p -- " + " ".join(q(d) for d in make_dirs) + " 2>/dev/null")
    lines += [
        f'e() {{ if [ "$2" -le {cap} ]; then [ "$2" -gt 0 ] && cat "$1"; '
        f'else head -c {head} "$1"; '
        f'printf "{_MARKER}" $(($2 - {cap})); '
        f'tail -c {tail} "$1"; fi; :; }}',
        "TO=0; NO=0; NE=0; RC=0",
        f"if cd -- {q(cwd)} 2>/dev/null; then",
        "if command -v bash >/dev/null 2>&1; then B=bash; else B=sh; fi",
        "L=''; command -v setsid >/dev/null 2>&1 && L='setsid -w'",
        '$L sh -c \'echo $$ > "$1/pid"; shift; exec "$@"\' sh "$D" "$B" -c "$C" '
        '</dev/null >"$D/o" 2>"$D/e" &',
        "P=$!",
        # The watchdog: with setsid, one ``sleep`` in its own process group, killed as a whole
        # the moment the command ends; without setsid, a short polling loop.
        'K=\'G=$(cat "$1/pid" 2>/dev/null); : > "$1/t"; if [ -n "$G" ]; then '
        'kill -KILL -"$G" 2>/dev/null || kill -KILL "$G" 2>/dev/null; fi\'',
        'if [ -n "$L" ]; then',
        f'setsid sh -c \'sleep {timeout:g}; eval "$2"\' sh "$D" "$K" </dev/null >/dev/null 2>&1 &',
        "else",
        f"( i=0; while [ $i -lt {ticks} ]; do sleep {interval}; "
        'kill -0 $P 2>/dev/null || exit 0; i=$((i+1)); done; set -- "$D"; eval "$K" ) '
        "</dev/null >/dev/null 2>&1 &",
        "fi",
        "W=$!",
        "{ wait $P; } 2>/dev/null; RC=$?",
        '{ kill -KILL -"$W" || kill -KILL "$W"; wait "$W"; } 2>/dev/null',
        '[ -f "$D/t" ] && TO=1',
        'set -- $(wc -c "$D/o" "$D/e"); NO=$1; NE=$3',
        'else TO=2; : > "$D/o"; : > "$D/e"; fi',
    ]
    trailer = f"{_TAG}{nonce} %s %s %s %s"
    if to_file:
        lines += [
            f'{{ printf "{trailer}\\n" "$RC" "$TO" "$NO" "$NE"; e "$D/o" "$NO"; e "$D/e" "$NE"; }} '
            f'> "$D/result.part" && mv "$D/result.part" "$D/{RESULT_FILE}"',
            'rm -f "$D/o" "$D/e" "$D/pid" "$D/t"',
        ]
    else:
        lines += [
            'e "$D/o" "$NO"',
            f'printf "\\n\\036{trailer}\\n" "$RC" "$TO" "$NO" "$NE"',
            'e "$D/e" "$NE" >&2',
            'rm -rf -- "$D"',
        ]
    return "\n".join(lines) + "\n"


def shell_line(script: str) -> str:
    """``script`` as one ASCII line for a PTY: base64, decoded and run in a subshell.

    A PTY sees neither newlines, tabs nor non-ASCII text of the script, and ``exit`` or
    ``cd`` inside it cannot end or change the persistent shell.
    """
    encoded = base64.b64encode(script.encode("utf-8")).decode("ascii")
    return f"(eval \"$(printf '%s' '{encoded}' | base64 -d)\")"


def _parse_fields(fields: list[str]) -> tuple[int, int, int, int]:
    rc, flag, out_size, err_size = (int(x) for x in fields[:4])
    return rc, flag, out_size, err_size


def parse_stream_result(nonce: str, stdout: str, stderr: str) -> WrapperOutcome | None:
    """Parse stream-mode output; ``None`` when the trailer is missing (the wrapper was killed)."""
    tag = f"\n\x1e{_TAG}{nonce} "
    index = stdout.rfind(tag)
    if index < 0:
        return None
    fields = stdout[index + len(tag) :].split()
    try:
        rc, flag, out_size, err_size = _parse_fields(fields)
    except ValueError:
        return None
    return WrapperOutcome(
        exit_code=-1 if flag == 1 else rc,
        timed_out=flag == 1,
        missing_cwd=flag == 2,
        stdout=stdout[:index].encode("utf-8", "surrogateescape"),
        stderr=stderr.encode("utf-8", "surrogateescape"),
        stdout_size=out_size,
        stderr_size=err_size,
    )


def parse_file_result(nonce: str, data: bytes, cap: int) -> WrapperOutcome | None:
    """Parse a file-mode result file; ``None`` when it is not a result of this run."""
    line, sep, rest = data.partition(b"\n")
    prefix = f"{_TAG}{nonce} ".encode()
    if not sep or not line.startswith(prefix):
        return None
    fields = line[len(prefix) :].decode("ascii", "replace").split()
    try:
        rc, flag, out_size, err_size = _parse_fields(fields)
    except (ValueError, IndexError):
        return None
    kept_out = kept_size(out_size, cap)
    return WrapperOutcome(
        exit_code=-1 if flag == 1 else rc,
        timed_out=flag == 1,
        missing_cwd=flag == 2,
        stdout=rest[:kept_out],
        stderr=rest[kept_out:],
        stdout_size=out_size,
        stderr_size=err_size,
    )
