#!/usr/bin/env bash
# Create .venv and install every distribution (editable) plus the development tools.
# Idempotent and quick when nothing changed: a stamp of every file that decides what gets installed
# (this script, requirements-dev.txt, every pyproject.toml) is kept in .venv; while it matches, pip
# is not run at all (SETUP_FORCE=1 reinstalls anyway). Editable installs pick up source changes by
# themselves; a changed dependency, entry point or tool pin changes the stamp.
# With SETUP_OPENVIKING=1 (make test does this) it also builds the real OpenViking server's own
# environment that the real-server tests run (tests/viking_real/openviking_env.py: about 270 MB
# under ~/.cache/skillruntime, a few minutes once per machine, reused afterwards).
# Progress: one line per step and one per package pip collects (numbered); pip's full output goes to
# .venv/setup.log (its end is shown when pip fails).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
LOG=.venv/setup.log

step() { printf '==> %s\n' "$*"; }

pip_install() {
    # Show only the lines that mark progress: "Requirement already satisfied" lines and the
    # machine-wide pip config's "Location ... is ignored" warnings stay in the log.
    local status
    set +e
    .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off "$@" 2>&1 \
        | tee -a "$LOG" \
        | awk '/^Collecting / { sub(/^Collecting /, ""); sub(/ \(from .*$/, "");
                                printf "    [%d] %s\n", ++n, $0; fflush() }
               /^Building editable for .*: started$/ { sub(/^Building editable for /, ""); sub(/ \(.*$/, "");
                                           print "    building " $0 " (editable)"; fflush() }
               /^Installing collected packages: / {
                   count = split(substr($0, 32), names, ", ")
                   print "    installing " count " packages into .venv (about a minute without output)"
                   fflush() }
               /^Successfully installed / { print "    installed " NF - 2 " packages"; fflush() }'
    status=${PIPESTATUS[0]}
    set -e
    if [ "$status" -ne 0 ]; then
        echo "pip failed (exit $status); the end of $LOG:" >&2
        tail -n 30 "$LOG" >&2
        return "$status"
    fi
}

stamp_of() {
    # One line: the sha256 of everything that decides what is installed.
    cat scripts/setup.sh requirements-dev.txt skillruntime-*/pyproject.toml | sha256sum | cut -d' ' -f1
}

openviking_env() {
    if [ "${SETUP_OPENVIKING:-0}" = 1 ]; then
        step "the real OpenViking server's environment (for the real-server tests)"
        .venv/bin/python tests/viking_real/openviking_env.py
    fi
}

if [ -x .venv/bin/python ] && [ "${SETUP_FORCE:-0}" != 1 ] \
    && [ -f .venv/.setup-stamp ] && [ "$(cat .venv/.setup-stamp)" = "$(stamp_of)" ]; then
    step "up to date: .venv ($(.venv/bin/python --version)); nothing to install" \
        "(SETUP_FORCE=1 reinstalls)"
    openviking_env
    exit 0
fi

if [ ! -x .venv/bin/python ]; then
    step "creating .venv with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv .venv
fi
: >"$LOG"
step "updating pip"
pip_install --upgrade pip
step "installing every distribution (editable) and the development tools" \
    "(a first run downloads about 190 packages and takes a few minutes)"
pip_install \
    -e './skillruntime-core[sql,postgresql,mysql,testing,s3,otel]' \
    -e ./skillruntime-local \
    -e ./skillruntime-opensandbox \
    -e ./skillruntime-aio \
    -e ./skillruntime-docker \
    -e ./skillruntime-viking \
    -e ./skillruntime-mcp \
    -e ./skillruntime-openai-agents \
    -e ./skillruntime-deepagents \
    -r requirements-dev.txt
stamp_of > .venv/.setup-stamp
openviking_env
step "ready: .venv ($(.venv/bin/python --version)); pip's full output is in $LOG"
