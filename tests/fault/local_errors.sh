#!/usr/bin/env bash
# Local faults end one process, not the job: the survivors recover as from a failed node. 6 ranks as 3 nodes
# of 2, f = 1, pipelines 2+1 (the tiny deck), compared with the failure-free run (every step's loss and
# gradient norm to 1e-5 relative). Pass criteria, each printed as PASS:
#  1. An exception from outside kiln on rank 3 in step 4's backward (':throw', as libtorch would throw): rank 3
#     ends alone (no MPI_Abort), the job recovers (one /failures row at step 4), exits 0, same losses.
#  2. Rank 3's training thread sleeps forever outside MPI in step 4 (':hang': a hung file read or device
#     call) while its heartbeat thread lives: with fault.step_timeout_s = 3 (the step's deadline, fixed) the
#     process ends itself, printing the thread's stack (the injection's sleep inside the stage's step), the job
#     recovers, exits 0, same losses.
#  3. A process declared failed that nobody kills (KILN_FENCING=0: as a hung node with no survivor on its host)
#     wakes after the job moved on: rank 0 stopped with the step-4 checkpoint complete but not yet named
#     `latest` ('publish'); the survivors recover, write checkpoints 4, 8 and 10; rank 0, woken then, sees the
#     job's newer epoch and ends (or Open MPI ends it first) without renaming its file or moving `latest` (which
#     stays step 10).
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
failures() { "$kiln" diag "$work/$1/tiny/diag.h5" --json | python3 -c '
import json, sys
print(",".join("%d:%s" % (r["step"], r["failed_ranks"]) for r in json.load(sys.stdin)["failures"]))'; }

must clean 6
losses clean

must thrown 6 --set fault.inject=3:4:backward:throw
grep -q "kiln: error on rank 3 .*fault injection: an exception from outside kiln at step 4 in backward" "$work/thrown.log" &&
  grep -q "kiln: rank 3 ends alone; the job goes on without its node" "$work/thrown.log" ||
  { cat "$work/thrown.log"; fail "1: rank 3 did not end alone"; }
! grep -q "MPI_ABORT\|MPI_Abort" "$work/thrown.log" || fail "1: the job was aborted"
[ "$(failures thrown)" = "4:3" ] || fail "1: /failures is '$(failures thrown)', expected 4:3"
losses thrown
same_curve "$work/clean.losses" "$work/thrown.losses" 10
echo "PASS 1: an exception on one rank ends that rank alone; the job recovers with the failure-free losses"

must hung 6 --set fault.inject=3:4:backward:hang --set fault.step_timeout_s=3 --set fault.hang_timeout_s=4
grep -q "rank 3 .*the training thread gave no sign of life for over 3.0 s .*This process ends" "$work/hung.log" ||
  { cat "$work/hung.log"; fail "2: rank 3 did not end itself"; }
# It says where the thread was: the injection's sleep, called from the stage's step.
grep -q "kiln:   \[rank 3\] #[0-9]* kiln::fault::FaultInjector::at" "$work/hung.log" &&
  grep -q "kiln:   \[rank 3\] #[0-9]* kiln::train::PipelineStage::run" "$work/hung.log" ||
  { grep -A14 "gave no sign" "$work/hung.log"; fail "2: rank 3 did not say where its training thread was"; }
[ "$(failures hung)" = "4:3" ] || fail "2: /failures is '$(failures hung)', expected 4:3"
losses hung
same_curve "$work/clean.losses" "$work/hung.losses" 10
echo "PASS 2: a training thread stuck outside MPI (fault.step_timeout_s = 3) ends its process, saying where it was; recovered, same losses"

rank0_of() {  # the process of start-up rank 0 of the run writing to $1
  for p in $(pgrep -f "run.out_dir=$1"); do
    grep -qx "OMPI_COMM_WORLD_RANK=0" <<<"$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null)" &&
      [[ "$(tr '\0' ' ' <"/proc/$p/cmdline")" == "$kiln "* ]] && { echo "$p"; return; }
  done
}
KILN_FENCING=0 run "$work/zombie" 6 --set checkpoint.every=4 --set fault.hang_timeout_s=4 \
  --set fault.inject=0:3:publish:stop >"$work/zombie.log" 2>&1 &
launcher=$!
for _ in $(seq 600); do grep -q "^kiln run: steps 0 to 10" "$work/zombie.log" && break; sleep 0.1; done
grep -q "^kiln run: steps 0 to 10" "$work/zombie.log" || { cat "$work/zombie.log"; fail "3: the survivors did not finish"; }
zombie=$(rank0_of "$work/zombie")
[ -n "$zombie" ] || fail "3: rank 0 is not there to wake"
[ "$(cat "$work/zombie/tiny/ckpt/latest")" = "step-00000010.h5" ] || fail "3: latest before the wake-up"
kill -CONT "$zombie"
status=0
wait $launcher || status=$?
[ "$status" = 0 ] || { cat "$work/zombie.log"; fail "3: exit status $status"; }
# Woken, rank 0 ends by kiln's fence, or by Open MPI first when its heartbeat thread's next probe learns that the
# job declared it dead ("I have been reported dead by someone else": seen under load). Either way it commits
# nothing, which the `latest` check below decides.
grep -q "rank 0 .*the job has moved on without this process (its epoch 1, the job's 2 in .*): it was declared failed; it ends without committing a checkpoint" \
  "$work/zombie.log" || grep -q "ompi_proc_mark_as_failed: I have been reported dead by someone else" "$work/zombie.log" \
  || { cat "$work/zombie.log"; fail "3: rank 0 neither fenced itself nor was ended by Open MPI"; }
[ "$(cat "$work/zombie/tiny/ckpt/latest")" = "step-00000010.h5" ] || fail "3: latest moved back to $(cat "$work/zombie/tiny/ckpt/latest")"
losses zombie
same_curve "$work/clean.losses" "$work/zombie.losses" 10
echo "PASS 3: a process declared failed that wakes after the job moved on commits nothing (epoch fence); same losses"
