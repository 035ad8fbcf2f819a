#!/usr/bin/env bash
# Run the test suite with every distribution's dependencies at their LOWEST declared versions.
#
# Every folder holding a pyproject.toml with a [project] table is a distribution; each is
# installed editable with all of its extras into a separate virtual environment (.venv-lowest),
# resolved with `uv pip install --resolution lowest-direct`, so each declared dependency gets the
# lowest version its bounds allow and the rest the newest that fits. The development tools of
# requirements-dev.txt (pytest plugins, moto, boto3, ...) get the newest versions compatible
# with those floors. The script then checks that every declared
# lower bound is exactly what got installed (a floor that a sibling dependency or a tool pushes
# up is not tested, so it fails here and must be raised), and runs pytest there.
#
# Usage: scripts/test-lowest.sh [-m EXPR] [pytest arguments]
#   (default: -m "not slow" -q, in parallel as scripts/run-tests.sh runs it)
# Environment: PYTHON (interpreter, default python3), LOWEST_VENV (default .venv-lowest),
# UV (a uv executable; by default uv is installed into .venv-uv with pip).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${LOWEST_VENV:-.venv-lowest}

if [ -n "${UV:-}" ]; then
    uv=$UV
else
    if [ ! -x .venv-uv/bin/uv ]; then
        "$PYTHON" -m venv .venv-uv
        .venv-uv/bin/python -m pip install --quiet --disable-pip-version-check uv
    fi
    uv=.venv-uv/bin/uv
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
plan() { "$PYTHON" scripts/lowest_plan.py "$@"; }

plan requirements > "$work/distributions.txt"
# The development tools' exact pins (the SDK versions the typing tests mirror) also bind what the
# distributions pull in transitively (deepagents -> langchain-anthropic -> anthropic).
grep -E '^[A-Za-z0-9_.-]+==' requirements-dev.txt > "$work/dev-pins.txt" || true
# The lowest resolution of the distributions alone, then the development tools (and everything
# they pull in) at the newest versions that fit it; the environment is installed from both.
"$uv" pip compile --quiet --resolution lowest-direct --python "$PYTHON" \
    "$work/distributions.txt" -c "$work/dev-pins.txt" -o "$work/lowest.txt"
grep -v -e '^-e ' -e '^ *#' "$work/lowest.txt" | grep . > "$work/lowest-pins.txt" || true
"$uv" pip compile --quiet --python "$PYTHON" requirements-dev.txt \
    -c "$work/lowest-pins.txt" -o "$work/dev.txt"

rm -rf "$VENV"
# --seed: tests drive pip inside the environment.
"$uv" venv --quiet --seed --python "$PYTHON" "$VENV"
"$uv" pip install --quiet --python "$VENV/bin/python" --resolution lowest-direct \
    -r "$work/distributions.txt" -r requirements-dev.txt -c "$work/lowest-pins.txt" -c "$work/dev.txt"
"$uv" pip check --python "$VENV/bin/python"

# Every declared lower bound must be the installed version.
plan floors | "$VENV/bin/python" -c '
import sys
from importlib.metadata import version
from packaging.version import Version

bad = 0
for line in sys.stdin:
    name, floor, owner = line.split()
    if floor == "-":
        continue
    installed = version(name)
    same = Version(installed) == Version(floor)
    print(f"{name:<20} floor {floor:<10} installed {installed:<12} ({owner})")
    if not same:
        bad += 1
        print(f"  ^ {name} {floor} cannot be installed here: something requires more;"
              " raise the floor to what is tested", file=sys.stderr)
sys.exit(1 if bad else 0)
'

if [ "$#" -eq 0 ]; then
    # What a dependency floor can break is every distribution's behaviour, not the cost of the
    # slow end-to-end cases (real servers, process races, peer suites): those run in `make test`.
    set -- -m "not slow" -q
fi
bash scripts/run-tests.sh "$VENV/bin/python" "$@" -p no:cacheprovider
