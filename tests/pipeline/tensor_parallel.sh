#!/usr/bin/env bash
# Tensor-parallel stages end to end: the tiny deck (6 layers, 4 heads) on the licence texts, fp32,
# 10 steps, clipping off. Pass criteria, each printed as PASS:
#  1. One node of 4 ranks as one stage 4 wide, as two stages 2 wide, and 2 nodes of 2 ranks as two 1-node
#     replicas of one stage 2 wide each (their gradient sums pair shards with shards): every step's loss
#     and gradient norm equal the 1-rank run's to 1e-5 relative, and so do the final parameters.
#  2. A 3-layer model (model.blocks = 1) on a node of 4 ranks, which one-rank stages cannot hold: the
#     planner splits the stages, and the losses equal the 1-rank run's.
#  3. Checkpoints stay layout-free: written at step 5 by the 4-wide stage, resumed on 1 rank; written by
#     1 rank, resumed on two 2-wide stages: both continue with the reference's losses.
#  4. A node lost with split stages: 3 nodes of 2 ranks, f = 1, two 1-node replicas of one 2-wide stage
#     and a spare node; rank 2 is killed in the gradient sums of step 5. The spare's two ranks receive
#     their shards from the surviving replica, and every loss and gradient norm equals the failure-free
#     run's.
#  5. Replicas of different widths (plan.pipelines = 1w2+1w1: one stage of 2 ranks beside two stages of
#     one rank, whose gradient sums pair atoms): the 1-rank losses. Then on 3 nodes of 2 with f = 1, rank 0
#     (of the 2-wide replica) is killed at step 5: the survivors regroup into the planner's templates, the
#     one-rank stages' layers become shards (partly kept on the same rank, partly moved), the spare node
#     receives its shards, and the losses are the failure-free run's.
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4 checkpoint_diff=$5
rm -rf "$work"
mkdir -p "$work"
. "$(dirname "$0")/../fault/lib.sh"
split() { echo --set cluster.ranks_per_node="$1" --set plan.stage_width="$2" --set plan.pipelines="$3" --set fault.f="$4"; }

# shellcheck disable=SC2046
{
  must one 1 $(split 1 1 "" 0)
  must w4 4 $(split 4 4 1 0)
  must w2 4 $(split 4 2 1 0)
  must replicas 4 $(split 2 2 1+1 1)
}
grep -q "layout     1 (1x4 stages x ranks)" "$work/w4.log" || fail "w4 is not one stage of 4 ranks"
grep -q "layout     1 (2x2 stages x ranks)" "$work/w2.log" || fail "w2 is not two stages of 2 ranks"
grep -q "layout     1+1 (1x2+1x2 stages x ranks)" "$work/replicas.log" || fail "replicas are not two 2-wide stages"
losses one
for name in w4 w2 replicas; do
  losses $name
  same_curve "$work/one.losses" "$work/$name.losses" 10 || fail "$name"
  "$checkpoint_diff" "$work/one/tiny/ckpt/step-00000010.h5" "$work/$name/tiny/ckpt/step-00000010.h5" params 1e-5 >/dev/null \
    || fail "final parameters of $name"
done
echo "PASS 1: stages 4 and 2 ranks wide and replicas of split stages give the 1-rank losses, norms and parameters"

# shellcheck disable=SC2046
{
  must one3 1 $(split 1 1 "" 0) --set model.blocks=1
  must three 4 $(split 4 0 "" 0) --set model.blocks=1
}
grep -q "x[24] stages x ranks" "$work/three.log" || fail "the 3-layer model did not get split stages"
losses one3
losses three
same_curve "$work/one3.losses" "$work/three.losses" 10 || fail "three"
echo "PASS 2: a 3-layer model on a node of 4 ranks runs on split stages with the 1-rank losses"

# shellcheck disable=SC2046
{
  # The cosine horizon of the 10-step reference (5 steps after 5 of warm-up), fixed by the first start.
  must moved 4 $(split 4 4 1 0) --set run.steps=5 --set checkpoint.every=5 --set train.decay_steps=5
  must moved 1 $(split 1 1 "" 0) --set checkpoint.resume=true
  must back 1 $(split 1 1 "" 0) --set run.steps=5 --set checkpoint.every=5 --set train.decay_steps=5
  must back 4 $(split 4 2 1 0) --set checkpoint.resume=true
}
for name in moved back; do
  grep -q "resumed from .*step-00000005.h5 at step 5" "$work/$name.log" || fail "$name did not resume"
  losses $name
  same_curve "$work/one.losses" "$work/$name.losses" 10 || fail "$name"
done
echo "PASS 3: checkpoints written by a 4-wide stage and by 1 rank resume on 1 rank and on 2-wide stages"

# shellcheck disable=SC2046
{
  must clean 6 $(split 2 2 1+1 1)
  must killed 6 $(split 2 2 1+1 1) --set fault.inject=2:5:allreduce
}
grep -q "FAILURE step 5: failed rank 2 (node 1 retired)" "$work/killed.log" || fail "no recovery report"
losses clean
losses killed
same_curve "$work/clean.losses" "$work/killed.losses" 10 || fail "killed"
"$checkpoint_diff" "$work/clean/tiny/ckpt/step-00000010.h5" "$work/killed/tiny/ckpt/step-00000010.h5" params 1e-5 >/dev/null \
  || fail "final parameters after the failure"
echo "PASS 4: a node lost with 2-wide stages: the spare receives its shards and the losses are the failure-free run's"

# shellcheck disable=SC2046
{
  must mixed 4 $(split 2 0 1w2+1w1 1)
  must mixed_clean 6 $(split 2 0 1w2+1w1 1)
  must mixed_killed 6 $(split 2 0 1w2+1w1 1) --set fault.inject=0:5:forward
}
grep -q "layout     1+1 (1x2+2x1 stages x ranks)" "$work/mixed.log" || fail "mixed is not 1w2+1w1"
grep -q "FAILURE step 5: failed rank 0 (node 0 retired)" "$work/mixed_killed.log" || fail "no recovery report (mixed)"
for name in mixed mixed_clean mixed_killed; do losses $name; done
same_curve "$work/one.losses" "$work/mixed.losses" 10 || fail "mixed"
same_curve "$work/mixed_clean.losses" "$work/mixed_killed.losses" 10 || fail "mixed_killed"
same_curve "$work/one.losses" "$work/mixed_clean.losses" 10 || fail "mixed_clean"
echo "PASS 5: replicas of widths 2 and 1 give the 1-rank losses, and a node lost among them regroups with the same losses"
