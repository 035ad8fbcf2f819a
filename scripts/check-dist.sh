#!/usr/bin/env bash
# Build the sdist and wheel of every distribution, check them with twine, then install each
# backend's wheel together with core's into a fresh virtualenv and import it there: proof that
# the built artifacts (not the editable checkout) install one backend at a time.
# Needs the development venv (scripts/setup.sh); dependencies come from the package index.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
WORK=$(mktemp -d "${TMPDIR:-/tmp}/skillruntime-dist.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
DISTRIBUTIONS=(core local opensandbox aio docker viking mcp openai-agents deepagents)

step() { printf '==> %s\n' "$*"; }

for name in "${DISTRIBUTIONS[@]}"; do
    cmp -s LICENSE "skillruntime-$name/LICENSE" \
        || { echo "skillruntime-$name/LICENSE differs from LICENSE" >&2; exit 1; }
    step "building skillruntime-$name"
    "$PY" -m build --no-isolation --outdir "$WORK/dist" "skillruntime-$name" >"$WORK/build-$name.log" 2>&1 \
        || { cat "$WORK/build-$name.log" >&2; exit 1; }
done

step "twine check"
NO_COLOR=1 "$PY" -m twine check --strict "$WORK"/dist/* | sed "s/^/    /"

step "every wheel and sdist carries the licence"
"$PY" - "$WORK/dist" <<'PYEOF'
import sys, tarfile, zipfile
from pathlib import Path
for path in sorted(Path(sys.argv[1]).iterdir()):
    if path.suffix == ".whl":
        names = zipfile.ZipFile(path).namelist()
        ok = any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    else:
        names = tarfile.open(path).getnames()
        ok = any(n.count("/") == 1 and n.endswith("/LICENSE") for n in names)
    if not ok:
        sys.exit(f"{path.name}: no LICENSE")
    print(f"    {path.name}: LICENSE present")
PYEOF

core_wheel=$(ls "$WORK"/dist/skillruntime_core-*.whl)
# uv installs the fresh environments several times faster than pip: $UV, uv on PATH, or the one
# scripts/test-lowest.sh installs into .venv-uv; pip otherwise.
UV_BIN=${UV:-$(command -v uv || true)}
if [ -z "$UV_BIN" ] && [ -x .venv-uv/bin/uv ]; then
    UV_BIN=.venv-uv/bin/uv
fi

# fresh_venv NAME WHEEL...: a new virtualenv $WORK/venv-NAME holding core's wheel and WHEEL...;
# pip's output (and the machine pip config's "Location ... is ignored" warnings) goes to a log,
# shown only when the install fails.
fresh_venv() {
    local name=$1
    shift
    venv="$WORK/venv-$name"
    if [ -n "$UV_BIN" ]; then
        "$UV_BIN" venv --quiet --python "$PY" "$venv"
        "$UV_BIN" pip install --quiet --python "$venv/bin/python" "$core_wheel" "$@"
    else
        "$PY" -m venv "$venv"
        "$venv/bin/python" -m pip install --disable-pip-version-check "$core_wheel" "$@" \
            >"$WORK/pip-$name.log" 2>&1 || { tail -n 30 "$WORK/pip-$name.log" >&2; exit 1; }
    fi
}

for name in local opensandbox aio viking; do
    step "fresh venv: skillruntime-core + skillruntime-$name wheels"
    fresh_venv "$name" "$WORK"/dist/skillruntime_"$name"-*.whl
    version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "skillruntime-$name/src/skillruntime/$name/_version.py")
    (cd "$WORK" && "$venv/bin/python" - "$name" "$version" <<'PYEOF'
import importlib, importlib.metadata as md, sys
name, version = sys.argv[1], sys.argv[2]
module = importlib.import_module(f"skillruntime.{name}")
core = importlib.import_module("skillruntime.core")
assert module.__version__ == version == md.version(f"skillruntime-{name}"), module.__version__
assert core.__version__ == md.version("skillruntime-core")
assert "site-packages" in (module.__file__ or ""), module.__file__
plugins = {ep.name for ep in md.entry_points(group="skillruntime")}
assert name in plugins, plugins
from skillruntime.core.plugins import available_artifact_stores, available_runtimes
found = set(available_runtimes()) | set(available_artifact_stores())
assert name in found, found
print(f"    skillruntime.{name} {version} imports and registers {name!r}")
PYEOF
    )
    "$venv/bin/skillruntime" runtimes >/dev/null
done
# The MCP server is an integration, not a runtime: with core, local and it, its CLI command works.
step "fresh venv: skillruntime-core + skillruntime-local + skillruntime-mcp wheels"
fresh_venv mcp "$WORK"/dist/skillruntime_local-*.whl "$WORK"/dist/skillruntime_mcp-*.whl
(cd "$WORK" && "$venv/bin/python" -c '
import importlib.metadata as md, skillruntime.mcp as m
assert m.__version__ == md.version("skillruntime-mcp"), m.__version__
assert "site-packages" in (m.__file__ or ""), m.__file__
print(f"    skillruntime.mcp {m.__version__} imports")')
"$venv/bin/skillruntime" mcp serve --help >/dev/null
# The Agents SDK integration: with core and local, a sandbox session runs a command.
step "fresh venv: skillruntime-core + skillruntime-local + skillruntime-openai-agents wheels"
fresh_venv openai-agents "$WORK"/dist/skillruntime_local-*.whl "$WORK"/dist/skillruntime_openai_agents-*.whl
(cd "$WORK" && "$venv/bin/python" -c '
import asyncio, importlib.metadata as md, tempfile
import skillruntime.openai_agents as m
assert m.__version__ == md.version("skillruntime-openai-agents"), m.__version__
assert "site-packages" in (m.__file__ or ""), m.__file__
async def run():
    client = m.SkillRuntimeSandboxClient.for_runtime("local", conversations_root=tempfile.mkdtemp())
    session = await client.create(options=m.SkillRuntimeSandboxClientOptions(conversation_id="dist"))
    async with session:
        assert (await session.exec("echo ok")).stdout == b"ok\n"
    await client.delete(session)
asyncio.run(run())
print(f"    skillruntime.openai_agents {m.__version__} imports and runs a sandbox session")')
# The deepagents backend is an integration too: with core and local, a backend over the local
# runtime runs a command.
step "fresh venv: skillruntime-core + skillruntime-local + skillruntime-deepagents wheels"
fresh_venv deepagents "$WORK"/dist/skillruntime_local-*.whl "$WORK"/dist/skillruntime_deepagents-*.whl
(cd "$WORK" && "$venv/bin/python" -c '
import importlib.metadata as md, skillruntime.deepagents as d
from skillruntime.local import LocalSkillRuntime
assert d.__version__ == md.version("skillruntime-deepagents"), d.__version__
assert "site-packages" in (d.__file__ or ""), d.__file__
with LocalSkillRuntime() as runtime:
    assert d.SkillRuntimeBackend(runtime).execute("echo ok").output == "ok\n"
(entry,) = md.entry_points(group="deepagents_code.sandbox_providers", name="skillruntime")
assert entry.load() is d.SkillRuntimeSandboxProvider
print(f"    skillruntime.deepagents {d.__version__} imports, runs a command, registers its provider")')
step "distributions ok"
