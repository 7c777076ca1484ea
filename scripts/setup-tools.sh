#!/usr/bin/env bash
# Tools the fixture generators and their tests run: gcc (compiles
# fixtures/gen/workload.c and fixtures/continuous/*.c), binutils (objdump -d
# and addr2line are the tests' independent oracles for the fixtures' call
# graph and symbols), util-linux (unshare: the installed-binary test hides the
# checkout), GNU time (/usr/bin/time: the UDF's peak-memory test and bench),
# and the continuous-profiling sources and oracles of fixtures/continuous/:
# golang-go (runtime/pprof writes the pprof inputs, `go tool pprof` the
# goldens), linux-perf (perf record/script/report), bpftrace, and py-spy
# (from PyPI, into a cached venv: Debian does not package it).
# Installs Debian's packages only when a command is missing; py-spy only when
# neither PATH nor the venv has it. Prints nothing when all is there.
set -euo pipefail

missing=()
command -v gcc >/dev/null || missing+=(gcc)
{ command -v objdump >/dev/null && command -v addr2line >/dev/null; } || missing+=(binutils)
command -v unshare >/dev/null || missing+=(util-linux)
[[ -x /usr/bin/time ]] || missing+=(time)
command -v go >/dev/null || missing+=(golang-go)
command -v perf >/dev/null || missing+=(linux-perf)
command -v bpftrace >/dev/null || missing+=(bpftrace)
command -v python3 >/dev/null || missing+=(python3)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)

SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO="sudo"
if ((${#missing[@]})); then
  command -v apt-get >/dev/null || { echo "setup-tools: missing ${missing[*]} and no apt-get" >&2; exit 1; }
  echo "setup-tools: installing ${missing[*]} (apt-get)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# py-spy: PATH first, else the cached venv (fixtures/continuous/generate.sh
# looks in the same two places).
venv="${XDG_CACHE_HOME:-$HOME/.cache}/flamehouse/py-spy-venv"
if ! command -v py-spy >/dev/null && [[ ! -x $venv/bin/py-spy ]]; then
  echo "setup-tools: installing py-spy (pip) into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q py-spy
fi
