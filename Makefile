# The two commands of the README: `make demo` (set up, run the main job) and `make test`.
# `make test-quick` is the inner loop: the fast suites, without reinstalling anything.
.PHONY: setup demo test test-quick test-lowest lint bench dist
QUICK_TESTS = tests/core tests/local tests/cli tests/docs

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

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy skillruntime-core/src skillruntime-local/src skillruntime-opensandbox/src skillruntime-aio/src skillruntime-viking/src skillruntime-mcp/src tests/tools/sdk_typing.py

test: setup
	.venv/bin/python -m pytest

.venv/bin/python:
	bash scripts/setup.sh

test-quick: .venv/bin/python
	.venv/bin/python -m pytest -q -x -m "not slow" $(QUICK_TESTS)

dist: .venv/bin/python
	bash scripts/check-dist.sh

bench: setup
	.venv/bin/python tests/benchmarks/bench_local.py
	.venv/bin/python tests/benchmarks/bench_opensandbox.py
	.venv/bin/python tests/benchmarks/bench_aio.py
	.venv/bin/python tests/benchmarks/bench_viking.py
	.venv/bin/python tests/benchmarks/bench_async.py
	.venv/bin/python tests/benchmarks/bench_mcp.py
	.venv/bin/python tests/benchmarks/bench_audit.py
