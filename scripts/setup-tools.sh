#!/usr/bin/env bash
# Tools the fixture generator and its tests run: gcc (compiles
# fixtures/gen/workload.c), binutils (objdump -d and addr2line are the
# tests' independent oracles for the fixtures' call graph and symbols),
# util-linux (unshare: the installed-binary test hides the checkout) and
# GNU time (/usr/bin/time: the UDF's peak-memory test and bench).
# Installs Debian's packages only when a command is missing.
set -euo pipefail

missing=()
command -v gcc >/dev/null || missing+=(gcc)
{ command -v objdump >/dev/null && command -v addr2line >/dev/null; } || missing+=(binutils)
command -v unshare >/dev/null || missing+=(util-linux)
[[ -x /usr/bin/time ]] || missing+=(time)
if ((${#missing[@]})); then
  command -v apt-get >/dev/null || { echo "setup-tools: missing ${missing[*]} and no apt-get" >&2; exit 1; }
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  echo "setup-tools: installing ${missing[*]} (apt-get)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
