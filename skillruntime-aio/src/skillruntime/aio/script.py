"""The POSIX shell wrapper every command runs in, and the parser of what it reports.

The wrapper makes both command APIs of the service behave the same way:

* stdin comes from ``/dev/null``, stdout and stderr go into two files of a private run
  directory, so the streams stay separate even on the PTY-based ``/v1/shell`` API;
* at the deadline the command's whole tree — its process group and every process holding the
  run's marker (``SKILLRUNTIME_CANCEL_MARK=<token>``, so also a child that left the group with
  ``setsid``) — gets ``SIGTERM``, then, after a grace (:data:`KILL_GRACE_SECONDS`, cut short
  when no marked process is left), ``SIGKILL``; the output printed so far is kept. A process
  that cleared its environment *and* left the group escapes;
* each stream is cut to ``cap`` bytes on the service (head and tail around a marker giving the
  dropped byte count), so no more than that ever crosses the network or sits in memory here;
* the exit code, the timeout flag and the stream sizes are reported in a trailer tagged with a
  random nonce that the command cannot forge.

Two ways to run the command:

* with a *watchdog* (``/v1/shell``, the default): the command runs with ``bash -c`` (``bash``
  from ``/bin``, ``/usr/bin`` or ``/usr/local/bin``; ``/bin/sh`` where there is none) in its
  own session and process group (``setsid``); a watchdog (a forked subshell with one ``sleep``,
  stopped with a signal when the command ends) stops that group and the marked processes at
  the deadline;
* without (``/v1/bash``, where the caller keeps the deadline): the command runs in a
  subshell of the wrapper — one ``fork``, no ``exec``; its ``$$`` is the wrapper's — run as a
  job of a shell with job control on, so that it leads a process group of its own, whose id it
  records in the run's ``.p`` file (blanked when the command ended). Once the deadline passed
  (or the service killed a run), :func:`build_report` stops that process group and the marked
  processes — the command's whole tree, whatever the service itself killed — and reports what
  the run left.

Besides that, the wrapper starts ``wc`` only when there is output, ``cat``/``head``/``tail`` only
for a stream that is not empty, and one ``rm`` (two in file mode with an environment file), or
none with ``keep_files`` (a session's reused files are emptied with builtins); the rest is
shell builtins. The run directory is created once and shared by runs (files are named by run
id). Its variables carry a per-run prefix, so
a command environment variable of any name neither changes the wrapper nor is changed by it, and
its helper programs are looked up on the standard ``PATH`` (``command -p``), whatever ``PATH``
the command gets.

In *stream* mode (``/v1/bash``) the kept stdout, then the trailer, go to the wrapper's stdout and
the kept stderr to its stderr. In *file* mode (``/v1/shell``) everything goes into the run's
result file (:func:`result_path`) — a header line, then stdout bytes, then stderr bytes — which the
client downloads; its length is checked against the header, so a partly written result is never
taken for a complete one. When the command printed nothing, the trailer is also printed to the
session's output (:func:`parse_inline_result`), so no download is needed.
"""

from __future__ import annotations

import base64
import math
import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from skillruntime.core.runtime.bridge import CANCEL_MARKER_VARIABLE

__all__ = [
    "KILL_GRACE_SECONDS",
    "WrapperOutcome",
    "build_report",
    "build_wrapper",
    "json_script",
    "parse_file_result",
    "parse_inline_result",
    "parse_stream_result",
    "result_path",
    "shell_line",
    "started_path",
]

_TAG = "SRAIO"

_MARKER = "\\n... [%s bytes truncated] ...\\n"
"""``printf`` format of the marker put between the kept head and tail of a cut stream."""

_TIMED_OUT = 3
"""Exit status of a watchdog that fired."""

KILL_GRACE_SECONDS = 2.0
"""Seconds between ``SIGTERM`` and ``SIGKILL`` of a timed-out command's tree (the local
runtime's default ``kill_grace_seconds``)."""

_RUN_ID = re.compile(r"[A-Za-z0-9_-]+")


def result_path(run_dir: str, run_id: str) -> str:
    """Where a file-mode run leaves its result."""
    return posixpath.join(run_dir, f"{run_id}.r")


def started_path(run_dir: str, run_id: str) -> str:
    """The file a file-mode run creates first: its presence proves the command may have started."""
    return posixpath.join(run_dir, f"{run_id}.s")


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


def _names(nonce: str, run_id: str) -> tuple[str, str, str, str]:
    """The variable prefix of a run, its file base, and its stdout and stderr file words."""
    if not _RUN_ID.fullmatch(run_id) or not re.fullmatch(r"[A-Za-z0-9]+", nonce):
        raise ValueError("run_id and nonce must be made of letters and digits")
    v = f"_sr{nonce[:6]}"  # prefix of every wrapper variable
    base = f"${v}F"
    return v, base, f'"{base}.o"', f'"{base}.e"'


def _report(
    v: str, base: str, out: str, err: str, *, nonce: str, cap: int, to_file: bool
) -> list[str]:
    """The lines that cut both streams, print the trailer (``{v}RC``, ``{v}TO``, ``{v}NO``,
    ``{v}NE``) and the kept streams, and put the run's files in ``"$@"`` for the final ``rm``."""
    head = cap // 2
    tail = cap - head
    lines = [
        f'{v}e() {{ if [ "$2" -le {cap} ]; then [ "$2" -eq 0 ] || command -p cat -- "$1"; '
        f'else command -p head -c {head} -- "$1"; '
        f'printf "{_MARKER}" $(($2 - {cap})); '
        f'command -p tail -c {tail} -- "$1"; fi; }}',
    ]
    fields = f'"${v}RC" "${v}TO" "${v}NO" "${v}NE"'
    trailer = f"{_TAG}{nonce} %s %s %s %s"
    if to_file:
        lines.append(
            f'{{ printf "{trailer}\\n" {fields}; {v}e {out} "${v}NO"; {v}e {err} "${v}NE"; }} '
            f'> "{base}.r"'
        )
        # Nothing printed: the trailer alone is the result, shown in the session's output too
        # (its tag is printed in two halves, so the command line's echo never holds it).
        half = len(_TAG) + len(nonce) // 2
        tag = f"{_TAG}{nonce}"
        lines.append(
            f'[ "${v}NO" = 0 ] && [ "${v}NE" = 0 ] && '
            f'printf "%s%s %s %s 0 0\\n" {tag[:half]} {tag[half:]} "${v}RC" "${v}TO"'
        )
    else:
        lines += [
            f'{v}e {out} "${v}NO"',
            f'printf "\\n\\036{trailer}\\n" {fields}',
            f'{v}e {err} "${v}NE" >&2',
        ]
    return lines


def _sizes(v: str, out: str, err: str) -> str:
    """The line that sets ``{v}NO``/``{v}NE`` to the stream sizes (``wc`` only when there is
    output)."""
    return (
        f"unset IFS; if [ -s {out} ] || [ -s {err} ]; then "
        f"{v}n() {{ {v}NO=$1; {v}NE=$3; }}; {v}n $(command -p wc -c -- {out} {err}); fi"
    )


def _remove(files: Sequence[str], *, keep: bool) -> str:
    """The last line: remove the run's ``files`` (and ``"$@"``), replacing the wrapper's shell
    instead of forking (the result is already out); with ``keep``, empty them instead (shell
    builtins only: no process at all)."""
    if keep:
        return "; ".join(f": > {name}" for name in files)
    rm = f'rm -f -- {" ".join(files)} "$@"'
    return f"[ -x /bin/rm ] && exec /bin/{rm}; command -p {rm}"


def _clear_group(group: str) -> str:
    """The command that blanks the process group id recorded in ``group``.

    The id is written fixed-width over the file's bytes (``1<>``: no truncation) and blanked
    the same way: truncating a file that holds data makes some file systems (ext4's
    ``auto_da_alloc``) flush it on close, which costs more than the rest of the wrapper's file
    work."""
    return f"printf '%10s\\n' '' 1<> {group}"


def _check_token(token: str) -> str:
    if not token.isalnum():
        raise ValueError(f"the run marker token must be letters and digits, got {token!r}")
    return token


def _marked(v: str, token: str) -> str:
    """The lines that define ``{v}f`` (print the pids of the processes whose environment holds
    ``CANCEL_MARKER_VARIABLE=token``, read from ``/proc/<pid>/environ``: with one ``grep -z``
    where grep has it, one ``tr | grep`` per process otherwise) and ``{v}k SIG`` (send ``SIG``
    to all of them but the calling shell with one ``kill``, so that a wrapper holding the
    marker is stopped together with its command: between the two it could report the output as
    its own and empty its files). A zombie's environment reads empty, so an ended
    process is never listed. The calling shell and its helpers must not hold the marker
    themselves."""
    marker = f"{CANCEL_MARKER_VARIABLE}={_check_token(token)}"
    return (
        f"{v}m='{marker}'\n"
        "if printf 'a\\000' | command -p grep -qz a 2>/dev/null; then "
        f'{v}f() {{ command -p grep -lzxF -- "${v}m" /proc/[0-9]*/environ 2>/dev/null '
        "| command -p sed 's#^/proc/\\([0-9]*\\)/environ$#\\1#'; }; "
        "else "
        f"{v}f() {{ for {v}d in /proc/[0-9]*; do "
        f"{{ command -p tr '\\000' '\\n' < \"${v}d/environ\"; }} 2>/dev/null "
        f'| command -p grep -qxF -- "${v}m" && echo "${{{v}d#/proc/}}"; done; }}; '
        "fi\n"
        f'{v}k() {{ {v}l=; for {v}p in $({v}f); do [ "${v}p" = "$$" ] || {v}l="${v}l ${v}p"; '
        f'done; [ -z "${v}l" ] || kill -"$1" ${v}l; }}'
    )


def _stop(v: str, group_term: str, group_kill: str, grace: float) -> str:
    """The lines that stop a timed-out command's tree as the local runtime does: ``SIGTERM`` to
    every marked process (``{v}k``, see :func:`_marked`) and to its process group
    (``group_term``), in that order (the marked wrapper of a run without watchdog is stopped
    before its job ends), then up to ``grace`` seconds for the marked processes to end (polled every
    tenth of a second), then ``SIGKILL`` to the group (``group_kill``) and to every marked
    process (three sweeps, so children forked meanwhile are caught)."""
    rounds = max(0, math.ceil(grace * 10))
    return (
        f"{{ {v}k TERM; {group_term}; }} 2>/dev/null\n"
        f'{v}i={rounds}; while [ ${v}i -gt 0 ] && [ -n "$({v}f)" ]; do '
        "command -p sleep 0.1 2>/dev/null || command -p sleep 1; "
        f"{v}i=$(({v}i - 1)); done\n"
        f"{{ {group_kill}; {v}k KILL; {v}k KILL; {v}k KILL; }} 2>/dev/null"
    )


def _kill_group(v: str, group: str, marker: str, grace: float) -> str:
    """The lines that stop what a run without watchdog left running (``SIGTERM``, up to
    ``grace`` seconds, then ``SIGKILL``: :func:`_stop`), then blank the run's record ``group``.

    The record is the command's to overwrite (it runs as the same user), so it is only a hint:
    the process group it names is signalled only when the record is a canonical integer above 1
    (digits, no leading zero: ``kill -KILL -01`` would be ``kill -KILL -1``, every process) and
    names a live process group leader whose environment holds ``marker`` — this run's
    ``NAME=token`` the service started the wrapper with, which the job inherits. Every process
    holding ``marker`` is signalled as well (:func:`_marked`), which also reaches the command's
    processes when the record was rewritten, its group leader is gone, or they left the group
    (``setsid``). Nothing that does not descend from the run, or carry its marker, is signalled.
    """
    name, _, token = marker.partition("=")
    if name != CANCEL_MARKER_VARIABLE or not token.isalnum():
        raise ValueError(f"the run marker must be {CANCEL_MARKER_VARIABLE}=<letters and digits>")
    return (
        f"{v}G=; if [ -s {group} ]; then unset IFS; {v}P=; read -r {v}P < {group}; case ${v}P in "
        f"''|*[!0-9]*|0*|1|???????????*) ;; *) "
        f'{v}L=; read -r {v}L < "/proc/${v}P/stat"; {v}L=${{{v}L##*") "}}; '
        f'{v}g() {{ [ "$3" = "${v}P" ]; }}; '
        f"if {v}g ${v}L && command -p tr '\\000' '\\n' < \"/proc/${v}P/environ\" "
        f"| command -p grep -qxF -- {marker}; then {v}G=${v}P; fi ;; "
        f"esac; fi 2>/dev/null\n"
        f"{_marked(v, token)}\n"
        + _stop(
            v,
            f'[ -z "${v}G" ] || kill -TERM -"${v}G"',
            f'[ -z "${v}G" ] || kill -KILL -"${v}G"',
            grace,
        )
        + f"\nif [ -s {group} ]; then {_clear_group(group)}; fi 2>/dev/null"
    )


def build_wrapper(
    *,
    command: str,
    cwd: str,
    run_dir: str,
    run_id: str,
    nonce: str,
    cap: int,
    timeout: float,
    to_file: bool,
    env_file: str | None = None,
    reset: bool = False,
    make_dirs: Sequence[str] = (),
    watchdog: bool = True,
    keep_files: bool = False,
    marker: str | None = None,
    grace: float = KILL_GRACE_SECONDS,
) -> str:
    """The wrapper script for one command (see the module docs).

    ``run_dir`` is a private directory (created with mode ``0700`` when missing) that may be
    shared by runs; the run's files there start with ``run_id``. ``env_file`` is a file of
    ``NAME='value'`` lines sourced (exported) for the command and deleted before it starts;
    ``reset`` deletes the files of earlier runs in ``run_dir`` first (a shell session's previous
    results); ``make_dirs`` are directories created before changing into ``cwd``.

    Without ``watchdog`` (the ``/v1/bash`` API) the command runs in a subshell of the wrapper
    in a process group of its own (a job of a shell with job control on: one ``fork``, no
    ``exec``), with SIGINT and SIGQUIT ignored; its group id is written to the run's ``.p``
    file. ``timeout`` is then the caller's to enforce, and :func:`build_report` stops that group
    and reports what a stopped run left. The wrapper needs bash for this (``$BASHPID``, job
    control without a terminal): under another ``sh`` the command stays in the wrapper's group
    and nothing is recorded.

    With ``watchdog``, the command is started with ``CANCEL_MARKER_VARIABLE=marker`` in its
    environment when ``marker`` (letters and digits) is given, and at the deadline the watchdog
    sends ``SIGTERM`` to the command's process group and every process holding that marker (so
    also a child that left the group with ``setsid``), waits up to ``grace`` seconds for the
    marked processes to end, then sends ``SIGKILL`` to both (:func:`_stop`). A process that
    cleared its environment *and* left the group escapes. ``marker`` must not be in the
    wrapper's own environment (nor in ``env_file``): the watchdog's helpers would hold it.

    With ``keep_files`` the run's stream files are emptied at the end instead of removed, so a
    caller that runs one command at a time under one ``run_id`` (a command session) spares the
    ``rm``; the caller removes them when it is done with that ``run_id``.
    """
    v, base, out, err = _names(nonce, run_id)
    group = f'"{base}.p"'
    q = shlex.quote
    lines = [
        "set +m 2>/dev/null",
        f'{v}R={q(run_dir)}; {v}F="${v}R"/{run_id}',
        f"{v}C={q(command)}",
        f'{{ [ -d "${v}R" ] || command -p mkdir -p -m 700 -- "${v}R"; }} 2>/dev/null',
    ]
    if reset:
        # The files of earlier runs of this shell session (listed before this run's own).
        lines.append(f'set -- "${v}R"/*; [ -e "$1" ] || shift')
    else:
        lines.append("set --")
    first = f'"{base}.s"' if to_file else out
    lines.append(
        f": > {first} 2>/dev/null "
        '|| { echo "skillruntime: cannot create the run directory" >&2; exit 125; }'
    )
    if env_file:
        lines.append(
            f"if [ -f {q(env_file)} ]; then set -a; . {q(env_file)}; set +a; "
            f"command -p rm -f -- {q(env_file)}; fi"
        )
    if make_dirs:
        lines.append("command -p mkdir -p -- " + " ".join(q(d) for d in make_dirs) + " 2>/dev/null")
    lines += [
        f"{v}TO=0; {v}NO=0; {v}NE=0; {v}RC=0",
        f"if cd -- {q(cwd)} 2>/dev/null; then",
    ]
    if watchdog:
        group_term = f'kill -TERM -"${v}P" || kill -TERM "${v}P"'
        group_kill = f'kill -KILL -"${v}P" || kill -KILL "${v}P"'
        if marker is None:
            mark = ""
            stop = [f"{{ {group_term}; }} 2>/dev/null"]
            if grace > 0:
                stop.append(
                    f"{v}i={max(1, math.ceil(grace * 10))}; while [ ${v}i -gt 0 ] && "
                    f'kill -0 -"${v}P" 2>/dev/null; do '
                    "command -p sleep 0.1 2>/dev/null || command -p sleep 1; "
                    f"{v}i=$(({v}i - 1)); done"
                )
            stop.append(f"{{ {group_kill}; }} 2>/dev/null")
        else:
            mark = f"{CANCEL_MARKER_VARIABLE}={_check_token(marker)} "
            stop = [_marked(v, marker), _stop(v, group_term, group_kill, grace)]
        lines += [
            # The command's shell does not depend on the PATH the command is given.
            f"{v}B=/bin/sh; for {v}x in /bin/bash /usr/bin/bash /usr/local/bin/bash; do "
            f'if [ -x "${v}x" ]; then {v}B=${v}x; break; fi; done',
            # A background job of a shell without job control is never a process group leader,
            # so setsid does not fork: the job's pid is the id of the new session and group.
            # "--": a command that starts with "-" is a command, not the shell's options.
            "if command -p -v setsid >/dev/null 2>&1; then",
            f'{mark}command -p setsid "${v}B" -c -- "${v}C" </dev/null >{out} 2>{err} &',
            "else",
            f'{mark}"${v}B" -c -- "${v}C" </dev/null >{out} 2>{err} &',
            "fi",
            f"{v}P=$!",
            "unset IFS",
            # The watchdog: a subshell with one sleep; USR1 (sent when the command ends) stops
            # both. Once it fired it ignores USR1: the stop sequence (TERM, grace, KILL) runs
            # to its end, the grace cut short when no marked process is left.
            f'( {v}T=0; trap \'[ "$!" = "${v}P" ] || kill $! 2>/dev/null; exit ${v}T\' USR1',
            f"command -p sleep {timeout:g} & wait $! || exit 0",
            f"trap '' USR1; {v}T={_TIMED_OUT}",
            *stop,
            f"exit {_TIMED_OUT} ) </dev/null >/dev/null 2>&1 &",
            f"{v}W=$!",
            f'{{ wait "${v}P"; }} 2>/dev/null; {v}RC=$?',
            f'{{ kill -USR1 "${v}W"; wait "${v}W"; }} 2>/dev/null; '
            f"[ $? -ne {_TIMED_OUT} ] || {v}TO=1",
        ]
    else:
        # With job control on, bash puts a job in a process group of its own (no program is
        # started for it), whose id is the job's pid: the job writes it to the run's record
        # before the command starts, and the wrapper blanks it when the job ended. While the
        # job runs the wrapper's stderr is parked on fd 9 (closed for the command), so job
        # notices (a job killed by a signal) go to /dev/null. Like a background job without job
        # control, the command ignores SIGINT and SIGQUIT; the subshell sees none of the
        # wrapper's variables but the command text, evaluated after a space (a command that
        # starts with "-" is a command, not eval's option).
        lines += [
            "set -m 2>/dev/null; exec 9>&2 2>/dev/null",
            f"( trap '' INT QUIT; printf '%10d\\n' \"$BASHPID\" 1<> {group}; "
            f'unset -v {v}R {v}F {v}TO {v}NO {v}NE {v}RC; eval " ${v}C" ) '
            f"</dev/null >{out} 2>{err} 9>&-; {v}RC=$?",
            f"exec 2>&9 9>&-; set +m 2>/dev/null; {_clear_group(group)}",
        ]
    lines += [_sizes(v, out, err), f"else {v}TO=2; fi"]
    lines += _report(v, base, out, err, nonce=nonce, cap=cap, to_file=to_file)
    # With ``reset``, "$@" still lists the files of earlier runs.
    keep = keep_files and not reset
    files = (out, err) if watchdog or keep else (out, err, group)
    lines.append(_remove(files, keep=keep))
    return "\n".join(lines) + "\n"


def build_report(
    *,
    run_dir: str,
    run_id: str,
    nonce: str,
    cap: int,
    marker: str,
    keep_files: bool = False,
    grace: float = KILL_GRACE_SECONDS,
) -> str:
    """The script that, after the service killed a stream-mode run without ``watchdog`` at its
    deadline (or, stopped at its deadline by the caller, still runs), first stops the process
    group the run recorded — the command's whole tree, also when the service killed the wrapper
    alone — when the record is verified to name that group, and every process holding the run's
    ``marker`` (``NAME=token`` of
    :data:`~skillruntime.core.runtime.bridge.CANCEL_MARKER_VARIABLE`, in the environment the run
    was started with): ``SIGTERM``, then up to ``grace`` seconds for the marked processes to
    end, then ``SIGKILL`` (see :func:`_kill_group`). Then it reports what the run left: the
    kept head and tail of both streams under a trailer that says the command timed out; then it
    removes the run's files (empties them with ``keep_files``). The report itself must not be
    started with ``marker`` in its environment."""
    v, base, out, err = _names(nonce, run_id)
    group = f'"{base}.p"'
    lines = [
        f'{v}R={shlex.quote(run_dir)}; {v}F="${v}R"/{run_id}',
        "set --",
        _kill_group(v, group, marker, grace),
        f"{v}RC=0; {v}TO=1; {v}NO=0; {v}NE=0",
        f"if [ -e {out} ] || [ -e {err} ]; then : >> {out}; : >> {err}; fi 2>/dev/null",
        _sizes(v, out, err),
        *_report(v, base, out, err, nonce=nonce, cap=cap, to_file=False),
        _remove((out, err) if keep_files else (out, err, group), keep=keep_files),
    ]
    return "\n".join(lines) + "\n"


_PLAIN = frozenset(range(0x20, 0x7F)) - {ord("\\"), ord("'"), ord("!")}
_ESCAPES = {
    chr(byte): ("\\n" if byte == 10 else f"\\x{byte:02x}")
    for byte in range(256)
    if byte not in _PLAIN
}
"""How ``shell_line`` writes each byte outside :data:`_PLAIN` in a ``$'...'`` string, keyed by
the character that the byte decodes to as Latin-1."""
_NOT_PLAIN = re.compile("[^" + re.escape("".join(map(chr, sorted(_PLAIN)))) + "]")


def shell_line(script: str) -> str:
    """``script`` as one printable-ASCII line for a PTY, run with ``eval`` in a subshell.

    The script is written as a bash ``$'...'`` string (every byte outside printable ASCII, and
    ``\\``, ``'`` and ``!`` — which an interactive shell would take for history expansion — as
    ``\\xHH``), which costs the shell nothing to decode; when that is longer than base64 (text
    that is mostly non-ASCII), as base64 decoded by ``base64 -d``. A PTY sees neither newlines,
    tabs nor non-ASCII text, and ``exit`` or ``cd`` inside the script cannot end or change the
    persistent shell.
    """
    data = script.encode("utf-8", "surrogateescape")
    quoted = _NOT_PLAIN.sub(lambda match: _ESCAPES[match.group()], data.decode("latin-1"))
    encoded = base64.b64encode(data).decode("ascii")
    if len(quoted) <= len(encoded) + 24:
        return f"(eval $'{quoted}')"
    return f"(eval \"$(printf '%s' '{encoded}' | base64 -d)\")"


def json_script(script: str) -> str:
    """``script`` as a JSON string can carry it (the ``/v1/bash`` API): itself, or, when it holds
    bytes that are not UTF-8 (a path decoded with ``surrogateescape``, as listings give them), an
    ``eval`` of those exact bytes sent in base64."""
    try:
        script.encode("utf-8")
    except UnicodeEncodeError:
        encoded = base64.b64encode(script.encode("utf-8", "surrogateescape")).decode("ascii")
        return f"eval \"$(printf '%s' '{encoded}' | command -p base64 -d)\""
    return script


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


def parse_inline_result(nonce: str, output: str) -> WrapperOutcome | None:
    """The result a file-mode run printed to the session's output when the command printed
    nothing; ``None`` when the output does not hold it (then the result file has it)."""
    found = re.search(rf"{_TAG}{re.escape(nonce)} (-?[0-9]+) ([0-9]) 0 0(?:\r?\n|$)", output)
    if found is None:
        return None
    rc, flag = int(found.group(1)), int(found.group(2))
    return WrapperOutcome(
        exit_code=-1 if flag == 1 else rc,
        timed_out=flag == 1,
        missing_cwd=flag == 2,
        stdout=b"",
        stderr=b"",
        stdout_size=0,
        stderr_size=0,
    )


def parse_file_result(nonce: str, data: bytes, cap: int) -> WrapperOutcome | None:
    """Parse a file-mode result file; ``None`` when it is not a complete result of this run."""
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
    if len(rest) != kept_out + kept_size(err_size, cap):
        return None  # written only in part (the wrapper was killed while writing it)
    return WrapperOutcome(
        exit_code=-1 if flag == 1 else rc,
        timed_out=flag == 1,
        missing_cwd=flag == 2,
        stdout=rest[:kept_out],
        stderr=rest[kept_out:],
        stdout_size=out_size,
        stderr_size=err_size,
    )
