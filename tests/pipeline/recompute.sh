#!/usr/bin/env bash
# Activation recomputation (issue 38, item 6): train.recompute = selective (attention's core recomputed in
# backward) and full (each layer keeps only its input) change what is kept, not what is computed.
# Pass criteria, each printed as PASS:
#  1. The tiny gpt2 on 2+1 pipelines (6 ranks, 3 nodes of 2), and the tiny llama (grouped-query attention) on
#     2+1 pipelines of 2-wide stages: with selective and with full, every step's loss and gradient norm equal
#     those of the same run without recomputation to 1e-5 relative.
#  2. A rank killed in the backward of step 5 under full recomputation: recovered, the failure-free losses.
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
. "$(dirname "$0")/../fault/lib.sh"
llama=(--set model.family=llama --set model.kv_heads=2 --set model.ffn_hidden=96 --set cluster.ranks_per_node=2
       --set plan.stage_width=2)

for mode in none selective full; do
  must "gpt2-$mode" 6 --set plan.pipelines=2+1 --set train.recompute=$mode
  must "llama-$mode" 6 "${llama[@]}" --set plan.pipelines=2+1 --set train.recompute=$mode
  losses "gpt2-$mode"
  losses "llama-$mode"
done
grep -q "layout     2+1 (2x2+1x2 stages x ranks)" "$work/llama-full.log" || fail "the llama did not run on 2-wide stages"
for mode in selective full; do
  same_curve "$work/gpt2-none.losses" "$work/gpt2-$mode.losses" 10 || fail "gpt2 with train.recompute = $mode"
  same_curve "$work/llama-none.losses" "$work/llama-$mode.losses" 10 || fail "llama with train.recompute = $mode"
done
echo "PASS 1: selective and full recomputation give the losses of none (gpt2 on 2+1; llama on 2+1 of 2-wide stages)"

must killed 6 --set plan.pipelines=2+1 --set train.recompute=full --set fault.inject=3:5:backward
losses killed
same_curve "$work/gpt2-none.losses" "$work/killed.losses" 10 || fail "the recovered run's losses differ"
grep -q "FAILURE step 5: failed rank 3" "$work/killed.log" || fail "rank 3 did not fail in step 5"
echo "PASS 2: rank 3 killed in the backward of step 5 under full recomputation: recovered with the failure-free losses"
