# The two commands of the README: `make demo` (set up, run the main job) and `make test`.
# `make test-quick` is the inner loop: every distribution's tests but those marked slow.
.PHONY: setup demo test test-quick test-lowest lint bench dist durations
# Tests run under pytest-xdist, TEST_WORKERS workers (default 6: most tests wait on subprocesses,
# sockets, databases and execd's one-second stream linger, so three workers per core keep both
# cores busy; on one 2-core machine the suite took 482 s with 4, 408 s with 6, 445 s with 8).
# Tests marked `serial` run after the parallel part, alone (scripts/run-tests.sh). PYTEST_ARGS go
# to pytest.
export TEST_WORKERS

setup:
	bash scripts/setup.sh

demo: setup
	.venv/bin/python examples/demo.py
	@echo
	@echo "The skillruntime command is installed in .venv: run .venv/bin/skillruntime --help,"
	@echo "or 'source .venv/bin/activate' first to have skillruntime on PATH."

# The suite again with every distribution's dependencies at their lowest declared versions
# (a separate environment, .venv-lowest; see scripts/test-lowest.sh).
test-lowest:
	bash scripts/test-lowest.sh

# generate_sync --check: every generated sync module matches its async source (see unasync.toml).
lint: setup
	.venv/bin/python scripts/generate_sync.py --check
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy skillruntime-core/src skillruntime-local/src skillruntime-opensandbox/src skillruntime-aio/src skillruntime-docker/src skillruntime-viking/src skillruntime-mcp/src skillruntime-openai-agents/src skillruntime-deepagents/src tests/tools/sdk_typing.py

test:
	SETUP_OPENVIKING=1 bash scripts/setup.sh
	bash scripts/run-tests.sh .venv/bin/python $(PYTEST_ARGS)

.venv/bin/python:
	bash scripts/setup.sh

test-quick: .venv/bin/python
	bash scripts/run-tests.sh .venv/bin/python -m "not slow" -q $(PYTEST_ARGS)

# Measure every test and rewrite tests/durations.json: the tests at the threshold or more
# (tests/slow_tests.py), which test-quick and test-lowest leave out.
durations:
	SETUP_OPENVIKING=1 bash scripts/setup.sh
	rm -f .durations.json
	bash scripts/run-tests.sh .venv/bin/python -q --record-durations=.durations.json $(PYTEST_ARGS)
	.venv/bin/python tests/slow_tests.py .durations.json

dist: .venv/bin/python
	bash scripts/check-dist.sh

# Every tests/benchmarks/bench_*.py, one table of ratios, rows also in .bench/results.json
# (BENCH_ARGS=--quick for the seconds-long smoke run that the test suite also does).
bench: setup
	.venv/bin/python tests/benchmarks/run_benchmarks.py $(BENCH_ARGS)
