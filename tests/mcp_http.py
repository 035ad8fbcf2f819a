"""The ``skillruntime mcp serve --transport http`` server as a subprocess, and SDK clients on it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from mcp_clients import SKILLRUNTIME, Notifications


@dataclass
class HttpServer:
    """A running HTTP server process and its endpoint."""

    process: subprocess.Popen[bytes]
    url: str


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def http_server(args: Sequence[str], env: Mapping[str, str] | None = None) -> Iterator[HttpServer]:
    """Start ``skillruntime <args> --transport http --port N``; SIGTERM it on exit (it must end)."""
    port = free_port()
    process = subprocess.Popen(
        [SKILLRUNTIME, *args, "--transport", "http", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 60
        url = None
        while url is None:
            assert time.monotonic() < deadline, "the server never listened"
            line = process.stderr.readline().decode()
            assert line or process.poll() is None, "the server exited before listening"
            if "serving http://" in line:
                url = line.split("serving ", 1)[1].strip()
        yield HttpServer(process, url)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise


@asynccontextmanager
async def http_session(
    url: str, headers: Mapping[str, str] | None = None
) -> AsyncIterator[tuple[ClientSession, Notifications]]:
    """An initialized SDK client session over streamable HTTP."""
    notifications = Notifications()
    async with (
        httpx2.AsyncClient(headers=dict(headers or {}), timeout=60) as client,
        streamable_http_client(url, http_client=client) as (read_stream, write_stream),
        ClientSession(read_stream, write_stream, message_handler=notifications) as session,
    ):
        await session.initialize()
        yield session, notifications
