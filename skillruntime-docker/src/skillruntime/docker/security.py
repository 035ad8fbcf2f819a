"""The container's isolation settings: safe defaults a user may loosen, and what is never allowed.

Every container the runtime creates runs with no network (``network_mode="none"``), every
capability dropped (``cap_drop=["ALL"]``, ``cap_add`` puts some back), ``no-new-privileges``, a
process limit, memory and CPU limits, and never ``privileged``. No bind may bring an engine's
socket into the container: not the standard ones (``docker.sock``, ``containerd.sock``,
``podman.sock``), not the socket the runtime itself talks to, not a ``DOCKER_HOST`` unix socket,
nor a directory holding one of them. For an engine on this machine (a unix socket) the bind's
source and the sockets are resolved first (``/var/run`` is ``/run``, a link to a socket is the
socket), so neither a link nor a parent directory brings one in. Such a bind is refused before
anything is created.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ENGINE_SOCKETS",
    "ContainerSecurity",
    "check_binds",
    "engine_sockets",
    "parse_memory",
]

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


def _unix_socket(address: str | None) -> str | None:
    if address and address.startswith("unix://"):
        return posixpath.normpath(address[len("unix://") :] or "/")
    return None


def engine_sockets(address: str | None) -> tuple[str, ...]:
    """The sockets a bind must not bring in besides :data:`ENGINE_SOCKETS`: the unix socket of
    the engine at ``address`` and the one ``DOCKER_HOST`` names."""
    found = [_unix_socket(address), _unix_socket(os.environ.get("DOCKER_HOST"))]
    return tuple(path for path in found if path)


def _host_path(bind: str, *, resolve: bool) -> str:
    host = bind.split(":", 1)[0]
    if not host.startswith("/"):
        return host
    return os.path.realpath(host) if resolve else posixpath.normpath(host)


def _holds(directory: str, path: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def check_binds(binds: Iterable[str], *, sockets: Iterable[str] = (), local: bool = False) -> None:
    """Raise :class:`ValueError` for a bind that would bring an engine socket into the container.

    A bind is ``host:container[:mode]``. Its host path is refused when it ends in a known socket
    name or names, or is a directory holding, a socket of :data:`ENGINE_SOCKETS` or of
    ``sockets`` (the engine's own: :func:`engine_sockets`). With ``local`` (the engine runs on
    this machine) the host path and the sockets are resolved first, links and all.
    """
    known = [*ENGINE_SOCKETS, *sockets]
    if local:
        known += [os.path.realpath(socket) for socket in known]
    for bind in binds:
        lexical = _host_path(bind, resolve=False)
        hosts = {lexical, _host_path(bind, resolve=True)} if local else {lexical}
        for host in hosts:
            if posixpath.basename(host) in _SOCKET_NAMES:
                raise ValueError(f"refusing to bind an engine socket into the container: {host}")
            for socket in known:
                if host.startswith("/") and _holds(host, socket):
                    raise ValueError(
                        f"refusing to bind {lexical}: it holds the engine socket {socket}, which "
                        "would give the container control of the engine"
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
            # A read-only image still needs a writable /tmp (the file scripts' scratch space).
            "tmpfs": {"/tmp": "rw,nosuid,nodev,size=64m"} if self.read_only_root else None,
            "privileged": False,
            "init": True,
        }
