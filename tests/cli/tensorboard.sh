#!/usr/bin/env bash
# TensorBoard's event files, read by TensorBoard's own reader (issue 67). A run on 3 nodes of 1 rank with
# kiln's own layout (f = 1): a node asked for before the start and admitted, then rank 0 (the one that writes
# diag.h5 and the event files) killed at step 5, so another rank takes over in a file of its own; 12 steps with
# a checkpoint every 4. Its last checkpoint removed, the run is resumed for 16 steps from step 8 at another
# learning rate, so that steps 9-11 done again differ from their first values. Pass criteria, each printed as PASS:
#  1. Every step's train/loss and train/grad_norm in TensorBoard equals diag.h5's last row of that step (as
#     float32), 0 to 15, the redone steps their second values (not the first attempt's); the failure (kiln/failure/nodes_lost 1, cause
#     in kiln/failure), the admission and the resume are on the timeline at diag.h5's steps; the layout's
#     tolerance and pipelines are scalars; so are MFU and the hardware FLOPs utilization against the given
#     peak (train.peak_tflops: a CPU has no table entry), and peak memory; the step line shows the MFU.
#  2. `kiln diag --tensorboard` writes, from that diag.h5, the same tags with the same steps and values.
#  3. Refused by name: a run.tensorboard_dir that cannot be written (before any training), and the same for
#     kiln diag --tensorboard; a peak of zero; run.tensorboard = false writes none.
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4 python=$5
rm -rf "$work"
mkdir -p "$work"
. "$(dirname "$0")/../fault/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
settings=(--set cluster.ranks_per_node=1 --set fault.f=1 --set plan.pipelines= --set checkpoint.every=4
          --set fault.step_deadline_floor_s=30 --set train.peak_tflops=0.05)
mkdir -p "$work/tb/tiny" && echo 1 >"$work/tb/tiny/admit"
# Rank 1's first step is slowed (10 s) so that the node asked for starts while the job trains.
must tb 3 "${settings[@]}" --set run.steps=12 --set fault.inject=1:1:forward:slow,0:5:forward
grep -q "ADMIT after step" "$work/tb.log" || { cat "$work/tb.log"; fail "no admission"; }
grep -q "tok/s  MFU [0-9.]*%" "$work/tb.log" || { cat "$work/tb.log"; fail "no MFU in the step line"; }
losses tb && mv "$work/tb.losses" "$work/tb.first.losses"
rm -rf "$work/tb/tiny/ckpt/step-00000012.h5" "$work/tb/tiny/ckpt/step-00000012.parts"
echo "step-00000008.h5" >"$work/tb/tiny/ckpt/latest"
must tb 3 "${settings[@]}" --set run.steps=16 --set train.lr=0.006
"$kiln" diag "$work/tb/tiny/diag.h5" --json >"$work/diag.json"
"$kiln" diag "$work/tb/tiny/diag.h5" --losses >"$work/tb.losses"
[ "$(ls "$work/tb/tiny/tensorboard" | grep -c tfevents)" -ge 3 ] || fail "expected a file per writer and attempt"
"$python" "$here/tensorboard_check.py" live "$work/tb/tiny/tensorboard" "$work/tb.losses" "$work/diag.json" \
  "$work/tb.first.losses"

"$kiln" diag "$work/tb/tiny/diag.h5" --tensorboard "$work/from-diag" | grep -q "16 step rows\|[0-9]* step rows" ||
  fail "kiln diag --tensorboard said nothing"
"$python" "$here/tensorboard_check.py" same "$work/tb/tiny/tensorboard" "$work/from-diag"

if run "$work/bad" 1 --set fault.f=0 --set plan.pipelines= --set run.tensorboard_dir=/proc/kiln-cannot >"$work/bad.log" 2>&1; then
  fail "an event directory that cannot be written was accepted"
fi
grep -q "run.tensorboard_dir: /proc/kiln-cannot cannot be written" "$work/bad.log" || { cat "$work/bad.log"; fail "not named"; }
grep -q "step 1 " "$work/bad.log" && fail "trained before refusing the event directory"
if "$kiln" diag "$work/tb/tiny/diag.h5" --tensorboard /proc/kiln-cannot >"$work/bad-diag.log" 2>&1; then
  fail "kiln diag wrote into /proc"
fi
grep -q "/proc/kiln-cannot: cannot write TensorBoard's event files there" "$work/bad-diag.log" || { cat "$work/bad-diag.log"; fail "kiln diag: not named"; }
if run "$work/zero" 1 --set fault.f=0 --set plan.pipelines= --set train.peak_tflops=0 >"$work/zero.log" 2>&1; then
  fail "a peak of zero was accepted"
fi
grep -q "train.peak_tflops.*must be auto or a peak in TFLOP/s > 0" "$work/zero.log" || { cat "$work/zero.log"; fail "zero peak: not named"; }
must off 1 --set fault.f=0 --set plan.pipelines= --set run.tensorboard=false
[ ! -e "$work/off/tiny/tensorboard" ] || fail "run.tensorboard = false wrote event files"
echo "PASS 3: an event directory that cannot be written is refused by name (kiln run, kiln diag), and a peak of zero; run.tensorboard = false writes none"
