#!/usr/bin/env bash
# Fault test of kiln run under ULFM. Pass criteria, each printed as PASS:
#  1. 4 ranks as 2 nodes, f = 1; rank 3 is SIGKILLed in the gradient all-reduce
#     of step 5. The survivors revoke, shrink and agree; rank 2 leaves with its
#     node; ranks 0-1 replay step 5 with the same global batch and finish all
#     steps, and every step's loss equals the loss of the same run without a
#     failure to 1e-5 relative (only the reduction order differs).
#  2. 6 ranks as 3 nodes, f = 1, two nodes lost (steps 3 and 6): after the
#     second, more than f, kiln writes a checkpoint of the last committed step
#     and stops with exit code 75; run again on 2 ranks (a requeued job on
#     fewer nodes), it resumes from that checkpoint and finishes.
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
run() {  # out_dir ranks settings...
  local out=$1 ranks=$2
  shift 2
  timeout 120 "$mpirun" -n "$ranks" --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini --set run.out_dir="$out" \
    --set data.dir="$data" --set data.mix=licenses:1 --set data.tokenizer=bytes --set checkpoint.every=0 "$@"
}

run "$work/clean" 4 --set run.steps=10 >"$work/clean.log" 2>&1
run "$work/failed" 4 --set run.steps=10 --set fault.inject=3:5:allreduce >"$work/failed.log" 2>&1 || true
grep -q "FAILURE step 5: failed rank 3 (node 1 retired); 2 ranks on 1 node remain" "$work/failed.log" \
  || { cat "$work/failed.log"; echo "FAIL: no recovery report"; exit 1; }
grep -q "rank 2 on .*this rank's node is retired" "$work/failed.log" || { echo "FAIL: rank 2 did not leave"; exit 1; }
grep -q "kiln run: steps 0 to 10" "$work/failed.log" || { cat "$work/failed.log"; echo "FAIL: survivors did not finish"; exit 1; }
"$kiln" diag "$work/clean/tiny/diag.h5" --losses >"$work/clean.losses"
"$kiln" diag "$work/failed/tiny/diag.h5" --losses >"$work/failed.losses"
paste "$work/clean.losses" "$work/failed.losses" | awk '
  { n++; d = $2 - $4; if (d < 0) d = -d; if (d > 1e-5 * $2 || $1 != $3) { bad++; print "step " $1 ": " $2 " vs " $4 } }
  END { if (n != 10 || bad) { print "FAIL: loss curves differ (" n " steps)"; exit 1 } }'
"$kiln" diag "$work/failed/tiny/diag.h5" | grep -q "failure .*failed rank 3" || { echo "FAIL: no failure event in diag.h5"; exit 1; }
echo "PASS 1: node lost at step 5, training went on with the same loss curve"

set +e
run "$work/twice" 6 --set run.steps=10 --set fault.inject="5:3:forward,1:6:allreduce" >"$work/twice.log" 2>&1
set -e
grep -q "2 node failures since start-up, more than fault.f = 1: writing a checkpoint of step 6 from the surviving holders" "$work/twice.log" \
  || { cat "$work/twice.log"; echo "FAIL: no stop beyond f"; exit 1; }
grep -q "checkpoint .*step-00000006.h5 written" "$work/twice.log" || { cat "$work/twice.log"; echo "FAIL: no checkpoint at the stop"; exit 1; }
run "$work/twice" 2 --set run.steps=10 --set cluster.ranks_per_node=1 >"$work/requeue.log" 2>&1 \
  || { cat "$work/requeue.log"; echo "FAIL: the requeued run failed"; exit 1; }
grep -q "resumed from .*step-00000006.h5 at step 6" "$work/requeue.log" || { cat "$work/requeue.log"; echo "FAIL: no resume"; exit 1; }
grep -q "kiln run: steps 6 to 10" "$work/requeue.log" || { cat "$work/requeue.log"; echo "FAIL: requeued run did not finish"; exit 1; }
echo "PASS 2: beyond f, checkpoint and stop; the requeued run on fewer nodes finished"
