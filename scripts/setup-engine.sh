#!/usr/bin/env bash
# Fetch the embedded ClickHouse engine (libchdb.so from the npm package
# @chdb/lib-linux-x64-gnu), verify the tarball against a pinned integrity hash,
# and cache it outside the checkout. Prints the library's path on stdout.
# Re-running is a no-op once the library is cached.
set -euo pipefail

CHDB_VERSION="26.5.3"
# `npm view @chdb/lib-linux-x64-gnu@26.5.3 dist.integrity`
CHDB_INTEGRITY="sha512-fPrLmRt5Moor9yGz4mazbrNje4t7X9KB2mTGkXFWRxRBs2iKy8yh6jx11xsa0Qr3iDFMU/yHqd+bVdYJXu3QaQ=="

CACHE="${FLAMEHOUSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flamehouse}"
DEST="$CACHE/chdb/$CHDB_VERSION"
LIB="$DEST/libchdb.so"

if [[ -s "$LIB" && -f "$DEST/.verified" ]]; then
  echo "$LIB"
  exit 0
fi

command -v npm >/dev/null || { echo "setup-engine: npm is required to fetch @chdb/lib-linux-x64-gnu" >&2; exit 1; }
mkdir -p "$DEST"
TMP="$(mktemp -d "$CACHE/chdb/.dl.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

echo "setup-engine: fetching @chdb/lib-linux-x64-gnu@$CHDB_VERSION (~166 MB, once)" >&2
(cd "$TMP" && npm pack --silent "@chdb/lib-linux-x64-gnu@$CHDB_VERSION" >/dev/null)
TGZ="$(ls "$TMP"/*.tgz)"
GOT="sha512-$(openssl dgst -sha512 -binary "$TGZ" | base64 -w0)"
if [[ "$GOT" != "$CHDB_INTEGRITY" ]]; then
  echo "setup-engine: integrity mismatch for $TGZ: expected $CHDB_INTEGRITY, got $GOT" >&2
  exit 1
fi
tar -xzf "$TGZ" -C "$TMP" package/libchdb.so
mv "$TMP/package/libchdb.so" "$LIB.tmp"
mv "$LIB.tmp" "$LIB"
touch "$DEST/.verified"
echo "$LIB"
