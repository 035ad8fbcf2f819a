"""A TCP proxy on 127.0.0.1 that passes, resets, refuses, blackholes or delays connections.

``FaultProxy(port)`` forwards ``127.0.0.1:<proxy.port>`` to ``127.0.0.1:<port>``. Its mode
changes what happens from then on:

* ``"pass"``: bytes are forwarded both ways;
* ``"reset"``: every open connection and every new one is reset (RST, no FIN);
* ``"refuse"``: the listening socket is closed, so new connections are refused; open ones are
  reset (``"pass"`` listens again on the same port);
* ``"blackhole"``: new connections are accepted and never answered (nothing reaches the server)
  and open ones stop carrying bytes in either direction, like a link that went silent;
* ``"delay"``: every chunk is forwarded ``delay`` seconds late.

``fail_after_commit("reset" | "blackhole")`` arms a one-shot fault for the next ``COMMIT`` of a
transaction that wrote (``INSERT``, ``UPDATE`` or ``DELETE``): the COMMIT reaches the server (the
transaction commits) but its answer never reaches the client, which sees a reset or silence.
``connections`` and ``faults`` count accepted connections and injected faults.
"""

from __future__ import annotations

import contextlib
import re
import selectors
import socket
import struct
import threading
import time
from types import TracebackType

MODES = ("pass", "reset", "refuse", "blackhole", "delay")
_COMMIT = re.compile(rb"\bcommit\b", re.IGNORECASE)
_WRITE = re.compile(rb"\b(insert|update|delete)\b", re.IGNORECASE)
_POLL = 0.02


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with an RST instead of a FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class _Link:
    """One client connection and, unless it is blackholed from the start, its server side."""

    def __init__(self, proxy: FaultProxy, client: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server: socket.socket | None = None
        self.closed = threading.Event()
        self.commit_fault: str | None = None  # armed on this link once COMMIT went through
        self.wrote = False  # the current transaction sent a write

    def run(self) -> None:
        proxy = self.proxy
        try:
            if proxy.mode == "blackhole":
                self._swallow()
                return
            try:
                self.server = socket.create_connection(("127.0.0.1", proxy.target_port), 5)
            except OSError:
                _reset(self.client)
                return
            self._pump()
        finally:
            self.close(reset=False)

    def _swallow(self) -> None:
        """Accept bytes and answer nothing until the mode changes or the client leaves."""
        self.client.setblocking(False)
        while not self.closed.is_set() and self.proxy.mode == "blackhole":
            with contextlib.suppress(BlockingIOError, InterruptedError):
                if not self.client.recv(65536):
                    return
            time.sleep(_POLL)
        if self.proxy.mode in ("reset", "refuse"):
            self.close(reset=True)

    def _pump(self) -> None:
        assert self.server is not None
        selector = selectors.DefaultSelector()
        selector.register(self.client, selectors.EVENT_READ, self.server)
        selector.register(self.server, selectors.EVENT_READ, self.client)
        try:
            while not self.closed.is_set():
                mode = self.proxy.mode
                if mode in ("reset", "refuse"):
                    self.close(reset=True)
                    return
                if mode == "blackhole":
                    time.sleep(_POLL)  # hold everything: neither side hears anything
                    continue
                for key, _ in selector.select(_POLL):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    target: socket.socket = key.data
                    try:
                        data = source.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    if not self._forward(source, target, data):
                        return
        finally:
            selector.close()

    def _forward(self, source: socket.socket, target: socket.socket, data: bytes) -> bool:
        proxy = self.proxy
        from_server = source is self.server
        if from_server and self.commit_fault is not None:
            fault, self.commit_fault = self.commit_fault, None
            if fault == "reset":
                self.close(reset=True)
                return False
            self._hold()
            return False
        if proxy.mode == "delay":
            time.sleep(proxy.delay)
        try:
            target.sendall(data)
        except OSError:
            return False
        if not from_server:
            self.wrote = self.wrote or bool(_WRITE.search(data))
            if _COMMIT.search(data):
                if self.wrote:
                    self.commit_fault = proxy.take_commit_fault()
                self.wrote = False
        return True

    def _hold(self) -> None:
        """Swallow the server's answers from now on (the client hears nothing)."""
        assert self.server is not None
        self.server.setblocking(False)
        while not self.closed.is_set() and self.proxy.mode not in ("reset", "refuse"):
            with contextlib.suppress(BlockingIOError, InterruptedError, OSError):
                if not self.server.recv(65536):
                    break
            time.sleep(_POLL)
        self.close(reset=True)

    def close(self, *, reset: bool) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        if reset:
            _reset(self.client)
        else:
            with contextlib.suppress(OSError):
                self.client.close()
        if self.server is not None:
            with contextlib.suppress(OSError):
                self.server.close()
        self.proxy.forget(self)


class FaultProxy:
    """The proxy; a context manager (see the module docs)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.delay = 0.0
        self.connections = 0
        self.faults = 0
        self._mode = "pass"
        self._lock = threading.Lock()
        self._links: set[_Link] = set()
        self._listener: socket.socket | None = None
        self._commit_faults: list[str] = []
        self._stopped = threading.Event()

    @property
    def mode(self) -> str:
        return self._mode

    def __enter__(self) -> FaultProxy:
        self._listen()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if self._mode in ("reset", "refuse"):
                _reset(client)
                continue
            link = _Link(self, client)
            with self._lock:
                self.connections += 1
                self._links.add(link)
            threading.Thread(target=link.run, daemon=True).start()

    def set_mode(self, mode: str, *, delay: float = 0.0) -> None:
        """Switch to ``mode`` (one of :data:`MODES`); ``delay`` is for ``"delay"``."""
        if mode not in MODES:
            raise ValueError(f"unknown proxy mode {mode!r}")
        with self._lock:
            previous, self._mode = self._mode, mode
            self.delay = delay
            if mode != "pass":
                self.faults += 1
        if mode == "refuse" and self._listener is not None:
            self._stop_listening()
        if mode != "refuse" and previous == "refuse" and self._listener is None:
            self._listen()

    def _stop_listening(self) -> None:
        """Close the listening socket for real: a thread blocked in ``accept`` would otherwise
        keep it listening (``shutdown`` wakes that thread; ``close`` alone does not)."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            listener.close()

    def fail_after_commit(self, kind: str) -> None:
        """Lose the answer to the next COMMIT: ``"reset"`` or ``"blackhole"`` that connection."""
        if kind not in ("reset", "blackhole"):
            raise ValueError(f"unknown commit fault {kind!r}")
        with self._lock:
            self._commit_faults.append(kind)

    def take_commit_fault(self) -> str | None:
        with self._lock:
            if not self._commit_faults:
                return None
            self.faults += 1
            return self._commit_faults.pop(0)

    def pending_commit_faults(self) -> int:
        with self._lock:
            return len(self._commit_faults)

    def forget(self, link: _Link) -> None:
        with self._lock:
            self._links.discard(link)

    def close(self) -> None:
        """Stop listening and close every connection."""
        if self._listener is not None:
            self._stop_listening()
        with self._lock:
            links = list(self._links)
        for link in links:
            link.close(reset=True)
