#!/usr/bin/env bash
# Create .venv and install every distribution (editable) plus the development tools.
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check \
    -e './skillruntime-core[sql,postgresql,mysql,testing,s3]' \
    -e ./skillruntime-local \
    -e ./skillruntime-opensandbox \
    -e ./skillruntime-aio \
    -e ./skillruntime-viking \
    -e ./skillruntime-mcp \
    -r requirements-dev.txt
