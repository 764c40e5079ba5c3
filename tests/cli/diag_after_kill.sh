#!/usr/bin/env bash
# Pass criterion: a run killed with SIGKILL in the middle of training leaves a
# diag.h5 that kiln diag reads (steps recorded before the kill, events), and
# that --plot turns into PNGs; the run then resumes from its last checkpoint
# and its diag.h5 keeps the old records and adds the new ones. The final
# line says so.
set -euo pipefail
kiln=$1 work=$2 data=$3
# The log too: the run below truncates it only once it starts, and the wait would read an old run's steps.
rm -rf "$work" "$work.log"
"$kiln" run input/tiny-cpu.ini --set run.out_dir="$work" --set run.steps=100000 --set checkpoint.every=5 --set fault.f=0 \
  --set data.dir="$data" --set data.mix=licenses:1 --set data.tokenizer=bytes --set train.threads=1 --set plan.pipelines= >"$work.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do  # until some steps are recorded, at most 60 s
  grep -q "step *12/" "$work.log" 2>/dev/null && break
  kill -0 $pid 2>/dev/null || { cat "$work.log"; exit 1; }
  sleep 0.1
done
kill -9 $pid
wait $pid 2>/dev/null || true
"$kiln" diag "$work/tiny/diag.h5" --plot "$work/plots"
steps=$("$kiln" diag "$work/tiny/diag.h5" | sed -nE 's/.*: ([0-9]+) steps recorded/\1/p')
[ "$steps" -ge 12 ] || { echo "only $steps steps readable"; exit 1; }
[ -s "$work/plots/loss.png" ] || exit 1
echo "killed mid-run; diag.h5 still reads $steps steps"
"$kiln" run input/tiny-cpu.ini --set run.out_dir="$work" --set run.steps=$((steps + 3)) --set fault.f=0 \
  --set data.dir="$data" --set data.mix=licenses:1 --set data.tokenizer=bytes --set train.threads=1 --set plan.pipelines= | grep "resumed from"
after=$("$kiln" diag "$work/tiny/diag.h5")
grep -q "resume " <<<"$after" || { echo "no resume event"; echo "$after"; exit 1; }
grep -q ": $((steps + 3)) steps recorded" <<<"$after" || { echo "$after"; exit 1; }
echo "resumed; diag.h5 holds all $((steps + 3)) steps"
