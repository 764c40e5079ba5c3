#!/usr/bin/env bash
# kiln against PyTorch eager on the CPU (issue 13): the same GPT and the same
# step (perf/pytorch_gpt.py mirrors src/model/gpt.cpp) trained in one process,
# with the torch wheel bootstrap.sh installs (the same libtorch as kiln),
# alternated in one run. Models: the demo deck's (4 blocks, d_model 64,
# sequence 64) and a 6-block d_model 256 one (sequence 128); global batch 16 in
# microbatches of 4.
#
# Three programs per model and repeat:
#   kiln            `kiln run` on 1 rank with its defaults (train.threads = 0)
#   pytorch         PyTorch eager with the same thread pools as kiln chose
#   pytorch_tuned   the same, with glibc's heap kept (GLIBC_TUNABLES), which
#                   is what kiln does inside itself
# Prints one JSON line per run, then per model the medians of the step time
# and the ratios kiln/pytorch in tokens/s (> 1: kiln is faster).
#
#   ./bootstrap.sh demo && perf/bench_vs_pytorch.sh [REPEATS]
set -euo pipefail
repeats=${1:-3}
. "$(dirname "$0")/bench_env.sh"
[ -f data/manuals/manifest.json ] || { echo "bench_vs_pytorch: run ./bootstrap.sh demo first (it prepares data/)" >&2; exit 1; }
"$torch_python" -c 'import torch' 2>/dev/null || { echo "bench_vs_pytorch: needs $torch_python with torch (./bootstrap.sh build)" >&2; exit 1; }
work=$build/perf-vs-pytorch
rm -rf "$work"; mkdir -p "$work"
tunables=glibc.malloc.trim_threshold=1073741824:glibc.malloc.mmap_threshold=33554432
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

compare() {  # name steps blocks d_model heads seq [family kv_heads ffn]
  local name=$1 steps=$2 blocks=$3 d=$4 heads=$5 seq=$6 family=${7:-gpt2} kv=${8:-0} ffn=${9:-0}
  local -A times=()
  for rep in $(seq 1 "$repeats"); do
    "$kiln" run input/tiny-cpu.ini --set fault.f=0 --set cluster.ranks_per_node=0 --set plan.pipelines= \
      --set run.out_dir="$work" --set run.name="$name" --set checkpoint.resume=false --set checkpoint.every=0 \
      --set run.steps="$steps" --set train.threads=0 --set model.blocks="$blocks" --set model.d_model="$d" \
      --set model.heads="$heads" --set data.seq_len="$seq" --set data.global_batch=16 --set train.micro_batch=4 \
      --set model.family="$family" --set model.kv_heads="$kv" --set model.ffn_hidden="$ffn" \
      >"$work/$name-kiln-$rep.log" 2>&1 || { tail "$work/$name-kiln-$rep.log"; exit 1; }
    # What kiln chose: the vocabulary of the data and its thread pools, for the twin.
    local vocab blas torch_threads
    vocab=$(sed -nE 's/.*vocabulary ([0-9]+),.*/\1/p' "$work/$name-kiln-$rep.log")
    # "(OpenBLAS B threads, libtorch T)" with a libtorch on OpenBLAS, "(libtorch T threads)" otherwise.
    blas=$(sed -nE 's/.*\(OpenBLAS ([0-9]+) threads?, libtorch ([0-9]+)\).*/\1/p' "$work/$name-kiln-$rep.log")
    torch_threads=$(sed -nE 's/.*\((OpenBLAS [0-9]+ threads?, )?libtorch ([0-9]+)( threads?)?\).*/\2/p' "$work/$name-kiln-$rep.log")
    local t
    t=$("$kiln" diag "$work/$name/diag.h5" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_step_s"])')
    echo "{\"bench\":\"vs_pytorch\",\"model\":\"$name\",\"program\":\"kiln\",\"repeat\":$rep,\"median_step_s\":$t,\"blas_threads\":${blas:-0},\"torch_threads\":${torch_threads:-0}}"
    times[kiln]+="$t "
    for program in pytorch pytorch_tuned; do
      local env=()
      [ "$program" = pytorch_tuned ] && env=(GLIBC_TUNABLES=$tunables)
      local line
      line=$(env "${env[@]}" "$torch_python" perf/pytorch_gpt.py --vocab "$vocab" --seq "$seq" --d-model "$d" \
               --heads "$heads" --blocks "$blocks" --micro-batch 4 --global-batch 16 --steps "$steps" \
               --threads "${torch_threads:-1}" --blas-threads "${blas:-0}" --family "$family" --kv-heads "$kv" --ffn "$ffn")
      t=$(echo "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_step_s"])')
      echo "{\"bench\":\"vs_pytorch\",\"model\":\"$name\",\"program\":\"$program\",\"repeat\":$rep,\"median_step_s\":$t}"
      times[$program]+="$t "
    done
  done
  local k p pt
  k=$(echo "${times[kiln]}" | median) p=$(echo "${times[pytorch]}" | median) pt=$(echo "${times[pytorch_tuned]}" | median)
  echo "{\"bench\":\"vs_pytorch\",\"model\":\"$name\",\"median_step_s\":{\"kiln\":$k,\"pytorch\":$p,\"pytorch_tuned\":$pt},\"speed_vs_pytorch\":$(awk -v a="$p" -v b="$k" 'BEGIN{printf "%.3f", a/b}'),\"speed_vs_pytorch_tuned\":$(awk -v a="$pt" -v b="$k" 'BEGIN{printf "%.3f", a/b}')}"
}

compare demo 40 4 64 4 64
compare 6x256 10 6 256 8 128
# The same parameter count as a llama: 8 heads with 4 key/value heads and SwiGLU 768 make 12 d^2 a block, as
# GPT-2's 4 d^2 of attention and 8 d^2 of MLP do.
compare llama-6x256 10 6 256 8 128 llama 4 768
