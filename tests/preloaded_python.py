"""Run a Python script as a new process whose heavy imports were made once, not once per process.

Tests that prove what several processes do together (eight nodes racing for one conversation, a
run paused in one process and resumed in another) start many short-lived interpreters, and most of
each one's CPU goes to importing the same libraries again: about 1.5 s for the OpenSandbox SDK,
SQLAlchemy and the database drivers, about 5 s for the Agents SDK (its MCP types are pydantic
models built at import). :class:`Popen` starts the script instead in a child of
:mod:`multiprocessing`'s fork server, which imported :data:`PRELOAD` once per test process. The
child is still a process of its own, with its own pid, memory, connections, clients and exit
status, started from a single-threaded server (no lock or thread of the test process is
inherited); only the module imports are already done.

What the script sees is what ``python SCRIPT ARGS...`` would give it: ``sys.argv``, ``sys.path``
as a fresh interpreter computes it (the script's folder, ``PYTHONPATH`` of its environment, then
the installed paths), the given environment and working directory, and the given standard
streams (pipes, files or the caller's own). Its exit status follows Python's rules (``SystemExit``
codes, 1 on an uncaught exception with the traceback on stderr), and ``atexit`` handlers run.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import multiprocessing
import os
import runpy
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from multiprocessing import reduction
from typing import IO, Any

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL

PRELOAD = (
    "skillruntime.core",
    "skillruntime.core.conversations.sql",
    "skillruntime.core.artifacts",
    "skillruntime.local",
    "skillruntime.opensandbox",
    "opensandbox",
    "opensandbox.sync.sandbox",
    "sqlalchemy",
    "psycopg",
    "pymysql",
    "fsspec",
    "agents",
    "skillruntime.openai_agents",
)
"""Modules the fork server imports before it forks any script (a missing one is passed over)."""

CONTEXT = multiprocessing.get_context("forkserver")
"""The fork server's context, also for ``ProcessPoolExecutor(mp_context=...)`` and managers (their
functions must be importable by name, as with ``spawn``)."""
CONTEXT.set_forkserver_preload(list(PRELOAD))


@cache
def _fresh_base_path() -> tuple[str, ...]:
    """``sys.path`` of a fresh interpreter without a script and without ``PYTHONPATH``."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    return tuple(json.loads(done.stdout))


_MAIN_LOCK = threading.Lock()


@contextlib.contextmanager
def _plain_main() -> Iterator[None]:
    """Start a child with an empty ``__main__`` in its preparation data: ``multiprocessing``
    would otherwise import the test process's main module (pytest's, or xdist's) in the child."""
    with _MAIN_LOCK:
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            sys.modules["__main__"] = main


class _PassedFd:
    """A descriptor handed to the child: pickled as a duplicate the fork server passes on."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (_received, (reduction.DupFd(self.fd),))


def _received(duplicate: Any) -> int:
    return int(duplicate.detach())


def _child(
    script: str,
    arguments: list[str],
    env: dict[str, str],
    cwd: str | None,
    fds: list[int],
    base_path: tuple[str, ...],
) -> None:
    # Out of the way first: a received descriptor may have landed on 0, 1 or 2 itself.
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in fds]
    for fd in fds:
        os.close(fd)
    for number, fd in enumerate(high):
        os.dup2(fd, number)
        os.close(fd)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own stream
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115
    os.environ.clear()
    os.environ.update(env)
    if cwd is not None:
        os.chdir(cwd)
    folder = os.path.dirname(os.path.abspath(script))
    # As site.py does: PYTHONPATH entries made absolute (an empty one is the working
    # directory), duplicates dropped.
    extra = env["PYTHONPATH"].split(os.pathsep) if env.get("PYTHONPATH") else []
    entries = [folder, *(os.path.abspath(entry) for entry in extra), *base_path]
    sys.path[:] = list(dict.fromkeys(entries))
    sys.argv = [script, *arguments]
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()


def _child_end(spec: int | IO[Any] | None, number: int) -> tuple[int, int | None]:
    """The descriptor the child gets as stream ``number`` and the caller's end of a pipe."""
    if spec == PIPE:
        read, write = os.pipe()
        return (read, write) if number == 0 else (write, read)
    if spec == DEVNULL:
        return os.open(os.devnull, os.O_RDWR), None
    if spec is None:
        return os.dup(number), None
    if isinstance(spec, int):
        return os.dup(spec), None
    return os.dup(spec.fileno()), None


class Popen:
    """``subprocess.Popen([sys.executable, SCRIPT, *ARGS], ...)`` started from the fork server.

    Supports what the suite's multi-process tests use: ``stdin``/``stdout``/``stderr`` as
    ``PIPE``, ``DEVNULL``, a file or ``None`` (inherit), ``text``, ``env`` and ``cwd``; and
    ``pid``, ``returncode``, ``poll``, ``wait``, ``communicate``, ``kill``, ``terminate``,
    ``send_signal`` with :class:`subprocess.Popen`'s meaning (a negative return code names the
    signal that ended the process).
    """

    def __init__(
        self,
        args: Sequence[str],
        *,
        stdin: int | IO[Any] | None = None,
        stdout: int | IO[Any] | None = None,
        stderr: int | IO[Any] | None = None,
        text: bool = False,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        if len(args) < 2 or args[0] != sys.executable or args[1].startswith("-"):
            raise ValueError("preloaded_python.Popen runs [sys.executable, SCRIPT, *ARGS]")
        self.args = list(args)
        ends = [_child_end(spec, number) for number, spec in enumerate((stdin, stdout, stderr))]
        mode = "" if text else "b"
        self.stdin: IO[Any] | None = None
        self.stdout: IO[Any] | None = None
        self.stderr: IO[Any] | None = None
        if ends[0][1] is not None:
            self.stdin = open(ends[0][1], "w" + mode, buffering=-1 if text else 0)  # noqa: SIM115
        if ends[1][1] is not None:
            self.stdout = open(ends[1][1], "r" + mode)  # noqa: SIM115
        if ends[2][1] is not None:
            self.stderr = open(ends[2][1], "r" + mode)  # noqa: SIM115
        self._process = CONTEXT.Process(
            target=_child,
            args=(
                str(args[1]),
                [str(argument) for argument in args[2:]],
                dict(os.environ if env is None else env),
                None if cwd is None else os.fspath(cwd),
                [_PassedFd(child) for child, _ in ends],
                _fresh_base_path(),
            ),
            name=os.path.basename(str(args[1])),
        )
        try:
            with _plain_main():
                self._process.start()
        finally:
            for child, _ in ends:
                os.close(child)
        assert self._process.pid is not None
        self.pid: int = self._process.pid
        self._output: dict[str, Any] = {}
        self._communicating: list[threading.Thread] | None = None

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def send_signal(self, signal_number: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, signal_number)

    def kill(self) -> None:
        if self._process.exitcode is None:
            self._process.kill()

    def terminate(self) -> None:
        if self._process.exitcode is None:
            self._process.terminate()

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        """Send ``input``, close stdin, read stdout and stderr to their end and wait; on a
        timeout :class:`subprocess.TimeoutExpired`, after which it may be called again."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._communicating is None:
            self._communicating = []
            if self.stdin is not None:
                self._communicating.append(self._start(self._feed, input))
            for name in ("stdout", "stderr"):
                if getattr(self, name) is not None:
                    self._communicating.append(self._start(self._drain, name))
        for thread in self._communicating:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return self._output.get("stdout"), self._output.get("stderr")

    def _start(self, target: Any, argument: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=(argument,), daemon=True)
        thread.start()
        return thread

    def _feed(self, data: Any) -> None:
        assert self.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            if data:
                self.stdin.write(data)
            self.stdin.close()

    def _drain(self, name: str) -> None:
        stream = getattr(self, name)
        self._output[name] = stream.read()
        stream.close()

    def __enter__(self) -> Popen:
        return self

    def __exit__(self, *exc: object) -> None:
        for stream in (self.stdout, self.stderr, self.stdin):
            if stream is not None and not stream.closed:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()
        self.wait()


def run(
    args: Sequence[str],
    *,
    capture_output: bool = False,
    text: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    check: bool = False,
    input: Any = None,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` of :class:`Popen`: the finished process (killed on a timeout)."""
    pipe = PIPE if capture_output else None
    process = Popen(
        args,
        stdin=PIPE if input is not None else None,
        stdout=pipe,
        stderr=pipe,
        text=text,
        env=env,
        cwd=cwd,
    )
    try:
        out, err = process.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    completed = subprocess.CompletedProcess(list(args), process.wait(), out, err)
    if check:
        completed.check_returncode()
    return completed
