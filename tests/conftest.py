"""Suite-wide rules that hold for every test, in every pytest-xdist worker.

- No test exports traces: the OpenAI Agents SDK's trace exporter is switched off before any test
  imports the SDK (its background exporter would otherwise try to reach the real service with
  whatever key a test sets, and report a failed export at interpreter exit).
- The real OpenViking server is started once per run, by the first test process that needs it,
  and shared by every xdist worker, each in an account of its own
  (``viking_real.openviking_harness``); the controller stops it when the run ends. When the run
  is not narrowed by ``-k``, its ``-m`` (if any) keeps the server's tests (``make test``'s
  ``not serial`` does, ``not slow`` does not: ``openviking_harness.selects_server_tests``), and
  its paths include a folder of the server's tests (``openviking_harness.TEST_DIRS``; ``make
  test`` does), the controller starts it in the background before the workers collect, so that
  they do not wait for it when its tests come up. (Grouping its tests on one worker with
  ``xdist_group`` does not work with pytest 9.2 and pytest-xdist 3.8: xdist renames
  ``item._nodeid``, which pytest 9.2 no longer reads.)
- ``make test-quick`` and the lowest-versions run leave out the tests marked ``slow``: besides
  those marked where they are written, every test of the modules in ``slow_tests.SLOW_MODULES``
  and every test that ``tests/durations.json`` lists as measured at
  ``slow_tests.THRESHOLD_SECONDS`` or more (``tests/slow_tests.py`` says how the file is kept
  true). The modules are end-to-end costs (real servers, racing processes, process restarts,
  fault workloads, the peer suites, symlink-swap races, the benchmarks' quick mode, the
  preloaded fork server); what each distribution does is also tested by its fast tests, so the
  quick set covers every distribution (``tests/core/test_suite_rules.py``).
- Under pytest-xdist the heaviest modules (by ``tests/durations.json``) run first
  (``slow_tests.heaviest_modules_first``), so the run does not end on one worker's long test.
- ``--record-durations=PATH`` records each test's own seconds into ``PATH``; every run lists the
  tests that took the threshold or more without being marked ``slow``.
- The Docker tests' engine, and the check that they leave no container or volume behind, are
  the plugin :mod:`docker_engine`.
- Hypothesis runs every phase but ``explain`` and prints the reproducing blob of a failure. On
  Python 3.11 ``explain`` replays the shrunk failure under ``sys.settrace``; a differential test
  against real shells then ran into the suite's 300 s timeout with its failure unreported.
"""

from __future__ import annotations

import os
import ssl
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

from slow_tests import SLOW_MODULES, SLOW_TESTS, DurationRecorder, heaviest_modules_first
from viking_real.openviking_harness import TEST_DIRS as OPENVIKING_TEST_DIRS
from viking_real.openviking_harness import begin_run, end_run, prestart, selects_server_tests

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

# ``too_slow`` measures the wall time of input generation: on a loaded machine it fails tests
# whose inputs are cheap (speed is measured in the benchmarks, never asserted as wall time).
settings.register_profile(
    "skillruntime",
    phases=[phase for phase in Phase if phase is not Phase.explain],
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("skillruntime")

# The Docker Engine of the Docker tests and the leak check at the end of the session.
pytest_plugins = ["docker_engine", "moto_s3"]

_TESTS = Path(__file__).resolve().parent
_PRESTART_JOIN_SECONDS = 240.0
"""How long the run's end waits for a prestart still under way (its own bound is shorter)."""


@pytest.fixture
def default_contexts(monkeypatch: pytest.MonkeyPatch) -> list[ssl.SSLContext]:
    """The default TLS contexts httpx builds during the test, from an empty shared cache (see
    ``tls_counting``)."""
    from tls_counting import count_default_contexts

    return count_default_contexts(monkeypatch)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations",
        metavar="PATH",
        default=None,
        help="add each test's own seconds to the JSON object in PATH (see tests/slow_tests.py)",
    )


_RUN_DIR = pytest.StashKey[Path]()
_PRESTART = pytest.StashKey[threading.Thread]()


def _runs_openviking_tests(config: pytest.Config) -> bool:
    """Whether this run, as its arguments select it, will run tests of the real server."""
    if config.option.keyword:
        return False
    if config.option.markexpr and not selects_server_tests(config.option.markexpr):
        return False
    base = config.invocation_params.dir
    for argument in config.args:
        path = (base / argument.split("::", 1)[0]).resolve()
        for folder in OPENVIKING_TEST_DIRS:
            server_dir = _TESTS / folder
            if path == server_dir or path in server_dir.parents or server_dir in path.parents:
                return True
    return False


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(DurationRecorder(config), "skillruntime-durations")
    if not hasattr(config, "workerinput"):
        # The controller (or the only process): the workers it starts inherit the environment
        # that names the run folder of the shared OpenViking server.
        run_dir = begin_run()
        config.stash[_RUN_DIR] = run_dir
        if _runs_openviking_tests(config):
            thread = prestart(run_dir)
            if thread is not None:
                config.stash[_PRESTART] = thread


def pytest_unconfigure(config: pytest.Config) -> None:
    thread = config.stash.get(_PRESTART, None)
    if thread is not None:
        thread.join(timeout=_PRESTART_JOIN_SECONDS)
    run_dir = config.stash.get(_RUN_DIR, None)
    if run_dir is not None:
        end_run(run_dir)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Write the number of collected tests marked ``serial`` (before any ``-m`` selection) to the
    file that ``SKILLRUNTIME_SERIAL_COUNT_FILE`` names, if any: ``scripts/run-tests.sh`` skips its
    serial part (a whole collection) when there is none. Under xdist the first worker writes it.

    Under xdist, also order the items heaviest module first (see the module docstring)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is not None:
        items[:] = heaviest_modules_first(items)
    target = os.environ.get("SKILLRUNTIME_SERIAL_COUNT_FILE")
    if not target or os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        return
    count = sum(1 for item in items if item.get_closest_marker("serial") is not None)
    Path(target).write_text(f"{count}\n")


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark ``slow`` the tests of ``slow_tests.SLOW_MODULES`` and those of
    ``slow_tests.SLOW_TESTS`` (as each item is collected, before any ``-m`` selection)."""
    if item.nodeid in SLOW_TESTS or item.path.relative_to(_TESTS).as_posix() in SLOW_MODULES:
        item.add_marker(pytest.mark.slow)
