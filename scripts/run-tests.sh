#!/usr/bin/env bash
# Run the test suite the way `make test` does: the tests not marked `serial` in parallel under
# pytest-xdist (TEST_WORKERS workers, default 6, tests handed out one by one as workers free up),
# then the `serial` ones in one process (skipped when no test is marked serial).
#
# The Docker tests use the suite's private Docker daemon (scripts/docker-engine.sh): started here
# before the tests (with its test images) unless it already runs, and then stopped at the end.
# If it cannot start, its one-line reason is printed and handed to the tests
# (SKILLRUNTIME_DOCKER_UNAVAILABLE): the Docker tests fail on it, the others run.
#
# Usage: scripts/run-tests.sh PYTHON [-m EXPR] [pytest arguments...]
#   -m EXPR (first, optional) narrows both parts further, e.g. -m "not slow".
# Exit status: pytest's, except that a part with no test selected (pytest's 5) counts as passed
# when the other part ran tests.
set -uo pipefail
cd "$(dirname "$0")/.."
python=$1
shift
parallel_marks="not serial"
serial_marks="serial"
if [ "${1:-}" = "-m" ]; then
    parallel_marks="not serial and ($2)"
    serial_marks="serial and ($2)"
    shift 2
fi
workers=${TEST_WORKERS:-6}
# Bytecode caches on, whatever the calling environment says: each worker imports about 700
# modules and pytest rewrites the asserts of every test module; without the cache each worker's
# collection spends twice the CPU (20 s instead of 11 on this 2-core machine kind). The cache
# lives outside the work tree (PYTHONPYCACHEPREFIX, honoured by pytest's rewriting too), so no
# __pycache__ appears in the sources or in the skill folders that tests run.
export PYTHONDONTWRITEBYTECODE=
export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/skillruntime/pycache}

engine=scripts/docker-engine.sh
eval "$(bash "$engine" env)"
engine_was_running=0
if docker --host "$DOCKER_HOST" version >/dev/null 2>&1; then
    engine_was_running=1
fi
stop_engine() {
    if [ "$engine_was_running" -eq 0 ]; then
        bash "$engine" stop || true
    fi
}
serial_count=$(mktemp)
trap 'rm -f "$serial_count"; stop_engine' EXIT
trap 'exit 130' INT TERM
if said=$( { bash "$engine" start && bash "$engine" image; } 2>&1 >/dev/null); then
    [ -z "$said" ] || printf '%s\n' "$said" >&2
else
    reason=$(printf '%s\n' "$said" | grep -v '^$' | tail -n1)
    echo "Docker tests: no Docker Engine: ${reason}" >&2
    export SKILLRUNTIME_DOCKER_UNAVAILABLE="$reason"
fi

# The parallel part's collection counts the tests marked serial (tests/conftest.py, into
# $serial_count); with none, the serial part (a whole collection of its own, half a minute) is
# not run at all.
SKILLRUNTIME_SERIAL_COUNT_FILE=$serial_count \
    "$python" -m pytest -n "$workers" --dist load -m "$parallel_marks" "$@"
parallel=$?
if [ "$(cat "$serial_count")" = 0 ]; then
    echo "no test is marked serial: no serial part"
    serial=5
else
    "$python" -m pytest -p no:xdist -m "$serial_marks" "$@"
    serial=$?
fi

if [ "$parallel" -eq 5 ] && [ "$serial" -eq 5 ]; then
    exit 5
fi
for code in "$parallel" "$serial"; do
    if [ "$code" -ne 0 ] && [ "$code" -ne 5 ]; then
        exit "$code"
    fi
done
exit 0
