# The two commands of the README: `make demo` (set up, run the main job) and `make test`.
.PHONY: setup demo test lint bench

setup:
	bash scripts/setup.sh

demo: setup
	.venv/bin/python examples/demo.py

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy skillruntime-core/src skillruntime-local/src skillruntime-opensandbox/src skillruntime-aio/src skillruntime-viking/src skillruntime-mcp/src

test: setup
	.venv/bin/python -m pytest

bench: setup
	.venv/bin/python tests/benchmarks/bench_local.py
	.venv/bin/python tests/benchmarks/bench_opensandbox.py
	.venv/bin/python tests/benchmarks/bench_aio.py
	.venv/bin/python tests/benchmarks/bench_viking.py
	.venv/bin/python tests/benchmarks/bench_async.py
	.venv/bin/python tests/benchmarks/bench_mcp.py
