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
# The pprof exporters of fixtures/continuous/{node,python,java} (Node with npm,
# and zstd: ddtrace's profiles are zstd-compressed) are needed only to
# regenerate those fixtures: `setup-tools.sh --exporters` (generate.sh), not
# by the tests, which read the committed files.
exporters=0
[[ ${1:-} == --exporters ]] && exporters=1
if ((exporters)); then
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  command -v zstd >/dev/null || missing+=(zstd)
  # java: the JDK's Flight Recorder records the workload (async-profiler's
  # converter, which turns it into pprof, does not install from here).
  command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless)
fi

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

# Real pprof exporters for fixtures/continuous/ (node, python), pinned, each
# in its own cached folder: @datadog/pprof from npm (prebuilt V8 bindings),
# ddtrace from PyPI in a venv on Debian's python3. (pprof-rs, the rust part,
# is a crates.io dependency that cargo fetches when generate.sh builds it.)
((exporters)) || exit 0
cache="${XDG_CACHE_HOME:-$HOME/.cache}/flamehouse"
if [[ ! -f $cache/node-pprof/node_modules/@datadog/pprof/package.json ]]; then
  echo "setup-tools: installing @datadog/pprof (npm) into $cache/node-pprof" >&2
  mkdir -p "$cache/node-pprof"
  (cd "$cache/node-pprof" && { [[ -f package.json ]] || npm init -y >/dev/null; } &&
    npm install -q --no-audit --no-fund @datadog/pprof@5.20.0 >/dev/null)
fi
if [[ ! -x $cache/pprof-py-venv/bin/python ]] || ! "$cache/pprof-py-venv/bin/python" -c 'import ddtrace' 2>/dev/null; then
  echo "setup-tools: installing ddtrace (pip) into $cache/pprof-py-venv" >&2
  /usr/bin/python3 -m venv "$cache/pprof-py-venv"
  "$cache/pprof-py-venv/bin/pip" install -q ddtrace==4.16.0
fi
