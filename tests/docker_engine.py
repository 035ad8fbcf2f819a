"""The real Docker Engine of the Docker tests and benchmarks, and the suite's leak check.

:func:`ensure_engine` gives the engine and the test images: ``DOCKER_HOST`` when a daemon
answers there, else the private daemon of ``scripts/docker-engine.sh start`` (installed from
Debian when missing); the images are built locally by ``scripts/docker-engine.sh image``. It
runs under an exclusive lock on a file of the session's state directory, so pytest-xdist workers
start one daemon and build the images once, and the answer (or the failure) is recorded there
for the other workers. It exports ``DOCKER_HOST``, ``SKILLRUNTIME_DOCKER_TEST_IMAGE`` (busybox
and bash) and ``SKILLRUNTIME_DOCKER_TEST_PYTHON_IMAGE`` (the same with python3) into
``os.environ``. When no engine can be had (or ``SKILLRUNTIME_DOCKER_UNAVAILABLE`` gives the
reason already) it raises :class:`EngineUnavailableError` with one line
saying why (the tests fail on it; they are never skipped).

As a pytest plugin (``pytest_plugins`` of ``tests/conftest.py``), in the controlling process
(the only one under xdist that outlives every worker, or the single process without xdist):

- ``pytest_configure`` creates the session's state directory (``SKILLRUNTIME_DOCKER_SESSION``,
  inherited by the workers) and records when the session started;
- ``pytest_sessionfinish`` runs the **leak check** when a test used the engine: every container
  and volume carrying a ``skillruntime`` label (any label whose key starts with ``skillruntime``;
  on the suite's private daemon, any at all) created since the session started must be gone. A
  leak fails the session (exit status 1, one line naming what was left); on the private daemon
  the leaked objects are then removed. A daemon this session started itself is then stopped.
  On a daemon shared with other work at the same time (another test run, a benchmark), that
  work's objects count too: the suite's own runs use the private daemon
  (``scripts/run-tests.sh``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "docker-engine.sh"
SESSION_VARIABLE = "SKILLRUNTIME_DOCKER_SESSION"
IMAGE_VARIABLE = "SKILLRUNTIME_DOCKER_TEST_IMAGE"
PYTHON_IMAGE_VARIABLE = "SKILLRUNTIME_DOCKER_TEST_PYTHON_IMAGE"
DEFAULT_IMAGE = "skillruntime-test:latest"
DEFAULT_PYTHON_IMAGE = "skillruntime-test-python:latest"
"""The stable tags ``scripts/docker-engine.sh image`` gives the test images."""
UNAVAILABLE_VARIABLE = "SKILLRUNTIME_DOCKER_UNAVAILABLE"
"""Set by ``scripts/run-tests.sh`` to the reason when the daemon could not start: the Docker
tests then fail at once with it instead of trying again."""
LABEL_PREFIX = "skillruntime"
"""Containers and volumes with a label key starting with this are the suite's."""
TEST_LABEL = "skillruntime-test"
"""The label of containers and volumes the tests and benchmarks create themselves (raw
baselines), so the leak check covers them too."""
SCRIPT_TIMEOUT = 900.0
"""Seconds the script may take: installing docker.io and downloading packages included."""


class EngineUnavailableError(RuntimeError):
    """No Docker Engine could be had; the message is one line saying why."""


@dataclass(frozen=True)
class Engine:
    """A Docker Engine that answers, and the test images on it."""

    host: str
    image: str
    python_image: str
    started: bool
    """Whether this session started the daemon (then it stops it at the end)."""
    private: bool = False
    """Whether it is the suite's private daemon (then leaked objects are also removed)."""

    def client(self, **options: Any) -> Any:
        """A ``docker.DockerClient`` of this engine."""
        import docker  # type: ignore[import-untyped,unused-ignore]

        return docker.DockerClient(base_url=self.host, **options)


def _answers(host: str) -> bool:
    """The daemon at ``host`` answers a ping."""
    import docker  # type: ignore[import-untyped,unused-ignore]

    try:
        client = docker.DockerClient(base_url=host, timeout=10)
    except Exception:
        return False
    try:
        return bool(client.ping())
    except Exception:
        return False
    finally:
        client.close()


def _script(command: str, environment: dict[str, str]) -> str:
    """Run ``scripts/docker-engine.sh COMMAND``; its stdout, or :class:`EngineUnavailableError` with
    the script's own one-line reason."""
    try:
        done = subprocess.run(
            ["bash", str(SCRIPT), command],
            env=environment,
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise EngineUnavailableError(
            f"scripts/docker-engine.sh {command} took more than {SCRIPT_TIMEOUT:g} s"
        ) from error
    for line in done.stderr.splitlines():
        logger.info("%s", line)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        reason = lines[-1] if lines else f"exit status {done.returncode}"
        raise EngineUnavailableError(f"scripts/docker-engine.sh {command} failed: {reason}")
    return done.stdout


def _exports(text: str) -> dict[str, str]:
    """The ``export NAME=VALUE`` lines of ``docker-engine.sh env`` (values need no unquoting:
    they are paths and image names)."""
    exports: dict[str, str] = {}
    for line in text.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        if name and value:
            exports[name] = value
    return exports


def _find_engine() -> Engine:
    """The engine and images, starting the private daemon when ``DOCKER_HOST`` has none."""
    environment = dict(os.environ)
    private = _exports(_script("env", environment))
    host = environment.get("DOCKER_HOST", "")
    started = False
    if not host or not _answers(host):
        if host:
            logger.warning("no Docker daemon answers at DOCKER_HOST=%s; using a private one", host)
        environment.pop("DOCKER_HOST", None)
        was_running = _answers(private["DOCKER_HOST"])
        _script("start", environment)
        started = not was_running
        host = private["DOCKER_HOST"]
    environment["DOCKER_HOST"] = host
    _script("image", environment)
    return Engine(
        host=host,
        image=os.environ.get(IMAGE_VARIABLE) or private[IMAGE_VARIABLE],
        python_image=os.environ.get(PYTHON_IMAGE_VARIABLE) or private[PYTHON_IMAGE_VARIABLE],
        started=started,
        private=host == private["DOCKER_HOST"],
    )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def state_directory() -> Path:
    """The session's state directory (``SKILLRUNTIME_DOCKER_SESSION``), or, outside a test
    session (a benchmark run on its own), a fixed one under the temporary directory."""
    named = os.environ.get(SESSION_VARIABLE)
    if named:
        return Path(named)
    return Path(tempfile.gettempdir()) / "skillruntime-docker-state"


def ensure_engine() -> Engine:
    """The engine and images of this session, found (or started and built) once per session;
    exported into ``os.environ``. :class:`EngineUnavailableError` when there is none."""
    state = state_directory()
    record = state / "engine.json"
    unavailable = os.environ.get(UNAVAILABLE_VARIABLE)
    with _locked(state / "engine.lock"):
        known: dict[str, Any]
        if record.is_file() and os.environ.get(SESSION_VARIABLE):
            known = json.loads(record.read_text())
        else:
            if unavailable:
                known = {"error": f"no Docker Engine: {unavailable}"}
            else:
                try:
                    found = _find_engine()
                except EngineUnavailableError as error:
                    known = {"error": str(error)}
                else:
                    known = {
                        "host": found.host,
                        "image": found.image,
                        "python_image": found.python_image,
                        "started": found.started,
                        "private": found.private,
                    }
            if os.environ.get(SESSION_VARIABLE):
                record.write_text(json.dumps(known))
    if "error" in known:
        raise EngineUnavailableError(known["error"])
    engine = Engine(
        host=known["host"],
        image=known["image"],
        python_image=known["python_image"],
        started=known["started"],
        private=known.get("private", False),
    )
    os.environ["DOCKER_HOST"] = engine.host
    os.environ[IMAGE_VARIABLE] = engine.image
    os.environ[PYTHON_IMAGE_VARIABLE] = engine.python_image
    return engine


# ---------------------------------------------------------------- the leak check


def _created(value: str) -> float:
    """Seconds since the epoch of a Docker timestamp (RFC 3339 with nanoseconds)."""
    value = value.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    head, dot, rest = value.partition(".")
    if dot:  # at most microseconds for fromisoformat
        digits = "".join(c for c in rest if c.isdigit())
        zone = rest[len(digits) :]
        value = f"{head}.{digits[:6]}{zone}"
    return datetime.fromisoformat(value).timestamp()


def _ours(labels: dict[str, str] | None) -> bool:
    return any(key.startswith(LABEL_PREFIX) for key in labels or {})


def leaks(host: str, since: float, *, everything: bool = False) -> tuple[list[str], list[str]]:
    """Names of the containers and volumes with a ``skillruntime`` label (any at all when
    ``everything``: on the suite's private daemon every object is the suite's) created at or
    after ``since`` (seconds since the epoch, with one second of slack for clock rounding)."""
    import docker  # type: ignore[import-untyped,unused-ignore]

    client = docker.DockerClient(base_url=host, timeout=30)
    try:
        containers = [
            container.name
            for container in client.containers.list(all=True, ignore_removed=True)
            if (everything or _ours(container.labels))
            and _created(container.attrs["Created"]) >= since - 1
        ]
        volumes = [
            volume.name
            for volume in client.volumes.list()
            if (everything or _ours(volume.attrs.get("Labels")))
            and _created(volume.attrs.get("CreatedAt", "1970-01-01T00:00:00Z")) >= since - 1
        ]
    finally:
        client.close()
    return containers, volumes


def remove(host: str, containers: list[str], volumes: list[str]) -> None:
    """Remove the named containers (forced) and volumes; missing ones are fine."""
    import docker  # type: ignore[import-untyped,unused-ignore]
    from docker.errors import NotFound  # type: ignore[import-untyped,unused-ignore]

    client = docker.DockerClient(base_url=host, timeout=60)
    try:
        for name in containers:
            with contextlib.suppress(NotFound):
                client.containers.get(name).remove(force=True)
        for name in volumes:
            with contextlib.suppress(NotFound):
                client.volumes.get(name).remove(force=True)
    finally:
        client.close()


# ---------------------------------------------------------------- the plugin


def _controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    """In the controlling process: the session's state directory and start time."""
    if not _controller(config) or os.environ.get(SESSION_VARIABLE):
        return
    state = Path(tempfile.mkdtemp(prefix="skillruntime-docker-session-"))
    (state / "started").write_text(repr(time.time()))
    os.environ[SESSION_VARIABLE] = str(state)
    config.stash[_STATE] = state


_STATE = pytest.StashKey[Path]()
_MESSAGES = pytest.StashKey[list[str]]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In the controlling process, when the engine was used: the leak check, then the daemon
    this session started is stopped."""
    config = session.config
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    record = state / "engine.json"
    messages: list[str] = []
    config.stash[_MESSAGES] = messages
    if record.is_file():
        known = json.loads(record.read_text())
        if "error" in known:
            messages.append(f"Docker tests FAILED: {known['error']}")
        else:
            since = float((state / "started").read_text())
            private = bool(known.get("private"))
            containers, volumes = leaks(known["host"], since, everything=private)
            if containers or volumes:
                messages.append(
                    "Docker leak check FAILED: left after the suite: "
                    f"containers {sorted(containers)}, volumes {sorted(volumes)}"
                )
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
                if private:
                    remove(known["host"], containers, volumes)
            else:
                messages.append(
                    "Docker leak check: no container or volume left (engine " + known["host"] + ")"
                )
            if known.get("started"):
                environment = dict(os.environ)
                environment.pop("DOCKER_HOST", None)
                try:
                    _script("stop", environment)
                except EngineUnavailableError as error:
                    messages.append(f"Docker: stopping the private daemon failed: {error}")
    shutil.rmtree(state, ignore_errors=True)
    os.environ.pop(SESSION_VARIABLE, None)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The leak check's line (and the engine's failure, once) in the summary."""
    for message in config.stash.get(_MESSAGES, []):
        terminalreporter.write_line(message)
