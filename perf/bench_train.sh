#!/usr/bin/env bash
# CPU training benchmarks (issue 5): tokens/s and time per step on one rank
# for the demo model and a 6-block, 256-wide model, with the share of step
# time in data wait, forward, backward, gradient sync and optimizer (from
# diag.h5). Baseline in the same run: the sum of the layers' forward and
# backward times that kiln profile measures for the same microbatch, times the
# microbatches of a step: the pure layer compute, with no loader, loss,
# optimizer or bookkeeping. overhead = seconds_per_step / compute_per_step.
#
#   ./bootstrap.sh demo && perf/bench_train.sh     (needs the demo data in data/)
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
work=$build/perf-train
[ -f data/manuals/manifest.json ] || { echo "bench_train: run ./bootstrap.sh demo first (it prepares data/)" >&2; exit 1; }
rm -rf "$work"
common=(--set fault.f=0 --set cluster.ranks_per_node=0 --set plan.pipelines= --set run.out_dir="$work" --set train.threads=2
        --set checkpoint.resume=false)

bench() {  # name steps micro_batch global_batch extra-settings...
  local name=$1 steps=$2 micro=$3 batch=$4; shift 4
  "$build/kiln" run input/tiny-cpu.ini "${common[@]}" --set run.name="$name" --set run.steps="$steps" \
    --set train.micro_batch="$micro" --set data.global_batch="$batch" "$@" >"$work-$name.log" 2>&1
  "$build/kiln" profile input/tiny-cpu.ini --set train.threads=2 --micro-batch "$micro" --out "$work/$name-profile.h5" \
    "$@" >"$work-$name-profile.log"
  local compute summary
  compute=$(sed -nE 's/.*total forward ([0-9.]+) ms, backward ([0-9.]+) ms.*/\1 \2/p' "$work-$name-profile.log" |
            awk -v m=$((batch / micro)) '{printf "%.6f", ($1 + $2) / 1000 * m}')
  summary=$("$build/kiln" diag "$work/$name/diag.h5" --json)
  echo "{\"bench\":\"train\",\"model\":\"$name\",\"ranks\":1,\"threads\":2,\"micro_batch\":$micro,\"global_batch\":$batch,\"compute_s_per_step\":$compute,\"diag\":$summary}"
}

mkdir -p "$work"
bench demo 30 4 16 --set model.blocks=2  # the 2-block demo model of the earlier figures
bench 6x256 10 4 16 --set model.blocks=6 --set model.d_model=256 --set model.heads=8 --set data.seq_len=128
