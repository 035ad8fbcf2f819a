"""The POSIX shell wrapper every command runs in, inside the sandbox.

execd reports output line by line (a bare ``\\r`` ends a line too, the terminators are dropped)
and never splits a line, so a command printing one huge line would arrive as one huge event that
the SDK buffers whole. The wrapper keeps the command's output off the event stream instead:

* the command runs with ``bash -c`` (``bash`` from ``/bin``, ``/usr/bin`` or ``/usr/local/bin``;
  ``/bin/sh`` where there is none), stdin from ``/dev/null``, in its own session and process
  group (``setsid``), stdout and stderr into two files of a private run directory;
* the command (not the wrapper) is started with the run's marker
  ``SKILLRUNTIME_CANCEL_MARK=<token>`` in its environment
  (:data:`~skillruntime.core.runtime.bridge.CANCEL_MARKER_VARIABLE`), which every process it
  starts inherits, also one that leaves the process group with ``setsid``;
* a watchdog in a session of its own ends the command's whole tree at the deadline (even if
  the wrapper itself is gone) as the local runtime does: ``TERM`` to the command's process group
  and to every process whose ``/proc/<pid>/environ`` holds the marker, then ``KILL`` to both
  once the group and the marked processes are gone or after ``kill_grace`` seconds
  (:data:`KILL_GRACE_SECONDS`; the wrapper kills what is left of the group and the marked
  processes as soon as the command's shell ended), and leaves a file saying it did; a ``TERM``,
  ``INT`` or ``HUP`` sent to the wrapper (execd's interrupt) kills the command's group and the
  marked processes too. A process that cleared its environment *and* left the group escapes;
* when the command has ended, each stream is sent cut to ``cap`` bytes (the head ``cap // 2``
  and the tail ``cap - cap // 2`` around the dropped middle), base64-encoded in lines of at most
  64 KiB, so the event stream never carries more than the caps, in events of bounded size, and
  the bytes (``\\r``, a missing final newline, invalid UTF-8) survive exactly;
* a trailer tagged with a per-run nonce gives the exit status, the timeout flag and the full
  size of each stream.

Stream layout (the wrapper's stdout; its stderr carries nothing)::

    <tag> O            then base64 lines: all of stdout, or its head when it was cut
    <tag> o            then base64 lines: the tail of stdout (only when it was cut)
    <tag> E / <tag> e  the same for stderr
    <tag> S RC TO NO NE   exit status, 1 if the watchdog fired (2: interrupted), byte sizes
    <tag> X            instead of all of it: the run directory could not be created
    <tag> T            the watchdog kills the wrapper with the command (no setsid, see below)

where ``<tag>`` is ``SROS`` followed by the nonce. Sections of an empty stream are left out.
Without ``setsid`` the command shares the wrapper's process group. The watchdog's ``TERM`` goes
to that group (the wrapper traps it, the watchdog ignores it) and to the marked processes: a
command that ends on it is reported as usual, then the wrapper kills the marked processes and,
once its report is out, what is left of the group, itself included. A command still running
after the grace is killed with the marked processes and the whole group, so no report can
follow: the watchdog writes ``<tag> T`` to the stream and removes the run files first, and the
result still says it timed out, but its output is lost. Without ``base64`` the trailer carries
flag 3 and no output.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
import shlex
from dataclasses import dataclass, field

from skillruntime.core.runtime.bridge import CANCEL_MARKER_VARIABLE
from skillruntime.core.runtime.output import head_tail_text

__all__ = ["WrapperOutput", "WrapperTrailer", "build_wrapper"]

_TAG = "SROS"
_LINE_CHARS = 65536
"""Width of a base64 line (a multiple of 4: each line decodes on its own)."""

FLAG_TIMED_OUT = 1
FLAG_INTERRUPTED = 2
FLAG_NO_BASE64 = 3

KILL_GRACE_SECONDS = 2.0
"""Seconds between the watchdog's ``TERM`` and its ``KILL`` of a timed-out command's process
group: the local runtime's ``DEFAULT_KILL_GRACE_SECONDS``."""
_TICK = 0.1
"""Seconds between two looks of the watchdog at the group it sent ``TERM``."""


def _marked(v: str, token: str) -> str:
    """One line defining ``{v}f`` (print the pids of the processes whose environment holds
    ``CANCEL_MARKER_VARIABLE=token``, read from ``/proc/<pid>/environ``: with one ``grep -z``
    where grep has it, one ``tr | grep`` per process otherwise) and ``{v}k SIG`` (send ``SIG``
    to all of them but the calling shell with one ``kill``). A zombie's environment reads
    empty, so an ended process is never listed. The calling shell and its helpers must not hold
    the marker themselves."""
    return (
        f"{v}m='{CANCEL_MARKER_VARIABLE}={token}'; "
        "if printf 'a\\000' | command -p grep -qz a 2>/dev/null; then "
        f'{v}f() {{ command -p grep -lzxF -- "${v}m" /proc/[0-9]*/environ 2>/dev/null '
        "| command -p sed 's#^/proc/\\([0-9]*\\)/environ$#\\1#'; }; "
        "else "
        f"{v}f() {{ for {v}d in /proc/[0-9]*; do "
        f"{{ command -p tr '\\000' '\\n' < \"${v}d/environ\"; }} 2>/dev/null "
        f'| command -p grep -qxF -- "${v}m" && echo "${{{v}d#/proc/}}"; done; }}; '
        "fi; "
        f'{v}k() {{ {v}l=; for {v}p in $({v}f); do [ "${v}p" = "$$" ] || {v}l="${v}l ${v}p"; '
        f'done; [ -z "${v}l" ] || kill -"$1" ${v}l; }}'
    )


def build_wrapper(
    *,
    command: str,
    run_dir: str,
    run_id: str,
    nonce: str,
    cap: int,
    timeout: float,
    kill_grace: float = KILL_GRACE_SECONDS,
    marker: str | None = None,
) -> str:
    """The shell text sent to execd for one command (see the module docs).

    ``marker`` is the token (letters and digits) of the run's marker
    ``CANCEL_MARKER_VARIABLE=marker``, put in the command's environment only; a fresh one when
    ``None``. It must not be in the wrapper's own environment (execd's ``envs``): the wrapper
    and its watchdog would then be taken for the command's processes.
    """
    if marker is None:
        marker = secrets.token_hex(16)
    if not re.fullmatch(r"[A-Za-z0-9]+", marker):
        raise ValueError("the marker must be made of letters and digits")
    if not re.fullmatch(r"[A-Za-z0-9]+", run_id) or not re.fullmatch(r"[A-Za-z0-9]+", nonce):
        raise ValueError("run_id and nonce must be made of letters and digits")
    if cap < 2:
        raise ValueError("cap must be at least 2 bytes")
    if kill_grace < 0:
        raise ValueError("kill_grace must not be negative")
    ticks = round(kill_grace / _TICK)
    q = shlex.quote
    v = f"_sr{nonce[:6]}"  # prefix of every wrapper variable (none is exported)
    tag = f"{_TAG}{nonce}"
    head = cap // 2
    tail = cap - head
    out, err, mark = f'"${v}F.o"', f'"${v}F.e"', f'"${v}F.t"'
    marked = _marked(v, marker)
    label = f"{CANCEL_MARKER_VARIABLE}={marker}"
    # The setsid watchdog (a program of its own: it sees none of the wrapper's functions): at
    # the deadline, TERM to the command's group and the marked processes, then KILL to both
    # once they are gone or after the grace, whichever comes first.
    watchdog = (
        f"{marked}; "
        'command -p sleep "$1" || exit 0; : > "$2"; '
        f'{{ {v}k TERM; kill -TERM -"$3"; }} 2>/dev/null; '
        'n=0; while [ $n -lt "$4" ] && { kill -0 -"$3" 2>/dev/null || '
        f'[ -n "$({v}f)" ]; }}; do command -p sleep {_TICK:g}; n=$((n+1)); done; '
        f'{{ kill -KILL -"$3"; {v}k KILL; {v}k KILL; {v}k KILL; }} 2>/dev/null'
    )
    lines = [
        "set +m 2>/dev/null",
        f'{v}R={q(run_dir)}; {v}F="${v}R"/{run_id}; {v}C={q(command)}',
        f'{{ [ -d "${v}R" ] || command -p mkdir -p -m 700 -- "${v}R"; }} 2>/dev/null',
        f"{{ : > {out} && : > {err}; }} 2>/dev/null || {{ echo '{tag} X'; exit 125; }}",
        f"{v}B=/bin/sh; for {v}x in /bin/bash /usr/bin/bash /usr/local/bin/bash; do "
        f'if [ -x "${v}x" ]; then {v}B=${v}x; break; fi; done',
        f"{v}S=0; {v}I=0; {v}RC=0; {v}NO=0; {v}NE=0; {v}K=0; {v}M=0",
        f"if command -p -v setsid >/dev/null 2>&1; then {v}S=1; fi",
        marked,
        # A background job of a shell without job control is never a process group leader, so
        # setsid does not fork: the job's pid is the id of the new session and process group.
        # "--": a command that starts with "-" is a command, not the shell's options.
        # Only the command holds the marker (not the wrapper, not the watchdog).
        f'if [ ${v}S = 1 ]; then {label} command -p setsid "${v}B" -c -- "${v}C" '
        f"</dev/null >{out} 2>{err} &",
        f'else {label} "${v}B" -c -- "${v}C" </dev/null >{out} 2>{err} & fi',
        f"{v}P=$!",
        # execd's interrupt: the command's group and the marked processes are killed (not on
        # the watchdog's own TERM to the wrapper's group, without setsid: it left its file).
        f'trap \'{v}I=1; kill -KILL -"${v}P" 2>/dev/null; [ -e {mark} ] || '
        f"{v}k KILL 2>/dev/null' TERM INT HUP",
        f"if [ ${v}S = 1 ]; then command -p setsid /bin/sh -c {shlex.quote(watchdog)} "
        f'sh {timeout:g} {mark} "${v}P" {ticks} </dev/null >/dev/null 2>&1 &',
        # Without setsid the command shares the wrapper's group: the watchdog ignores its own
        # TERM to the group (the wrapper traps it), and a command that ends on it is reported
        # as usual. One that outlives the grace is killed with the whole group, the wrapper
        # included, so no trailer can follow: the watchdog says on the stream that it fired and
        # removes the run files first. Its file goes last, after the marked processes: a wrapper
        # woken meanwhile by the end of the command's shell still sees that the watchdog fired,
        # so it kills what is left itself.
        f"else ( command -p sleep {timeout:g} >/dev/null 2>&1 || exit 0; : > {mark}; "
        f"trap '' TERM; kill -TERM 0; {v}k TERM 2>/dev/null; n=0; while [ $n -lt {ticks} ] && "
        f'kill -0 "${v}P" 2>/dev/null; do command -p sleep {_TICK:g} >/dev/null 2>&1; '
        f'n=$((n+1)); done; kill -0 "${v}P" 2>/dev/null || exit 0; '
        f"echo '{tag} T'; command -p rm -f -- {out} {err}; "
        f"{{ {v}k KILL; {v}k KILL; {v}k KILL; }} 2>/dev/null; command -p rm -f -- {mark}; "
        "kill -KILL 0 ) "
        "</dev/null 2>/dev/null & fi",
        f"{v}W=$!",
        f'wait "${v}P"; {v}RC=$?',
        f'while kill -0 "${v}P" 2>/dev/null; do wait "${v}P"; {v}RC=$?; done',
        # The command's shell ended after the watchdog's TERM: what is left of its group and
        # the marked processes (what ignored the TERM) is killed now, as the local runtime does.
        f"{v}M=0; [ ! -e {mark} ] || {v}M=1",
        f'if [ ${v}S = 1 ] && [ ${v}M = 1 ]; then kill -KILL -"${v}P" 2>/dev/null; fi',
        f'kill -KILL -"${v}W" 2>/dev/null || kill -KILL "${v}W" 2>/dev/null',
        f"if [ ${v}M = 1 ]; then {{ {v}k KILL; {v}k KILL; {v}k KILL; }} 2>/dev/null; fi",
        f"{v}TO=0; [ ${v}I = 0 ] || {v}TO={FLAG_INTERRUPTED}; "
        f"[ ${v}M = 0 ] || {v}TO={FLAG_TIMED_OUT}",
        f"if [ -s {out} ] || [ -s {err} ]; then",
        f"set -- $(command -p wc -c -- {out} {err}); {v}NO=$1; {v}NE=$3",
        f"if command -p base64 -w 0 </dev/null >/dev/null 2>&1; then {v}K=-w{_LINE_CHARS}; "
        f"elif command -p -v base64 >/dev/null 2>&1; then {v}K=; "
        f"else {v}TO={FLAG_NO_BASE64}; {v}NO=0; {v}NE=0; fi",
        "fi",
        # One stream: $1 file, $2 size, $3 section letter of the whole/head part, $4 of the tail.
        f'{v}e() {{ [ "$2" -gt 0 ] || return 0; echo "{tag} $3"; '
        f'if [ "$2" -le {cap} ]; then command -p base64 ${v}K < "$1"; '
        f'else command -p head -c {head} < "$1" | command -p base64 ${v}K; echo "{tag} $4"; '
        f'command -p tail -c {tail} < "$1" | command -p base64 ${v}K; fi; }}',
        f'{v}e {out} "${v}NO" O o',
        f'{v}e {err} "${v}NE" E e',
        f'echo "{tag} S ${v}RC ${v}TO ${v}NO ${v}NE"',
        f"command -p rm -f -- {out} {err} {mark}",
        # Without setsid, what is left of a timed-out command shares the wrapper's group: the
        # report is out, the group (the wrapper included) goes.
        f"if [ ${v}S = 0 ] && [ ${v}M = 1 ]; then kill -KILL 0; fi",
    ]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class WrapperTrailer:
    """What the trailer reported: exit status, flag (see the module docs) and stream sizes."""

    exit_code: int
    flag: int
    stdout_size: int
    stderr_size: int


@dataclass
class _Section:
    data: bytearray = field(default_factory=bytearray)


class WrapperOutput:
    """Collects the wrapper's stdout line events into bounded stdout/stderr heads and tails.

    Memory is bounded by the cap: no section keeps more than ``cap`` bytes, whatever arrives.
    """

    def __init__(self, nonce: str, cap: int) -> None:
        self._prefix = f"{_TAG}{nonce} "
        self._cap = cap
        self._sections = {letter: _Section() for letter in "OoEe"}
        self._current: _Section | None = None
        self.trailer: WrapperTrailer | None = None
        self.setup_failed = False
        self.malformed = False
        self.watchdog_fired = False
        """The watchdog said it kills the command together with the wrapper (no ``setsid``)."""

    def add_line(self, text: str) -> bool:
        """Feed one stdout line event; ``True`` once the trailer (or a setup failure) arrived,
        after which nothing more is expected."""
        if self.trailer is not None or self.setup_failed:
            return True
        if text.startswith(self._prefix):
            self._marker(text[len(self._prefix) :].split())
            return self.trailer is not None or self.setup_failed
        section = self._current
        if section is None:
            self.malformed = True
            return False
        try:
            data = base64.b64decode(text.strip(), validate=True)
        except (binascii.Error, ValueError):
            self.malformed = True
            return False
        room = self._cap - len(section.data)
        section.data += data[: max(room, 0)]
        return False

    def _marker(self, fields: list[str]) -> None:
        if not fields:
            self.malformed = True
        elif fields[0] in self._sections:
            self._current = self._sections[fields[0]]
        elif fields[0] == "X":
            self.setup_failed = True
        elif fields[0] == "T":
            self.watchdog_fired = True
            self._current = None
        elif fields[0] == "S" and len(fields) == 5:
            try:
                rc, flag, out_size, err_size = (int(x) for x in fields[1:])
            except ValueError:
                self.malformed = True
                return
            self.trailer = WrapperTrailer(rc, flag, out_size, err_size)
            self._current = None
        else:
            self.malformed = True

    def stdout(self) -> tuple[str, bool]:
        """``(text, truncated)`` of stdout, rendered like every runtime's cut output."""
        size = self.trailer.stdout_size if self.trailer else None
        return self._render("O", "o", size)

    def stderr(self) -> tuple[str, bool]:
        """``(text, truncated)`` of stderr."""
        size = self.trailer.stderr_size if self.trailer else None
        return self._render("E", "e", size)

    def _render(self, whole: str, tail: str, size: int | None) -> tuple[str, bool]:
        head_bytes = self._sections[whole].data
        tail_bytes = self._sections[tail].data
        total = size if size is not None else len(head_bytes) + len(tail_bytes)
        return head_tail_text(head_bytes, tail_bytes, total)
