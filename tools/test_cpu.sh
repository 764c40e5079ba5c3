#!/usr/bin/env bash
# CPU seconds per test: each test runs alone in a cpuacct cgroup of its own, so that every process it starts
# (mpirun, its daemons, kiln's ranks, a Python harness, processes in emulated hosts' namespaces) is counted, and
# nothing else on the machine is. The suite on a small machine is limited by CPU, not by its longest test
# (docs/developing.md): this says which tests to make cheaper.
#
#   tools/test_cpu.sh BUILD_DIR [JOBS] [REGEX]    # e.g. tools/test_cpu.sh build 2 '^(fault|hosts)_'
#
# Prints one line per test, `TESTCPU name=N cpu_s=C wall_s=W rc=R`, then the total and a table, most CPU first.
# Fixtures are not run again (ctest -FA): run the suite once first. Needs root (cgroups). Tests run JOBS at a time (default 1), ignoring ctest's resource locks: give JOBS > 1 only to
# tests that may run side by side.
set -euo pipefail
build=$(cd "${1:?usage: test_cpu.sh BUILD_DIR [JOBS] [REGEX]}" && pwd)
jobs=${2:-1}
regex=${3:-.}

if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  root=/sys/fs/cgroup  # cgroup v2: cpu.stat's usage_usec
elif [ -d /sys/fs/cgroup/cpuacct ]; then
  root=/sys/fs/cgroup/cpuacct  # cgroup v1: cpuacct.usage, in ns
elif [ -d /sys/fs/cgroup/unified ] && [ -w /sys/fs/cgroup/unified ]; then
  root=/sys/fs/cgroup/unified
else
  echo "test_cpu.sh: no cgroup hierarchy with CPU accounting under /sys/fs/cgroup" >&2
  exit 1
fi
parent="$root/kiln-test-cpu.$$"
mkdir "$parent"
lines=$(mktemp)
trap 'rmdir "$parent"/* "$parent" 2>/dev/null || true; rm -f "$lines"' EXIT

usage_s() {  # CGROUP: CPU seconds used by every process that was ever in it
  if [ -f "$1/cpuacct.usage" ]; then
    awk '{ printf "%.2f", $1 / 1e9 }' "$1/cpuacct.usage"
  else
    awk '$1 == "usage_usec" { printf "%.2f", $2 / 1e6 }' "$1/cpu.stat"
  fi
}

one() {  # NAME
  local name=$1 group t0 rc=0
  group="$parent/$(tr -c 'A-Za-z0-9_\n' _ <<<"$name")"
  mkdir "$group"
  t0=$(date +%s.%N)
  # The test's shell moves into the group before ctest starts, so every descendant is counted.
  bash -c 'echo $$ >"$1/tasks" 2>/dev/null || echo $$ >"$1/cgroup.procs"; exec ctest --test-dir "$2" -FA ".*" -R "^$3\$" >/dev/null 2>&1' \
    _ "$group" "$build" "$name" || rc=$?
  # A test's stray process still in the group would be counted later: say so.
  local left
  left=$(cat "$group/tasks" 2>/dev/null || cat "$group/cgroup.procs")
  [ -z "$left" ] || echo "test_cpu.sh: $name left processes behind: $(tr '\n' ' ' <<<"$left")" >&2
  echo "TESTCPU name=$name cpu_s=$(usage_s "$group") wall_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') rc=$rc"
  rmdir "$group" 2>/dev/null || true
}
export -f one usage_s
export parent build

ctest --test-dir "$build" -N -FA '.*' -R "$regex" | sed -n 's/^ *Test *#[0-9]*: //p' \
  | xargs -P "$jobs" -I{} bash -c 'one "$1"' _ {} | tee "$lines"
sort -t= -k3 -rn "$lines" | awk '
  { split($3, c, "="); split($4, w, "="); split($2, n, "="); total += c[2]; rows[NR] = sprintf("| %s | %s | %s |", n[2], c[2], w[2]) }
  END { printf "TESTCPU_TOTAL tests=%d cpu_s=%.1f\n\n| test | CPU s | wall s (alone) |\n| --- | --- | --- |\n", NR, total
        for (i = 1; i <= NR; i++) print rows[i] }'
