#!/usr/bin/env bash
# Prepare the Grafana flame graph renderer harness (grafana/render/):
#   1. Debian's chromium at /usr/bin/chromium (apt-get, only if missing);
#   2. node_modules, installed ONCE with `npm ci` into a cache outside the
#      checkout keyed by the hash of package-lock.json, then symlinked as
#      grafana/render/node_modules;
#   3. the page bundle grafana/render/dist/ (esbuild; rebuilt only when a
#      source file, the build script or the lock file is newer than it).
# Idempotent: a rerun with everything in place takes about a second.
# Env: FLAMEHOUSE_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/flamehouse),
#      FLAMEHOUSE_SKIP_CHROMIUM=1 to skip the apt step.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RENDER="$ROOT/grafana/render"
CACHE="${FLAMEHOUSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flamehouse}"
log() { echo "setup-grafana: $*" >&2; }

# --- 1. chromium -------------------------------------------------------------
if [[ "${FLAMEHOUSE_SKIP_CHROMIUM:-}" != 1 && ! -x /usr/bin/chromium ]]; then
  command -v apt-get >/dev/null || { log "/usr/bin/chromium missing and no apt-get"; exit 1; }
  SUDO=""
  [[ "$(id -u)" != 0 ]] && SUDO="sudo"
  log "installing Debian chromium (apt-get)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    chromium fonts-dejavu-core >/dev/null
  [[ -x /usr/bin/chromium ]] || { log "chromium install did not produce /usr/bin/chromium"; exit 1; }
fi

# --- 2. node_modules (cached by lock hash) -----------------------------------
command -v npm >/dev/null || { log "npm is required"; exit 1; }
HASH="$(sha256sum "$RENDER/package-lock.json" | cut -c1-16)"
BASE="$CACHE/grafana-node"
DEST="$BASE/$HASH"
mkdir -p "$BASE"
if [[ ! -f "$DEST/.complete" ]]; then
  # Serialise concurrent setups on the same cache.
  exec 9>"$BASE/.lock"
  flock 9
  if [[ ! -f "$DEST/.complete" ]]; then
    log "npm ci into $DEST (~670 MB, once per package-lock.json)"
    TMP="$(mktemp -d "$BASE/.tmp.XXXXXX")"
    trap 'rm -rf "$TMP"' EXIT
    cp "$RENDER/package.json" "$RENDER/package-lock.json" "$TMP/"
    # --ignore-scripts: nothing here needs an install script (esbuild finds its
    # platform package without one; playwright-core never downloads browsers).
    (cd "$TMP" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
    rm -rf "$DEST"
    mv "$TMP" "$DEST"
    trap - EXIT
    touch "$DEST/.complete"
  fi
  flock -u 9
fi

LINK="$RENDER/node_modules"
if [[ -L "$LINK" ]]; then
  [[ "$(readlink "$LINK")" == "$DEST/node_modules" ]] || ln -sfn "$DEST/node_modules" "$LINK"
else
  if [[ -e "$LINK" ]]; then
    log "replacing a local $LINK directory with the cached install"
    rm -rf "$LINK"
  fi
  ln -s "$DEST/node_modules" "$LINK"
fi

# --- 3. bundle -----------------------------------------------------------------
STAMP="$RENDER/dist/.built"
if [[ ! -f "$STAMP" || -n "$(find "$RENDER/src" "$RENDER/index.html" "$RENDER/build.mjs" \
      "$RENDER/package-lock.json" -newer "$STAMP" -print -quit)" ]]; then
  log "bundling page into $RENDER/dist"
  (cd "$RENDER" && node build.mjs)
  touch "$STAMP"
fi
log "ready: node $RENDER/render.mjs --out DIR frame.json ..."
