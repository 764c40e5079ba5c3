#!/usr/bin/env bash
# The same maths on every layout. The tiny deck (6 layers) on the licence
# texts, fp32, 12 steps, trained as:
#   one      1 rank                                      (the reference)
#   dp       2 nodes of 1 rank: two 1-node pipelines     (plan.pipelines = 1+1)
#   hetero   3 nodes of 1 rank: a 2-node and a 1-node pipeline (2+1)
#   deep     3 nodes of 1 rank: one 3-stage pipeline, f = 0, 4 microbatches (more than stages)
#   shallow  the same with micro-batch 8: 2 microbatches (fewer than stages), against a 1-rank run with 8
#   uneven   2+1 with pinned microbatches 3 and 1        (2:3+1:1)
#   nodes2   3 nodes of 2 ranks: a 4-stage and a 2-stage pipeline (2+1), a node's ranks holding consecutive stages
# Pass criteria, each printed as PASS:
#  1. Every layout's loss and gradient norm equal the reference's at every step to 1e-5 relative, with clipping
#     off (train.grad_clip = 0) and with clipping acting on every step (0.5; the norms are 1.5 to 3 here), and
#     its final checkpoint's parameters equal the reference's to 1e-5 relative.
#  2. After one step, every layer's gradient (AdamW's first moment, (1 - beta1) g) equals the reference's to 1e-6.
#  3. A checkpoint written at step 6 on one layout and resumed on another (hetero -> nodes2, nodes2 -> one)
#     continues with the reference's losses through step 12.
#  4. With train.grad_sums = during_backward (the sums start layer by layer inside each stage's last backward, as
#     on GPUs; here each sum blocks, the strictest case for deadlock), hetero, uneven and nodes2 give the
#     reference's losses, norms and final parameters.
# The runs without clipping write a checkpoint every step and keep them all: PASS 2 reads their step 1 and
# PASS 3 resumes from their step 6 (checkpoint.from), so those criteria need no runs of their own.
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 diff=$4 work=$5
rm -rf "$work"
mkdir -p "$work"

# run NAME RANKS RANKS_PER_NODE PIPELINES F [--set k=v ...]: trains into $work/runs/NAME.
run() {
  local name=$1 ranks=$2 perNode=$3 pipelines=$4 f=$5
  shift 5
  timeout -k 20 120 "$mpirun" -n "$ranks" --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini \
    --set run.out_dir="$work/runs" --set run.name="$name" --set data.dir="$data" --set data.mix=licenses:1 \
    --set data.tokenizer=bytes --set model.blocks=4 --set run.steps=12 --set train.decay_steps=7 --set checkpoint.every=0 \
    --set checkpoint.resume=false --set cluster.ranks_per_node="$perNode" --set plan.pipelines="$pipelines" \
    --set fault.f="$f" "$@" >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; echo "FAIL: run $name"; exit 1; }
  "$kiln" diag "$work/runs/$name/diag.h5" --losses >"$work/$name.losses"
}

# same_curve REFERENCE NAME STEPS: losses and gradient norms of NAME against REFERENCE.
same_curve() {
  paste "$work/$1.losses" "$work/$2.losses" | awk -v name="$2" -v steps="$3" '
    { n++; if ($1 != $4) bad++
      d = $2 - $5; if (d < 0) d = -d; g = $3 - $6; if (g < 0) g = -g
      if (d > 1e-5 * $2 || g > 1e-5 * $3) { bad++; print name ": step " $1 " loss " $2 " vs " $5 ", |g| " $3 " vs " $6 } }
    END { if (n != steps || bad) { print "FAIL: " name " differs from the reference (" n " steps)"; exit 1 } }'
}

layouts() {  # CLIP [--set k=v ...]: every layout, compared with the reference
  local clip=$1 tag=c$1
  shift
  run one-$tag 1 1 "" 0 --set train.grad_clip="$clip" "$@"
  run one8-$tag 1 1 "" 0 --set train.grad_clip="$clip" --set train.micro_batch=8 "$@"
  run dp-$tag 2 1 1+1 1 --set train.grad_clip="$clip" "$@"
  run hetero-$tag 3 1 2+1 1 --set train.grad_clip="$clip" "$@"
  run deep-$tag 3 1 3 0 --set train.grad_clip="$clip" "$@"
  run shallow-$tag 3 1 3 0 --set train.grad_clip="$clip" --set train.micro_batch=8 "$@"
  run uneven-$tag 3 1 2:3+1:1 1 --set train.grad_clip="$clip" "$@"
  run nodes2-$tag 6 2 2+1 1 --set train.grad_clip="$clip" "$@"
  grep -q "layout     2+1 (4+2 stages) on 3 nodes: pinned" "$work/nodes2-$tag.log" || { echo "FAIL: nodes2 layout"; exit 1; }
  grep -q "pipeline 0 microbatches 0-2" "$work/uneven-$tag.log" || { echo "FAIL: uneven shares"; exit 1; }
  for name in dp hetero deep uneven nodes2; do
    same_curve one-$tag $name-$tag 12
    "$diff" "$work/runs/one-$tag/ckpt/step-00000012.h5" "$work/runs/$name-$tag/ckpt/step-00000012.h5" params 1e-5 >/dev/null \
      || { "$diff" "$work/runs/one-$tag/ckpt/step-00000012.h5" "$work/runs/$name-$tag/ckpt/step-00000012.h5" params 1e-5; exit 1; }
  done
  same_curve one8-$tag shallow-$tag 12
}
layouts 0 --set checkpoint.every=1 --set checkpoint.keep=12
layouts 0.5
awk '$3 <= 0.5 { low++ } END { if (low) { print "FAIL: clipping at 0.5 did not act on every step"; exit 1 } }' "$work/one-c0.losses"
echo "PASS 1: losses, gradient norms and final parameters of 7 layouts equal the 1-rank run's, with and without clipping"

for name in dp hetero deep uneven nodes2; do
  "$diff" "$work/runs/one-c0/ckpt/step-00000001.h5" "$work/runs/$name-c0/ckpt/step-00000001.h5" adam_m 1e-6 \
    || { echo "FAIL: gradients of $name"; exit 1; }
done
echo "PASS 2: after one step every layer's gradient equals the 1-rank gradient on 5 layouts"

# Written on one layout at step 6 (the 12-step runs' checkpoints), resumed on another.
run moved 6 2 2+1 1 --set checkpoint.resume=true --set checkpoint.from="$work/runs/hetero-c0/ckpt/step-00000006.h5" \
  --set train.grad_clip=0
grep -q "resumed from .*hetero-c0/ckpt/step-00000006.h5 at step 6" "$work/moved.log" \
  || { cat "$work/moved.log"; echo "FAIL: no resume"; exit 1; }
run back 1 1 "" 0 --set checkpoint.resume=true --set checkpoint.from="$work/runs/nodes2-c0/ckpt/step-00000006.h5" \
  --set train.grad_clip=0
grep -q "resumed from .*nodes2-c0/ckpt/step-00000006.h5 at step 6" "$work/back.log" \
  || { cat "$work/back.log"; echo "FAIL: no resume"; exit 1; }
# The resumed runs' diag.h5 holds steps 7 to 12: compared with the reference's.
tail -n 6 "$work/one-c0.losses" >"$work/one-c0.last6.losses"
same_curve one-c0.last6 moved 6
same_curve one-c0.last6 back 6
echo "PASS 3: checkpoints written on 2+1 (3 ranks) and 2+1 (6 ranks) resume on 6 ranks and on 1 rank with the reference losses"

for spec in "hetero 3 1 2+1" "uneven 3 1 2:3+1:1" "nodes2 6 2 2+1"; do
  read -r name ranks perNode pipelines <<<"$spec"
  run during-$name "$ranks" "$perNode" "$pipelines" 1 --set train.grad_clip=0 --set train.grad_sums=during_backward
  same_curve one-c0 during-$name 12
  "$diff" "$work/runs/one-c0/ckpt/step-00000012.h5" "$work/runs/during-$name/ckpt/step-00000012.h5" params 1e-5 >/dev/null \
    || { echo "FAIL: parameters of during-$name"; exit 1; }
done
echo "PASS 4: sums started inside the last backward give the reference's losses, norms and parameters on 3 layouts"
