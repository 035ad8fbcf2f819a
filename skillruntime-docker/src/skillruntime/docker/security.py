"""The container's isolation settings: safe defaults a user may loosen, and what is never allowed.

Every container the runtime creates runs with no network (``network_mode="none"``), every
capability dropped (``cap_drop=["ALL"]``, ``cap_add`` puts some back), ``no-new-privileges``, a
process limit, memory and CPU limits, and never ``privileged``. No bind may bring the engine's
own socket (``docker.sock``, ``containerd.sock``, ``podman.sock`` or the directory holding one)
into the container: such a bind is refused before anything is created.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ENGINE_SOCKETS", "ContainerSecurity", "check_binds", "parse_memory"]

ENGINE_SOCKETS = (
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/var/run/containerd/containerd.sock",
    "/run/podman/podman.sock",
)
"""Host paths of engine sockets; binding one (or a directory above one) is refused."""

_SOCKET_NAMES = ("docker.sock", "containerd.sock", "podman.sock", "dockershim.sock")
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def _host_path(bind: str) -> str:
    host = bind.split(":", 1)[0]
    return posixpath.normpath(host) if host.startswith("/") else host


def check_binds(binds: Iterable[str]) -> None:
    """Raise :class:`ValueError` for a bind that would bring an engine socket into the container.

    A bind is ``host:container[:mode]``. Its host path is refused when it names a socket of
    :data:`ENGINE_SOCKETS`, ends in a known socket name, or is a directory holding one of them
    (``/``, ``/var/run``, ``/run``…).
    """
    for bind in binds:
        host = _host_path(bind)
        if posixpath.basename(host) in _SOCKET_NAMES:
            raise ValueError(f"refusing to bind an engine socket into the container: {host}")
        for socket in ENGINE_SOCKETS:
            if host.startswith("/") and (
                socket == host or socket.startswith(host.rstrip("/") + "/")
            ):
                raise ValueError(
                    f"refusing to bind {host}: it holds the engine socket {socket}, which would "
                    "give the container control of the engine"
                )


def parse_memory(text: str) -> int:
    """Bytes of a memory size such as ``512m``, ``1g`` or ``1073741824``."""
    value = text.strip().lower().removesuffix("ib").removesuffix("b")
    unit = value[-1:] if value[-1:].isalpha() else ""
    number = value[: len(value) - len(unit)]
    if unit not in _UNITS or not number.replace(".", "", 1).isdigit():
        raise ValueError(f"not a memory size: {text!r} (use e.g. 512m or 1g)")
    size = int(float(number) * _UNITS[unit])
    if size < 6 * 1024 * 1024:
        raise ValueError("the memory limit must be at least 6 MiB (the engine's minimum)")
    return size


@dataclass(frozen=True)
class ContainerSecurity:
    """The isolation of the runtime's containers (see the module docs for the defaults)."""

    network_mode: str = "none"
    cap_add: Sequence[str] = ()
    pids_limit: int = 256
    memory_bytes: int = 1024**3
    cpus: float = 1.0
    read_only_root: bool = False
    no_new_privileges: bool = True
    binds: Sequence[str] = ()
    extra_labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_binds(self.binds)
        if self.pids_limit < 1:
            raise ValueError("pids_limit must be at least 1")
        if self.cpus <= 0:
            raise ValueError("cpus must be positive")
        if self.network_mode.startswith("container:"):
            raise ValueError("network_mode container:<id> would join another container's network")

    def host_config(self) -> dict[str, Any]:
        """Keyword arguments of ``APIClient.create_host_config`` (the binds are added by the
        runtime, together with the conversation's volume)."""
        return {
            "network_mode": self.network_mode,
            "cap_drop": ["ALL"],
            "cap_add": list(self.cap_add) or None,
            "security_opt": ["no-new-privileges"] if self.no_new_privileges else None,
            "pids_limit": self.pids_limit,
            "mem_limit": self.memory_bytes,
            "memswap_limit": self.memory_bytes,
            "nano_cpus": int(self.cpus * 1e9),
            "read_only": self.read_only_root,
            "privileged": False,
            "init": True,
        }
