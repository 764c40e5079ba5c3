#!/usr/bin/env bash
# Checkpoint benchmark (issue 21), on the CPU and disk of this machine. GPT-2
# small (124 M parameters) and medium (355 M), vocabulary 50304, seq_len 32,
# one microbatch of 1 per pipeline, as 1 rank, 2 ranks (replicas 1+1) and 4
# ranks (2+2); each trains 3 steps with checkpoint.every = 1 and writes the
# step-2 checkpoint three ways in the same run of this script:
#   single      checkpoint.parallel = false: every layer sent to rank 0, one file (kiln before)
#   parallel    every holder writes its layers into its own part, at once
#   background  the same, written by a thread while training goes on
# Per case one JSON line: the training stall (seconds the step loop waited)
# and the write time, the bytes (weights and both moments), and the rate. In
# the background mode the write time is rank 0's part (the writers' shares
# are balanced, so the rate is an estimate for all of them together).
# Beside them, PyTorch writing the same tensors: as many processes as writers,
# each torch.save-ing its share at once (perf/torch_save_shares.py, on the torch
# wheel bootstrap.sh installs).
#
#   ./bootstrap.sh build && perf/bench_checkpoint.sh
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
bench_workdir_with_licenses perf-checkpoint
: >"$work/results.jsonl"

# measure MODEL RANKS PIPELINES F MODE: one JSON line.
measure() {
  local model=$1 ranks=$2 pipelines=$3 f=$4 mode=$5 size=()
  case $model in
    small) size=(--set model.blocks=12 --set model.d_model=768 --set model.heads=12) ;;
    medium) size=(--set model.blocks=24 --set model.d_model=1024 --set model.heads=16) ;;
  esac
  local modes=()
  case $mode in
    single) modes=(--set checkpoint.parallel=false) ;;
    parallel) modes=(--set checkpoint.background=false) ;;
    background) ;;
  esac
  local name=$model-$ranks-$mode global=$(( $(tr -cd + <<<"$pipelines" | wc -c) + 1 ))
  mpirun -n "$ranks" --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini "${size[@]}" "${modes[@]}" \
    --set model.vocab=50304 --set data.seq_len=32 --set train.micro_batch=1 --set data.global_batch="$global" \
    --set train.threads=1 --set data.dir="$work/data" --set data.mix=licenses:1 --set data.tokenizer=bytes \
    --set cluster.ranks_per_node=1 --set plan.pipelines="$pipelines" --set fault.f="$f" --set plan.memory_gb=100 \
    --set run.steps=3 --set checkpoint.every=1 --set checkpoint.keep=1 --set checkpoint.resume=false \
    --set run.out_dir="$work/runs" --set run.name="$name" >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
  python3 - "$work/$name.log" "$model" "$ranks" "$mode" <<'PY' | tee -a "$work/results.jsonl"
import json, re, sys
log, model, ranks, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
line = next(l for l in open(log) if re.search(r"checkpoint \S*step-00000002\.h5 written", l))
m = re.search(r"training stalled ([0-9.]+) s, this rank wrote ([0-9.]+) MB in ([0-9.]+) s", line)
if m:
    stall, write = float(m.group(1)), float(m.group(3))
else:
    stall = write = float(re.search(r"written in ([0-9.]+) s", line).group(1))
writers = re.search(r", ([0-9]+) writers", line)
blocks, C = {"small": (12, 768), "medium": (24, 1024)}[model]
V, T = 50304, 32
params = blocks * (12 * C * C + 13 * C) + 2 * V * C + T * C + 2 * C  # untied head
gb = 12 * params / 1e9  # weights and both moments, float32
print(json.dumps({"bench": "checkpoint", "model": model, "ranks": ranks, "mode": mode,
                  "writers": int(writers.group(1)) if writers else 1, "state_gb": round(gb, 2),
                  "stall_s": stall, "write_s": write, "write_gb_per_s": round(gb / write, 3) if write > 0 else None}))
PY
  rm -rf "$work/runs/$name"   # 2-5 GB of checkpoints per case: measured, not kept
}
for model in small medium; do
  for layout in "1 1 0" "2 1+1 1" "4 2+2 1"; do
    read -r ranks pipelines f <<<"$layout"
    for mode in single parallel background; do measure "$model" "$ranks" "$pipelines" "$f" "$mode"; done
    "$torch_python" "$(dirname "$0")/torch_save_shares.py" "$model" "$ranks" "$work/torch-$model-$ranks" | tee -a "$work/results.jsonl"
    rm -rf "$work/torch-$model-$ranks"
  done
done
python3 - "$work/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {(r["model"], r["ranks"], r["mode"]): r for r in rows}
for (model, ranks, mode), r in sorted(by.items()):
    if mode == "single" or (model, ranks, "single") not in by:
        continue
    base = by[(model, ranks, "single")]
    print(json.dumps({"bench": "checkpoint-vs-single", "model": model, "ranks": ranks, "mode": mode,
                      "stall_speedup": round(base["stall_s"] / max(r["stall_s"], 1e-9), 2),
                      "write_speedup": round(base["write_s"] / max(r["write_s"], 1e-9), 2)}))
PY
