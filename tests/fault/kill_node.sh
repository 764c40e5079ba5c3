#!/usr/bin/env bash
# Fault tests of kiln run under ULFM, on pipelines. Pass criteria, each printed as PASS:
#  1. 6 ranks as 3 nodes of 2, f = 1, pipelines 2+1 (4 and 2 stages), clipping off (so that a mis-scaled
#     gradient cannot hide behind it); rank 2 (the third stage of the longer pipeline) is SIGKILLed in the
#     gradient sums of step 5. The survivors revoke, shrink and agree; rank 3 is benched with its node; the
#     others regroup into pipelines from the start-up templates, receive the layers they lack from
#     surviving holders and replay step 5. Every step's loss and gradient norm equal those of the same run
#     without a failure to 1e-5 relative, and the final checkpoint's parameters and both AdamW moments equal
#     its checkpoint's to 1e-5 (relative L2 over the model).
#  2. Two nodes at once (ranks 5 and 1 at step 3) on 1+1+1, f = 1: the surviving node holds every layer,
#     so the run goes on as one pipeline, says that its tolerance is now 0, and gives the failure-free losses.
#  4. As 1, but rank 2 dies in the middle of the gradient sums (after its first bucket), so some replicas
#     have summed and others not: the replayed step gives the same losses, norms and final parameters.
#     Again with train.grad_sums = during_backward (the sums start layer by layer inside the last backward,
#     as on GPUs): rank 2 dies inside its backward, the others inside theirs or in a sum; the same outcome.
#  5. A failure around a checkpoint (checkpoint.every = 5): rank 3 killed right after the agreement of step 4,
#     which a checkpoint follows, and in another run while the checkpoint of step 5 is written. The run
#     goes on (exit 0), every checkpoint is complete, no temporary file is left, and the losses are those of
#     the failure-free run.
#  6. A failure during the recovery: 8 ranks as 4 nodes, f = 2, pipelines 2+1+1; rank 2 dies in the sums of
#     step 5 and rank 6 while the layers migrate. The survivors recover again with both nodes retired, and
#     the losses are those of the failure-free run.
#  7. Rank 0 killed (diagnostics and progress pass to the new rank 0, whose diag.h5 holds every step), and
#     the rank of the only 1-node pipeline killed: both give the failure-free run's losses and norms.
#  8. More phases and f = 2: rank 2 killed before it sends its first activation of step 5, and rank 3 after
#     the commit of step 5, before its optimizer update (the others have updated; its layers come from their
#     surviving holders); and on 8 ranks with f = 2, two nodes lost at different steps (3 and 7). All give the
#     failure-free runs' losses.
# (Beyond f, layers lost, the beyond-f checkpoint and spares: tests/fault/redundancy.sh.)
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4 checkpoint_diff=$5
rm -rf "$work"
mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
expect_status() {  # wanted actual log
  [ "$1" = "$2" ] || { cat "$3"; echo "FAIL: exit status $2, expected $1"; exit 1; }
}

run "$work/clean" 6 >"$work/clean.log" 2>&1 || { cat "$work/clean.log"; echo "FAIL: the failure-free run"; exit 1; }
"$kiln" diag "$work/clean/tiny/diag.h5" --losses >"$work/clean.losses"

set +e
KILN_VERBOSE=1 run "$work/failed" 6 --set fault.inject=2:5:allreduce >"$work/failed.log" 2>&1  # verbose: rank 3 says it is benched
status=$?
set -e
expect_status 0 $status "$work/failed.log"
grep -q "FAILURE step 5: failed rank 2 (node 1 retired); 4 ranks on 2 nodes remain.*re-instantiated as" "$work/failed.log" \
  || { cat "$work/failed.log"; echo "FAIL: no recovery report"; exit 1; }
grep -q "rank 3 on .*this rank's node is retired; its layers handed on, it stays in the job without work (benched)" \
  "$work/failed.log" || { echo "FAIL: rank 3 was not benched"; exit 1; }
grep -q "kiln run: steps 0 to 10" "$work/failed.log" || { cat "$work/failed.log"; echo "FAIL: survivors did not finish"; exit 1; }
"$kiln" diag "$work/failed/tiny/diag.h5" --losses >"$work/failed.losses"
same_curve "$work/clean.losses" "$work/failed.losses" 10
for kind in params adam_m adam_v; do
  "$checkpoint_diff" "$work/clean/tiny/ckpt/step-00000010.h5" "$work/failed/tiny/ckpt/step-00000010.h5" $kind 1e-5
done
grep -q "failure .*failed rank 2" <<<"$("$kiln" diag "$work/failed/tiny/diag.h5")" || { echo "FAIL: no failure event in diag.h5"; exit 1; }
grep -q "from step       5  " <<<"$("$kiln" diag "$work/failed/tiny/diag.h5")" || { echo "FAIL: no second layout in diag.h5"; exit 1; }
# The /failures table holds the recovery as numbers.
"$kiln" diag "$work/failed/tiny/diag.h5" --json | python3 -c '
import json, sys
f = json.load(sys.stdin)["failures"]
assert len(f) == 1, f
f = f[0]
assert f["step"] == 5 and f["failed_ranks"] == "2" and f["retired_nodes"] == "1" and f["rounds"] == 1, f
assert f["bytes_migrated"] > 0 and f["replay_s"] > 0 and f["shrink_s"] > 0 and f["migrate_s"] > 0, f
assert f["layout"] and not f["layout"].startswith("stopped"), f
' || { "$kiln" diag "$work/failed/tiny/diag.h5" --json; echo "FAIL: /failures"; exit 1; }
echo "PASS 1: node of the longer pipeline lost at step 5; regrouped, layers migrated, same losses, norms and final state"

# The same loss in the middle of the layer-by-layer sums: after the first bucket of rank 2.
run "$work/midsums" 6 --set fault.inject=2:5:sums >"$work/midsums.log" 2>&1 || { cat "$work/midsums.log"; echo "FAIL: midsums"; exit 1; }
grep -q "killing this process (SIGKILL) at step 5 in sums" "$work/midsums.log" || { cat "$work/midsums.log"; echo "FAIL: no kill"; exit 1; }
"$kiln" diag "$work/midsums/tiny/diag.h5" --losses >"$work/midsums.losses"
same_curve "$work/clean.losses" "$work/midsums.losses" 10
"$checkpoint_diff" "$work/clean/tiny/ckpt/step-00000010.h5" "$work/midsums/tiny/ckpt/step-00000010.h5" params 1e-5
run "$work/midback" 6 --set fault.inject=2:5:sums --set train.grad_sums=during_backward >"$work/midback.log" 2>&1 \
  || { cat "$work/midback.log"; echo "FAIL: midback"; exit 1; }
grep -q "killing this process (SIGKILL) at step 5 in sums" "$work/midback.log" || { cat "$work/midback.log"; echo "FAIL: no kill"; exit 1; }
"$kiln" diag "$work/midback/tiny/diag.h5" --losses >"$work/midback.losses"
same_curve "$work/clean.losses" "$work/midback.losses" 10
"$checkpoint_diff" "$work/clean/tiny/ckpt/step-00000010.h5" "$work/midback/tiny/ckpt/step-00000010.h5" params 1e-5
echo "PASS 4: a node lost in the middle of the gradient sums, started after or during backward; the same losses, norms and final parameters"

for inj in 3:4:commit 3:4:checkpoint; do
  name=ckpt-${inj//:/-}
  run "$work/$name" 6 --set checkpoint.every=5 --set fault.inject=$inj >"$work/$name.log" 2>&1 \
    || { cat "$work/$name.log"; echo "FAIL: $inj ended the run"; exit 1; }
  grep -q "FAILURE step 4: failed rank 3" "$work/$name.log" || { cat "$work/$name.log"; echo "FAIL: $inj: no recovery"; exit 1; }
  grep -q "checkpoint .*step-00000005.h5 written" "$work/$name.log" || { cat "$work/$name.log"; echo "FAIL: $inj: no checkpoint 5"; exit 1; }
  grep -qx "step-00000010.h5" "$work/$name/tiny/ckpt/latest" || { echo "FAIL: $inj: latest"; exit 1; }
  grep -q "tmp" <<<"$(ls -a "$work/$name/tiny/ckpt")" && { ls -a "$work/$name/tiny/ckpt"; echo "FAIL: $inj: a temporary is left"; exit 1; }
  "$kiln" diag "$work/$name/tiny/diag.h5" --losses >"$work/$name.losses"
  same_curve "$work/clean.losses" "$work/$name.losses" 10
done
echo "PASS 5: failures right after a committed step and during a checkpoint write: recovered, checkpoints complete, same losses"

during=(--set fault.f=2 --set plan.pipelines=2+1+1 --set cluster.ranks_per_node=2)
run "$work/clean8" 8 "${during[@]}" >"$work/clean8.log" 2>&1 || { cat "$work/clean8.log"; echo "FAIL: clean8"; exit 1; }
run "$work/during" 8 "${during[@]}" --set fault.inject=2:5:sums,6:5:migrate >"$work/during.log" 2>&1 \
  || { cat "$work/during.log"; echo "FAIL: a failure during the recovery ended the run"; exit 1; }
grep -q "FAILURE step 5: failed rank 2 .*; then failed rank 6 " "$work/during.log" || { cat "$work/during.log"; echo "FAIL: no second round"; exit 1; }
grep -q "FAILURE step 5: failed rank 2 (node 1 retired).*then failed rank 6 (node 3 retired)" "$work/during.log" \
  || { cat "$work/during.log"; echo "FAIL: recovery report"; exit 1; }
"$kiln" diag "$work/clean8/tiny/diag.h5" --losses >"$work/clean8.losses"
"$kiln" diag "$work/during/tiny/diag.h5" --losses >"$work/during.losses"
same_curve "$work/clean8.losses" "$work/during.losses" 10
echo "PASS 6: a rank lost during the migration of a recovery: recovered again with both nodes retired, same losses"

# kill_and_compare RANK:STEP:PHASE: 6 ranks, that kill; the run finishes with the failure-free losses.
kill_and_compare() {
  local inj=$1 name=kill-${1//:/-}
  run "$work/$name" 6 --set fault.inject=$inj >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; echo "FAIL: $inj"; exit 1; }
  grep -q "killing this process (SIGKILL) at step $(echo "$inj" | cut -d: -f2) in $(echo "$inj" | cut -d: -f3)" "$work/$name.log" \
    || { cat "$work/$name.log"; echo "FAIL: $inj: no kill"; exit 1; }
  grep -q "kiln run: steps 0 to 10" "$work/$name.log" || { cat "$work/$name.log"; echo "FAIL: $inj: did not finish"; exit 1; }
  "$kiln" diag "$work/$name/tiny/diag.h5" --losses >"$work/$name.losses"
  same_curve "$work/clean.losses" "$work/$name.losses" 10
}
kill_and_compare 0:5:allreduce
kill_and_compare 4:5:backward
grep -q "takeover .*after rank 0 failed" <<<"$("$kiln" diag "$work/kill-0-5-allreduce/tiny/diag.h5")" || { echo "FAIL: no takeover"; exit 1; }
echo "PASS 7: rank 0 lost (diagnostics taken over) and the only 1-node pipeline lost: same losses"

kill_and_compare 2:5:send
kill_and_compare 3:5:optimizer
run "$work/apart" 8 "${during[@]}" --set fault.inject=2:3:backward,6:7:allreduce >"$work/apart.log" 2>&1 \
  || { cat "$work/apart.log"; echo "FAIL: two failures apart, f = 2"; exit 1; }
[ "$(grep -c "FAILURE step" "$work/apart.log")" = 2 ] || { cat "$work/apart.log"; echo "FAIL: two recoveries expected"; exit 1; }
"$kiln" diag "$work/apart/tiny/diag.h5" --losses >"$work/apart.losses"
same_curve "$work/clean8.losses" "$work/apart.losses" 10
echo "PASS 8: a rank lost at its first send and after a commit before its update, and two nodes at different steps with f = 2: same losses"

# Two nodes at once on 1+1+1 with f = 1: the node left holds every layer, so the run goes on as one
# pipeline with the tolerance lowered to 0 (said), not beyond f (tests/fault/redundancy.sh has the rest).
run "$work/twice" 6 --set plan.pipelines=1+1+1 --set fault.inject="5:3:forward,1:3:forward" >"$work/twice.log" 2>&1 \
  || { cat "$work/twice.log"; echo "FAIL: two nodes at once ended the run"; exit 1; }
grep -q "FAILURE step 3: failed ranks 1,5 (nodes 0,2 retired); 2 ranks on 1 node remain" "$work/twice.log" \
  || { cat "$work/twice.log"; echo "FAIL: recovery report"; exit 1; }
grep -q "TOLERANCE fault tolerance now 0 simultaneous node failures (fault.f = 1)" "$work/twice.log" \
  || { cat "$work/twice.log"; echo "FAIL: the lowered tolerance was not said"; exit 1; }
"$kiln" diag "$work/twice/tiny/diag.h5" --losses >"$work/twice.losses"
same_curve "$work/clean.losses" "$work/twice.losses" 10
echo "PASS 2: two nodes at once on 1+1+1: the last node holds every layer and goes on alone, tolerance 0 said, same losses"
