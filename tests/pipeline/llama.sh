#!/usr/bin/env bash
# The llama family on everything kiln does for a model (issue 38, item 1): the tiny deck as a llama with
# grouped-query attention (model.family = llama, 4 heads, 2 key/value heads), fp32, 10 steps, clipping off.
# Pass criteria, each printed as PASS:
#  1. Layouts: 3 nodes of 2 ranks with pipelines 2+1 and stages 2 ranks wide, and the planner's own choice
#     on 2 nodes of 2 ranks (nothing pinned): every step's loss and gradient norm equal the 1-rank run's to
#     1e-5 relative, and so do the final parameters.
#  2. A node lost: on 2+1 with 2-wide stages, rank 2 is killed in the gradient sums of step 5; the
#     survivors regroup, the lost shards are copied from the other replica, and every loss and gradient
#     norm equals the failure-free run's.
#  3. Checkpoints: written at step 5 on 2+1 with 2-wide stages, resumed on 1 rank: the reference's losses.
#  4. Refusals before any training, naming the key: a stage width that does not divide model.kv_heads, and
#     model.kv_heads not dividing model.heads.
#  5. Tied embeddings (model.tie_embeddings): on 2+1 with 2-wide stages, rank 2 killed in the gradient sums of
#     step 5, every loss and gradient norm equals the tied 1-rank run's; after the recovery the last stage's
#     copy of the embedding still equals the first stage's bit for bit (kiln export checks); and the untied
#     checkpoint of item 3 does not resume as a tied model (named: model.tie_embeddings).
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4 checkpoint_diff=$5
rm -rf "$work"
mkdir -p "$work"
. "$(dirname "$0")/../fault/lib.sh"
llama=(--set model.family=llama --set model.kv_heads=2 --set model.ffn_hidden=96)
layout() { echo --set cluster.ranks_per_node="$1" --set plan.stage_width="$2" --set plan.pipelines="$3" --set fault.f="$4"; }

# shellcheck disable=SC2046
{
  must one 1 "${llama[@]}" $(layout 1 1 "" 0)
  must wide 6 "${llama[@]}" $(layout 2 2 2+1 1)
  must planned 4 "${llama[@]}" --set cluster.ranks_per_node=2 --set plan.pipelines= --set plan.stage_width=0 --set fault.f=1
}
grep -q "layout     2+1 (2x2+1x2 stages x ranks)" "$work/wide.log" || { grep layout "$work/wide.log"; fail "wide is not 2+1 with 2-wide stages"; }
losses one
for name in wide planned; do
  losses $name
  same_curve "$work/one.losses" "$work/$name.losses" 10 || fail "$name"
  "$checkpoint_diff" "$work/one/tiny/ckpt/step-00000010.h5" "$work/$name/tiny/ckpt/step-00000010.h5" params 1e-5 >/dev/null \
    || fail "final parameters of $name"
done
echo "PASS 1: a llama with grouped-query attention on 2+1 pipelines of 2-wide stages and on the planner's layout ($(grep -o "layout     [^;]*" "$work/planned.log" | head -1 | sed 's/layout     //')) gives the 1-rank losses, norms and parameters"

# shellcheck disable=SC2046
must killed 6 "${llama[@]}" $(layout 2 2 2+1 1) --set fault.inject=2:5:allreduce
grep -q "FAILURE step 5: failed rank 2" "$work/killed.log" || { cat "$work/killed.log"; fail "no recovery report"; }
losses killed
same_curve "$work/wide.losses" "$work/killed.losses" 10 || fail "killed"
echo "PASS 2: a node lost with 2-wide llama stages: the survivors regroup and the losses are the failure-free run's"

# shellcheck disable=SC2046
{
  must resumed 6 "${llama[@]}" $(layout 2 2 2+1 1) --set run.steps=5 --set checkpoint.every=5 --set train.decay_steps=5
  must resumed 1 "${llama[@]}" $(layout 1 1 "" 0) --set checkpoint.resume=true
}
grep -q "resumed from .*step-00000005.h5 at step 5" "$work/resumed.log" || fail "resumed did not resume"
losses resumed
same_curve "$work/one.losses" "$work/resumed.losses" 10 || fail "resumed"
echo "PASS 3: a llama checkpoint written on 2-wide stages resumes on 1 rank with the reference's losses"

# shellcheck disable=SC2046
if run "$work/mqa" 4 "${llama[@]}" --set model.kv_heads=1 $(layout 2 2 1+1 1) >"$work/mqa.log" 2>&1; then
  fail "a 2-wide stage of a model with one key/value head was accepted"
fi
grep -q "model.kv_heads = 1 is not a multiple of 2" "$work/mqa.log" || { cat "$work/mqa.log"; fail "the width refusal does not name model.kv_heads"; }
if run "$work/kv3" 1 "${llama[@]}" --set model.kv_heads=3 $(layout 1 1 "" 0) >"$work/kv3.log" 2>&1; then
  fail "model.kv_heads = 3 of 4 heads was accepted"
fi
grep -q "model.kv_heads = 3 does not divide model.heads = 4" "$work/kv3.log" || { cat "$work/kv3.log"; fail "kv_heads = 3 not refused by name"; }
echo "PASS 4: a stage width that does not divide model.kv_heads, and model.kv_heads not dividing model.heads, are refused by name"

tied=(--set model.tie_embeddings=true)
# shellcheck disable=SC2046
{
  must tied-one 1 "${llama[@]}" "${tied[@]}" $(layout 1 1 "" 0)
  must tied-killed 6 "${llama[@]}" "${tied[@]}" $(layout 2 2 2+1 1) --set fault.inject=2:5:allreduce
}
grep -q "FAILURE step 5: failed rank 2" "$work/tied-killed.log" || { cat "$work/tied-killed.log"; fail "no recovery report (tied)"; }
losses tied-one
losses tied-killed
same_curve "$work/tied-one.losses" "$work/tied-killed.losses" 10 || fail "tied, killed"
"$kiln" export "$work/tied-killed/tiny/ckpt/step-00000010.h5" "$work/tied-export" >"$work/tied-export.log" 2>&1 ||
  { cat "$work/tied-export.log"; fail "kiln export of the tied run"; }
grep -q "the last stage's copy equals it bit for bit" "$work/tied-export.log" || { cat "$work/tied-export.log"; fail "the tied copies differ after a recovery"; }
# shellcheck disable=SC2046
if run "$work/resumed" 1 "${llama[@]}" "${tied[@]}" $(layout 1 1 "" 0) --set checkpoint.resume=true >"$work/retied.log" 2>&1; then
  fail "an untied checkpoint resumed as a tied model"
fi
grep -q "model.tie_embeddings is 0 in the checkpoint but 1 in this run" "$work/retied.log" || { cat "$work/retied.log"; fail "the tie is not named"; }
echo "PASS 5: tied embeddings: a node lost on 2-wide stages gives the tied 1-rank losses, the two copies stay equal bit for bit, and an untied checkpoint is not resumed as tied"
