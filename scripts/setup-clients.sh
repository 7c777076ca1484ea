#!/usr/bin/env bash
# Third-party ClickHouse clients the `flamehouse serve` tests drive
# (tests/it/serve.rs), installed once into a cache outside the checkout:
#   - Python clickhouse-connect (tests/clients/requirements.txt) in a venv at
#     $CACHE/clients/py-<hash>/ (the tests run its bin/python);
#   - JavaScript @clickhouse/client (tests/clients/package.json) with npm into
#     $CACHE/clients/node-<hash>/node_modules.
# Keyed by the hash of the pinned versions, so a rerun takes well under a
# second. Prints nothing but errors; the tests find the installs through
# FLAMEHOUSE_CACHE (same default as the other setup scripts).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${FLAMEHOUSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flamehouse}"
BASE="$CACHE/clients"
mkdir -p "$BASE"
log() { echo "setup-clients: $*" >&2; }
exec 9>"$BASE/.lock"
flock 9

REQ="$ROOT/tests/clients/requirements.txt"
PY="$BASE/py-$(sha256sum "$REQ" | cut -c1-16)"
if [[ ! -f "$PY/.complete" ]]; then
  command -v python3 >/dev/null || { log "python3 is required"; exit 1; }
  log "python venv with $(grep -v '^#' "$REQ" | tr '\n' ' ')into $PY"
  rm -rf "$PY"
  python3 -m venv "$PY"
  "$PY/bin/pip" install --quiet --disable-pip-version-check -r "$REQ" >&2
  touch "$PY/.complete"
fi

PKG="$ROOT/tests/clients/package.json"
NODE="$BASE/node-$(sha256sum "$PKG" | cut -c1-16)"
if [[ ! -f "$NODE/.complete" ]]; then
  command -v npm >/dev/null || { log "npm is required"; exit 1; }
  log "npm install @clickhouse/client into $NODE"
  rm -rf "$NODE"
  mkdir -p "$NODE"
  cp "$PKG" "$NODE/"
  (cd "$NODE" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  touch "$NODE/.complete"
fi
