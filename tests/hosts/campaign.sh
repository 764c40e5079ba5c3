#!/usr/bin/env bash
# A seeded campaign of host-level faults (issue 64), by hand, not in CI: RUNS schedules drawn from SEED, each a
# fault kind (a host killed whole, without power, cut off), a victim host (2 or 3 of 3) and a step (2-12) of a
# 16-step run, each run by tests/hosts/host_faults.sh (its pass criterion: no silent end, no hang, the failure
# recorded, the failure-free losses, nothing left behind). Prints every HOSTFAULT line and, at the end,
#   HOSTCAMPAIGN seed=S runs=N passed=P failed=F hung=H requeued=Q recovered_in_job=J
# (hung: a run stopped by the campaign's own limit). Exit 1 when any run failed or hung.
#
#   bash tests/hosts/campaign.sh KILN KILN_MPIRUN DATA WORK SEED RUNS
set -uo pipefail
kiln=$1 launcher=$2 data=$3 work=$4 seed=${5:-1} runs=${6:-10}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RANDOM=$seed
mkdir -p "$work"
kinds=(kill power cut)
passed=0 failed=0 hung=0 requeued=0 inside=0
for i in $(seq 1 "$runs"); do
  kind=${kinds[$((RANDOM % 3))]} victim=$((2 + RANDOM % 2)) step=$((2 + RANDOM % 11))
  out=$work/run-$i
  FAULTS=$kind VICTIM=$victim AT_STEP=$step timeout 900 bash "$here/host_faults.sh" "$kiln" "$launcher" "$data" "$out" \
    >"$out.log" 2>&1
  status=$?
  line=$(grep -m1 "^HOSTFAULT" "$out.log" || echo "HOSTFAULT kind=$kind host=$victim step=$step status=$status")
  echo "$line"
  if [ "$status" = 0 ]; then
    passed=$((passed + 1))
    grep -q "first_exit=75" <<<"$line" && requeued=$((requeued + 1)) || inside=$((inside + 1))
  elif [ "$status" = 124 ]; then
    hung=$((hung + 1))
    bash "$here/hosts.sh" down "$out/hosts" >/dev/null 2>&1
  else
    failed=$((failed + 1))
    grep -m1 "^FAIL" "$out.log"
  fi
done
echo "HOSTCAMPAIGN seed=$seed runs=$runs passed=$passed failed=$failed hung=$hung requeued=$requeued recovered_in_job=$inside"
[ "$failed" = 0 ] && [ "$hung" = 0 ]
