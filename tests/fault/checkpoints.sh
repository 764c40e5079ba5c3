#!/usr/bin/env bash
# Parallel, background, verified checkpoints (issue 21), on 6 ranks as 3 nodes of 2 (pipelines 2+1, f = 1),
# checkpoint.every = 3 (steps 3, 6 and 9 in the background, 10 at the end). Pass criteria, each printed as PASS:
#  1. Written in parallel: step-00000009.parts holds the parts of several writers, the periodic checkpoints are
#     written in the background (the log and diag.h5 say so), and the final checkpoint's weights and both
#     moments equal, bit for bit, those of the same run writing one file from rank 0 (checkpoint.parallel =
#     false). A 1-rank run resumed from the step-6 checkpoint continues with the 6-rank run's losses.
#  2. A writer SIGKILLed in the middle of writing its part of the step-6 checkpoint (in the background,
#     checkpoint.every = 6 here): the run recovers and finishes with the failure-free losses, the lost
#     checkpoint is taken again of the first step committed after the recovery (7, 8 or 9, said and written),
#     `latest` names step 10, and no temporary file or parts directory without its index is left.
#  3. Rank 0 SIGKILLed while it publishes the step-6 checkpoint (its index written, not yet renamed): the
#     same, and the dead writer's temporaries are gone.
#  4. A flipped bit in a stored tensor of the newest checkpoint: `kiln checkpoint` names the layer it cannot
#     read back and exits 1; a resume says it cannot be restored, falls back to the one before it, and finishes.
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4 checkpoint_diff=$5 flip=$6
rm -rf "$work"
mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
ckpt() { echo "$work/$1/tiny/ckpt"; }
clean_directory() {  # NAME: no temporary and no parts directory without its index
  local dir
  dir=$(ckpt "$1")
  grep -q "tmp" <<<"$(ls -a "$dir")" && { ls -a "$dir"; fail "$1: a temporary is left"; }
  for parts in "$dir"/*.parts; do
    [ -e "${parts%.parts}.h5" ] || fail "$1: $(basename "$parts") has no index"
    grep -q "tmp" <<<"$(ls -a "$parts")" && fail "$1: a temporary is left in $(basename "$parts")"
  done
  grep -qx "step-00000010.h5" "$dir/latest" || fail "$1: latest is not step 10"
}
retaken() {  # NAME: the step-6 checkpoint lost to the failure is taken again after the recovery, and written (sets at)
  at=$(sed -n 's/.*checkpoint of step 6 was lost to a failure while written: taking one of step \([789]\) now.*/\1/p' \
    "$work/$1.log" | sed -n 1p)
  [ -n "$at" ] || { cat "$work/$1.log"; fail "$1: the lost step-6 checkpoint was not taken again at step 7, 8 or 9"; }
  grep -q "checkpoint .*step-0000000$at.h5 written" "$work/$1.log" || { cat "$work/$1.log"; fail "$1: step $at's checkpoint was not written"; }
}

must clean 6 --set checkpoint.every=3
must single 6 --set checkpoint.every=3 --set checkpoint.parallel=false
losses clean
losses single
same_curve "$work/clean.losses" "$work/single.losses" 10
writers=$(ls "$(ckpt clean)/step-00000009.parts" | grep -c "^part-")
[ "$writers" -ge 3 ] || fail "step 9 has $writers parts, expected the layers spread over at least 3 writers"
grep -q "checkpoint .*step-00000006.h5 written in the background: training stalled" "$work/clean.log" \
  || { cat "$work/clean.log"; fail "no background checkpoint"; }
"$kiln" diag "$(ckpt clean)/../diag.h5" >"$work/clean.diag"
grep -q "step-00000006.h5 in the background" "$work/clean.diag" || fail "no checkpoint event in diag.h5"
grep -q "from step       0  .* step [0-9.]* ms, predicted [0-9.]* ms ([0-9.]*x)" "$work/clean.diag" \
  || { cat "$work/clean.diag"; fail "kiln diag does not set the layout's measured step beside the prediction"; }
[ ! -e "$(ckpt single)/step-00000010.parts" ] || fail "checkpoint.parallel = false wrote parts"
for kind in params adam_m adam_v; do
  "$checkpoint_diff" "$(ckpt clean)/step-00000010.h5" "$(ckpt single)/step-00000010.h5" $kind 0 >/dev/null \
    || fail "the parallel checkpoint's $kind differ from the single file's"
done
clean_directory clean
must resumed 1 --set cluster.ranks_per_node=1 --set plan.pipelines= --set fault.f=0 \
  --set checkpoint.from="$(ckpt clean)/step-00000006.h5"
grep -q "resumed from .*step-00000006.h5 at step 6" "$work/resumed.log" || fail "no resume from step 6"
losses resumed
same_curve <(tail -n 4 "$work/clean.losses") "$work/resumed.losses" 4
echo "PASS 1: $writers writers, in the background, equal to the single-file checkpoint; resumed on 1 rank with the same losses"

# A writer other than rank 0 (part numbers are ranks), killed after the first layer of its part of step 6.
writer=$(ls "$(ckpt clean)/step-00000006.parts" | sed -n 's/^part-0*\([1-9][0-9]*\)\.h5$/\1/p' | sed -n 1p)
[ -n "$writer" ] || fail "no writer besides rank 0"
must write_killed 6 --set checkpoint.every=6 --set fault.inject="$writer:5:write"
grep -q "FAILURE step .*failed rank $writer " "$work/write_killed.log" || { cat "$work/write_killed.log"; fail "no recovery (write)"; }
losses write_killed
same_curve "$work/clean.losses" "$work/write_killed.losses" 10
clean_directory write_killed
retaken write_killed
echo "PASS 2: a writer killed in its background write (rank $writer): recovered, same losses, the lost checkpoint taken again at step $at, nothing half-written left"

must publish_killed 6 --set checkpoint.every=6 --set fault.inject=0:5:publish
grep -q "FAILURE step .*failed rank 0 " "$work/publish_killed.log" || { cat "$work/publish_killed.log"; fail "no recovery (publish)"; }
losses publish_killed
same_curve "$work/clean.losses" "$work/publish_killed.losses" 10
clean_directory publish_killed
retaken publish_killed
echo "PASS 3: rank 0 killed while publishing: recovered, same losses, the lost checkpoint taken again at step $at, its temporaries removed"

cp -r "$work/clean" "$work/corrupt"
part=$(ls "$(ckpt corrupt)/step-00000010.parts"/part-*.h5 | sed -n 1p)
dataset=$(h5ls -r "$part" | awk '/params\/.*Dataset/ && !found { print $1; found = 1 }')
"$flip" "$part" "$dataset" >/dev/null || fail "could not flip a bit in $part $dataset"
set +e
"$kiln" checkpoint "$(ckpt corrupt)/step-00000010.h5" >"$work/verify.txt"
status=$?
set -e
[ $status = 1 ] && grep -q "UNREADABLE: params/tensor .* does not read back" "$work/verify.txt" \
  || { cat "$work/verify.txt"; fail "kiln checkpoint did not find the flipped bit (exit $status)"; }
run "$work/corrupt" 6 --set checkpoint.every=3 --set run.steps=12 >"$work/corrupt.log" 2>&1 \
  || { cat "$work/corrupt.log"; fail "the resume with a corrupt latest failed"; }
grep -q "step-00000010.h5 cannot be restored (.*); falling back to step-00000009.h5" "$work/corrupt.log" \
  || { cat "$work/corrupt.log"; fail "no fallback"; }
grep -q "resumed from .*step-00000009.h5 at step 9" "$work/corrupt.log" || fail "not resumed from step 9"
echo "PASS 4: a corrupt newest checkpoint ($dataset) is refused and the one before it restored"
