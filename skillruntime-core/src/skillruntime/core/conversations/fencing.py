"""Fencing on takeover: a command must not outlive the lease of the node that started it.

When a node dies while its command runs, the command may go on (a container engine keeps the
exec alive; on the host it is orphaned). After the TTL another node takes the lease over and
would run the next command of the conversation while the orphan still runs. So every command an
exclusive runtime runs under the lease carries its *fence* in its environment,
:data:`FENCE_VARIABLE` ``=<lease_key>:<token>`` (:func:`fence_value`), and before the first
operation under a lease that was taken over (:func:`~.lease_rules.is_takeover`) the guard runs
:func:`fence_request`: one POSIX ``sh`` script that kills every process of the sandbox whose
environment carries a fence of the same lease key with a lower token, and waits (bounded) until
none is left. Its outcome is judged by :func:`check_fence_result`, which raises
:class:`~skillruntime.core.errors.LeaseFencingError` when it failed: the lease is then not used.

Sans-I/O: this module only builds the request and judges its result. The limits (a command
that clears its environment escapes the scan) are told in docs/conversation-stores.md,
"Nodes dying".
"""

from __future__ import annotations

from ..errors import LeaseFencingError
from ..models import SkillExecutionRequest, SkillExecutionResult
from .spi import ConversationLease

__all__ = [
    "FENCE_VARIABLE",
    "FENCE_WAIT_SECONDS",
    "check_fence_result",
    "fence_command",
    "fence_request",
    "fence_value",
]

FENCE_VARIABLE = "SKILLRUNTIME_FENCE"
"""The environment variable that carries a command's fence, ``<lease_key>:<token>``."""

FENCE_WAIT_SECONDS = 10
"""How long the fence command waits for the fenced processes to be gone."""


def fence_value(lease: ConversationLease) -> str:
    """The fence of the commands run under ``lease``."""
    return f"{lease.lease_key}:{lease.token}"


def _quote(text: str) -> str:
    """``text`` single-quoted for ``sh``."""
    return "'" + text.replace("'", "'\\''") + "'"


_SCRIPT = r"""
prefix="$var=$key:"
if printf 'a\000' | grep -qz a 2>/dev/null; then
    # One grep over every environment (NUL-separated entries) for the candidates.
    candidates() { grep -lzF -e "$prefix" /proc/[0-9]*/environ 2>/dev/null; }
else
    candidates() { for file in /proc/[0-9]*/environ; do echo "$file"; done; }
fi
end=$(( $(date +%s) + wait ))
killed=0
while :; do
    left=0
    for file in $(candidates); do
        pid=${file#/proc/}
        pid=${pid%/environ}
        [ "$pid" = "$$" ] && continue
        fence=$(tr '\000' '\n' <"$file" 2>/dev/null | grep -F -e "$prefix" | head -n 1)
        case $fence in
            "$prefix"*) found=${fence#"$prefix"} ;;
            *) continue ;;
        esac
        case $found in
            '' | *[!0-9]*) continue ;;
        esac
        [ "$found" -lt "$token" ] || continue
        stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
        fields=${stat##*) }
        set -- $fields
        kill -KILL "$pid" 2>/dev/null && killed=$((killed + 1))
        # Its group too, when it leads one: the processes of a fenced command that cleared
        # their environment but stayed in its group.
        [ "${3:-}" = "$pid" ] && kill -KILL -- "-$pid" 2>/dev/null
        left=$((left + 1))
    done
    if [ "$left" -eq 0 ]; then
        echo "fence: killed $killed process(es)"
        exit 0
    fi
    if [ "$(date +%s)" -ge "$end" ]; then
        echo "fence: $left process(es) of an earlier holder still run after ${wait}s" >&2
        exit 1
    fi
    sleep 0.1
done
"""


def fence_command(lease_key: str, token: int, wait_seconds: int = FENCE_WAIT_SECONDS) -> str:
    """The ``sh`` script that kills the processes fenced with ``lease_key`` and a token below
    ``token`` (and the process groups they lead), then waits up to ``wait_seconds`` until
    none is left: exit status 0 when none is, 1 when some still run.

    It reads ``/proc/<pid>/environ`` (the processes it may read: those of its user, or all as
    root): one ``grep -z`` lists the candidates where grep has ``-z``, each is then read
    with ``tr``. It needs only ``grep``, ``tr``, ``head``, ``cat``, ``date`` and ``sleep``
    (busybox has them) and never kills a process without such a fence: on a host it cannot hit
    another conversation's commands (another lease key) or unrelated processes.
    """
    return (
        f"var={_quote(FENCE_VARIABLE)}; key={_quote(lease_key)}; "
        f"token={_quote(str(int(token)))}; wait={_quote(str(int(wait_seconds)))}" + _SCRIPT
    )


def fence_request(
    lease: ConversationLease, wait_seconds: int = FENCE_WAIT_SECONDS
) -> SkillExecutionRequest:
    """The command that stops what earlier holders of ``lease``'s key left running (it carries
    no fence itself)."""
    return SkillExecutionRequest(
        command=fence_command(lease.lease_key, lease.token, wait_seconds),
        timeout_seconds=wait_seconds + 20,
    )


def check_fence_result(result: SkillExecutionResult, description: str) -> None:
    """Raise :class:`~skillruntime.core.errors.LeaseFencingError` unless the fence command
    succeeded."""
    if result.ok:
        return
    why = "timed out" if result.timed_out else f"exited with {result.exit_code}"
    detail = result.stderr.strip()[-300:]
    raise LeaseFencingError(
        f"the lease of {description} was taken over from a holder that did not release it, and "
        f"stopping the commands it left running failed (the fence command {why}"
        + (f": {detail}" if detail else "")
        + "); the lease is not used and expires for the next taker to try again"
    )
