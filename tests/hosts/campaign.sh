#!/usr/bin/env bash
# A seeded campaign of host-level faults (issue 64), by hand, not in CI: RUNS schedules drawn from SEED, each
# run by tests/hosts/host_faults.sh with its pass criteria (no silent end, no hang, the failure recorded, the
# failure-free losses, no healthy rank recorded as failed, at most one side going on, nothing left behind):
#   - kill, power, cut: a host of 2 ranks (host 2 or 3 of 3) dies whole, loses power, or loses its link;
#   - split: 4 hosts of 1 rank cut in two (2|2 or 3|1, the launcher's host1 on either side of a 2|2 and on the
#     larger side of a 3|1: a side without host1 cannot be requeued by this harness, which launches on host1);
# at a step of 2-12 of a 16-step run. One failure-free run per host shape is the reference of all its runs.
# Prints every HOSTFAULT line and, at the end,
#   HOSTCAMPAIGN seed=S runs=N passed=P failed=F hung=H requeued=Q recovered_in_job=J
# (hung: a run stopped by the campaign's own limit). Exit 1 when any run failed or hung.
#
#   bash tests/hosts/campaign.sh KILN KILN_MPIRUN DATA WORK SEED RUNS [KINDS]     (KINDS: "kill power cut split")
#
# To work on beside it, copy kiln, kiln_torch.so and kiln-mpirun out of the build and set KILN_TORCH_MODULE to
# the copy's module: kiln loads the build directory's by its compiled-in path, and a rebuild breaks the runs.
# Two campaigns may run side by side (each harness has its own switch namespace and temporary directories).
set -uo pipefail
kiln=$1 launcher=$2 data=$3 work=$4 seed=${5:-1} runs=${6:-10}
read -ra kinds <<<"${7:-kill power cut split}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RANDOM=$seed
mkdir -p "$work"
splits=("1,2|3,4" "1,3|2,4" "1,4|2,3" "1,2,3|4" "1,2,4|3" "1,3,4|2")
reference() {  # the failure-free run of a host shape (HOSTS x RANKS_PER_HOST), once
  local shape=$1 dir=$work/reference-$1
  [ -f "$work/ref-$shape/tiny/diag.h5" ] && return 0
  HOSTS=${shape%x*} RANKS_PER_HOST=${shape#*x} FAULTS="" timeout 900 \
    bash "$here/host_faults.sh" "$kiln" "$launcher" "$data" "$dir" >"$dir.log" 2>&1 ||
    { tail -20 "$dir.log"; echo "HOSTCAMPAIGN: the failure-free run on $shape hosts failed"; exit 1; }
  rm -rf "$work/ref-$shape" && mv "$dir/clean" "$work/ref-$shape"  # out of the harness's directory
}
passed=0 failed=0 hung=0 requeued=0 inside=0
for i in $(seq 1 "$runs"); do
  kind=${kinds[$((RANDOM % ${#kinds[@]}))]} step=$((2 + RANDOM % 11))
  if [ "$kind" = split ]; then
    shape=4x1 fault=split=${splits[$((RANDOM % ${#splits[@]}))]} victim=4
  else
    shape=3x2 fault=$kind victim=$((2 + RANDOM % 2))
  fi
  reference "$shape"
  out=$work/run-$i
  REFERENCE=$work/ref-$shape HOSTS=${shape%x*} RANKS_PER_HOST=${shape#*x} FAULTS=$fault VICTIM=$victim AT_STEP=$step \
    timeout 900 bash "$here/host_faults.sh" "$kiln" "$launcher" "$data" "$out" >"$out.log" 2>&1
  status=$?
  line=$(grep -m1 "^HOSTFAULT" "$out.log" || echo "HOSTFAULT kind=$fault host=$victim step=$step status=$status")
  echo "$line"
  if [ "$status" = 0 ]; then
    passed=$((passed + 1))
    grep -q "first_exit=75" <<<"$line" && requeued=$((requeued + 1)) || inside=$((inside + 1))
    rm -rf "$out"  # a passed run's directories (its log stays): 100 runs of checkpoints would fill the disk
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
