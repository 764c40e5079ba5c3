#!/usr/bin/env bash
# A hung rank, end to end. 6 ranks as 3 nodes of 2, pipelines 2+1, f = 1,
# fault.hang_timeout_s = 4 (Open MPI's heartbeat detector on); rank 3 stops
# itself with SIGSTOP in step 5 (it does not die: only heartbeats reveal it; the step deadline's floor is
# raised to 60 s, out of the heartbeat's way: at 10 s it raced a heartbeat slowed by a loaded host).
# Pass criteria, printed as PASS:
#  - the survivors declare it failed, a survivor on its host kills it (fenced), they regroup and finish all
#    10 steps with the losses and gradient norms of the failure-free run (1e-5);
#  - the job ends on its own (exit 0) within 60 s, leaving no kiln process behind.
# Then a slow rank is not a hung one: with T = 2, rank 3 computes for 10 s without MPI in step 5
# (fault.inject ...:slow), below the step deadline (its floor raised to 30 s); nobody may be declared
# failed or a straggler (the speed monitor's thresholds out of the noise of 6 ranks on 2 cores: lib.sh), and the
# losses are the failure-free run's.
# Then hangs found from the step's own clock (issue 51), the heartbeat out of the way (T = 60), the
# step deadline at its defaults (3 median steps, at least 10 s):
#  - rank 3 stops itself (SIGSTOP) in step 5: a process on its host ends it once it has been stopped for
#    the deadline, the job recovers with the failure-free losses, and the stop is declared within 12 s;
#  - rank 3's training thread sleeps forever outside MPI in step 5 (its other threads live): its process
#    ends itself after the deadline, with the same outcome.
# Then a background checkpoint write that stalls 10 s holding the HDF5 library (rank 3's part, fault.inject
# ...:write:slow; a busy file system stalls writes so, as when a build runs beside: seen in CI), the step deadline
# at 4 s: the training thread waits for the library behind it, which is the write's time, exempt like every
# checkpoint write: nobody is declared hung or failed, the failure-free losses.
# No retries: Open MPI's own detector thread crashed about 1 start in 10 (see comm/heartbeat.hpp); kiln's
# progress thread replaced it, and a start-up crash here is a failure.
set -uo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
settings=(--set data.dir="$data" --set data.mix=licenses:1 --set data.tokenizer=bytes --set checkpoint.every=0
          --set train.grad_clip=0 --set run.steps=10 --set checkpoint.resume=false)
# The 10 steps' losses and gradient norms of run NAME against the failure-free run's, to 1e-5 (lib.sh).
same_losses() { same_curve "$work/clean.losses" "$work/$1.losses" 10 || exit 1; }
timeout -k 20 60 "$mpirun" -n 6 --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini --set run.out_dir="$work/clean" \
  "${settings[@]}" >"$work/clean.log" 2>&1 || { cat "$work/clean.log"; echo "FAIL: the failure-free run"; exit 1; }
"$kiln" diag "$work/clean/tiny/diag.h5" --losses >"$work/clean.losses" || exit 1
start=$(date +%s)
timeout -k 20 60 "$mpirun" -n 6 --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini --set run.out_dir="$work/run" \
  "${settings[@]}" --set fault.hang_timeout_s=4 --set fault.step_deadline_floor_s=60 \
  --set fault.inject=3:5:allreduce:stop >"$work/hang.log" 2>&1
status=$?
seconds=$(( $(date +%s) - start ))
[ $status = 0 ] || { cat "$work/hang.log"; echo "FAIL: exit status $status after $seconds s"; exit 1; }
grep -q "stopping this process (SIGSTOP) at step 5" "$work/hang.log" || { cat "$work/hang.log"; echo "FAIL: no stop"; exit 1; }
grep -q "FAILURE step 5: failed rank 3 (node 1 retired; 1 fenced with SIGKILL)" "$work/hang.log" \
  || { cat "$work/hang.log"; echo "FAIL: the stopped rank was not declared failed and fenced"; exit 1; }
grep -q "kiln run: steps 0 to 10" "$work/hang.log" || { cat "$work/hang.log"; echo "FAIL: did not finish"; exit 1; }
pgrep -f "kiln run input/tiny-cpu.ini --set run.out_dir=$work/run" >/dev/null && { echo "FAIL: a kiln process is left"; exit 1; }
"$kiln" diag "$work/run/tiny/diag.h5" --losses >"$work/hang.losses"
same_losses hang
# Issue 50: rank 3 alone was lost.
python3 "$(dirname "$0")/victims.py" "$kiln" "$work/run/tiny/diag.h5" "$work/hang.log" 6 || { echo "FAIL: victims"; exit 1; }
echo "PASS: a stopped rank was declared failed, fenced and regrouped around; the job ended on its own in $seconds s"

timeout -k 20 90 "$mpirun" -n 6 --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini --set run.out_dir="$work/slow" \
  "${settings[@]}" --set fault.hang_timeout_s=2 --set fault.step_deadline_floor_s=30 \
  --set fault.inject=3:5:forward:slow "${straggler_out_of_noise[@]}" >"$work/slow.log" 2>&1
status=$?
[ $status = 0 ] || { cat "$work/slow.log"; echo "FAIL: the slow run ended with status $status"; exit 1; }
grep -q "computing for 10 s without MPI at step 5" "$work/slow.log" || { cat "$work/slow.log"; echo "FAIL: no slow step"; exit 1; }
grep -q "FAILURE" "$work/slow.log" && { cat "$work/slow.log"; echo "FAIL: a slow rank was declared failed"; exit 1; }
grep -Eq "REBALANCE|STRAGGLER" "$work/slow.log" && { cat "$work/slow.log"; echo "FAIL: one slow step was taken for a straggler"; exit 1; }
"$kiln" diag "$work/slow/tiny/diag.h5" --losses >"$work/slow.losses"
cmp -s "$work/clean.losses" "$work/slow.losses" || { paste "$work/clean.losses" "$work/slow.losses"; echo "FAIL: losses differ"; exit 1; }
python3 "$(dirname "$0")/victims.py" "$kiln" "$work/slow/tiny/diag.h5" "$work/slow.log" 6 || { echo "FAIL: a rank was lost"; exit 1; }
echo "PASS: a rank computing 10 s without MPI (5 times the hang timeout, below the step deadline) was not declared failed"

# Issue 51: hangs found from the step's clock, not from heartbeats (T = 60 s: far later than the deadline).
for kind in stop hang; do
  start=$(date +%s.%N)
  timeout -k 20 90 "$mpirun" -n 6 --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini --set run.out_dir="$work/$kind" \
    "${settings[@]}" --set fault.hang_timeout_s=60 --set fault.inject=3:5:allreduce:$kind >"$work/$kind.log" 2>&1
  status=$?
  seconds=$(python3 -c "import time; print(round(time.time() - $start, 1))")
  [ $status = 0 ] || { cat "$work/$kind.log"; echo "FAIL: $kind: exit status $status after $seconds s"; exit 1; }
  if [ $kind = stop ]; then
    line=$(grep -o "has been stopped for [0-9.]* s, over the step's deadline of [0-9.]* s" "$work/$kind.log" | head -n 1)
  else
    line=$(grep -o "gave no sign of life for over [0-9.]* s" "$work/$kind.log" | head -n 1)
  fi
  [ -n "$line" ] || { cat "$work/$kind.log"; echo "FAIL: $kind: not ended from the step's clock"; exit 1; }
  grep -q "FAILURE step 5: failed rank 3" "$work/$kind.log" || { cat "$work/$kind.log"; echo "FAIL: $kind: no recovery"; exit 1; }
  grep -q "kiln run: steps 0 to 10" "$work/$kind.log" || { cat "$work/$kind.log"; echo "FAIL: $kind: did not finish"; exit 1; }
  # Declared within 12 s of the hang: the deadline (10 s, the floor) and a check every quarter second.
  declared=$(echo "$line" | grep -oE "[0-9]+(\.[0-9]+)? s" | head -n 1 | cut -d' ' -f1)
  python3 -c "import sys; sys.exit(0 if float('$declared') <= 12 else 1)" || { echo "FAIL: $kind: declared after $declared s"; exit 1; }
  "$kiln" diag "$work/$kind/tiny/diag.h5" --losses >"$work/$kind.losses"
  same_losses "$kind"
  python3 "$(dirname "$0")/victims.py" "$kiln" "$work/$kind/tiny/diag.h5" "$work/$kind.log" 6 || { echo "FAIL: $kind: victims"; exit 1; }
  echo "PASS: a rank that hung ($kind) in step 5 was ended from the step's clock ($line); the job recovered with the failure-free losses in $seconds s"
done

timeout -k 20 90 "$mpirun" -n 6 --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini --set run.out_dir="$work/stalled" \
  "${settings[@]}" --set checkpoint.every=4 --set fault.hang_timeout_s=2 --set fault.step_deadline_floor_s=4 \
  --set fault.inject=3:3:write:slow >"$work/stalled.log" 2>&1
status=$?
[ $status = 0 ] || { cat "$work/stalled.log"; echo "FAIL: the run with a stalled write ended with status $status"; exit 1; }
grep -Eq "FAILURE|no sign of life" "$work/stalled.log" && { cat "$work/stalled.log"; echo "FAIL: a rank waiting on a stalled checkpoint write was taken for hung"; exit 1; }
grep -q "step-00000004.h5 written in the background" "$work/stalled.log" || { cat "$work/stalled.log"; echo "FAIL: no background checkpoint"; exit 1; }
"$kiln" diag "$work/stalled/tiny/diag.h5" --losses >"$work/stalled.losses"
same_losses stalled
python3 "$(dirname "$0")/victims.py" "$kiln" "$work/stalled/tiny/diag.h5" "$work/stalled.log" 6 || { echo "FAIL: stalled: a rank was lost"; exit 1; }
echo "PASS: a background checkpoint write stalled 10 s with the HDF5 library held, over the 4 s step deadline: nobody taken for hung"
