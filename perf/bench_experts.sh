#!/usr/bin/env bash
# A mixture of experts on the CPU (issue 54): a llama of 6 blocks, d_model 256, 8 heads (4 key/value),
# sequence 128, global batch 16 in microbatches of 4, 10 steps, as
#   dense    SwiGLU 768
#   experts  8 experts of SwiGLU 384, 2 per token: the same active parameters a token passes through
#            (2 x 3 x 256 x 384 = 3 x 256 x 768) and 4 times the MLP's weights
# Measured, alternated REPEATS times (default 3), one JSON line each, then the medians and ratios:
#   1. kiln's tokens/s for experts against dense, on 1 rank (train.threads = 0: kiln's choice of threads);
#   2. kiln against transformers' MixtralForCausalLM of the same shape in PyTorch eager (perf/transformers_moe.py,
#      the torch wheel ./bootstrap.sh installs, whose libtorch kiln's builds use; as many threads as kiln's
#      compute pool), the same batch and step; and the dense model against transformers' LlamaForCausalLM the
#      same way, and kiln's CUDA build (run on the CPU; skipped where build-cuda/kiln is missing) on both;
#   3. the stage's sums: both models on one stage 2 ranks wide (the experts 4 and 4), against 1 rank: kiln's
#      experts move no token (the ranks of a stage hold them all) and the combine is the sum the dense MLP's
#      down projection needs anyway, so the experts' step should grow by what the dense one's does;
#   4. memory: the run's resident growth and libtorch's live bytes against the planner's stage memory.
#
#   ./bootstrap.sh test && perf/bench_experts.sh [REPEATS]
set -euo pipefail
repeats=${1:-3}
. "$(dirname "$0")/bench_env.sh"
python=${KILN_REFERENCE_PYTHON:-$root/.deps/torch-2.15.0/bin/python}
bench_workdir_with_licenses perf-experts
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
common=(--set checkpoint.resume=false --set checkpoint.every=0 --set run.steps=10 --set model.family=llama
        --set model.blocks=6 --set model.d_model=256 --set model.heads=8 --set model.kv_heads=4 --set data.seq_len=128
        --set data.global_batch=16 --set train.micro_batch=4 --set data.dir="$work/data" --set data.mix=licenses:1
        --set data.tokenizer=bytes --set plan.pipelines= --set fault.f=0)
dense=(--set model.ffn_hidden=768)
experts=(--set model.experts=8 --set model.experts_per_token=2 --set model.expert_hidden=384)
one=(--set cluster.ranks_per_node=0 --set train.threads=0)
wide=(--set cluster.ranks_per_node=2 --set plan.stage_width=2 --set train.threads=1)
declare -A times=()

step_time() { "$kiln" diag "$1/tiny/diag.h5" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_step_s"])'; }
memory() {  # the log's memory line: resident growth and live bytes against the plan
  sed -nE 's/.*resident growth ([0-9.]+) GB \(([0-9.]+)x\), libtorch.s pages [0-9.]+ GB, its live bytes ([0-9.]+) GB \(([0-9.]+)x\), planned ([0-9.]+) GB.*/{"resident_gb":\1,"resident_vs_plan":\2,"live_gb":\3,"live_vs_plan":\4,"planned_gb":\5}/p' "$1" | head -1
}
kiln2=${KILN_CUDA_BUILD_DIR:-$root/build-cuda}/kiln
kiln_run() {  # name repeat ranks settings... : one run, its JSON line (a name ending in -torch2: the CUDA build's kiln)
  local name=$1 rep=$2 ranks=$3 program=$kiln
  shift 3
  [[ $name == *-torch2 ]] && program=$kiln2
  local out=$work/$name-$rep
  if [ "$ranks" = 1 ]; then
    "$program" run input/tiny-cpu.ini "${common[@]}" "$@" --set run.out_dir="$out" >"$out.log" 2>&1 || { tail "$out.log"; exit 1; }
  else
    mpirun -n "$ranks" --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini "${common[@]}" "$@" --set run.out_dir="$out" \
      >"$out.log" 2>&1 || { tail "$out.log"; exit 1; }
  fi
  local t
  t=$(step_time "$out")
  times[$name]+="$t "
  echo "{\"bench\":\"experts\",\"run\":\"$name\",\"repeat\":$rep,\"median_step_s\":$t,\"tokens_per_s\":$(awk -v t="$t" 'BEGIN{printf "%.0f", 2048/t}'),\"memory\":$(memory "$out.log" || echo null)}"
}

for rep in $(seq 1 "$repeats"); do
  kiln_run dense "$rep" 1 "${dense[@]}" "${one[@]}"
  kiln_run experts "$rep" 1 "${experts[@]}" "${one[@]}"
  if [ -x "$kiln2" ]; then
    kiln_run dense-torch2 "$rep" 1 "${dense[@]}" "${one[@]}"
    kiln_run experts-torch2 "$rep" 1 "${experts[@]}" "${one[@]}"
  fi
  # kiln's compute threads: its OpenBLAS pool where libtorch uses OpenBLAS, else libtorch's own.
  blas=$(sed -nE 's/.*\((OpenBLAS ([0-9]+) threads?, libtorch [0-9]+|libtorch ([0-9]+) threads?)\).*/\2\3/p' "$work/experts-$rep.log")
  for twin in transformers transformers-dense; do
    hidden=0
    [ "$twin" = transformers-dense ] && hidden=768
    line=$("$python" perf/transformers_moe.py --threads "${blas:-1}" --dense-hidden $hidden 2>/dev/null | tail -1)
    echo "$line"
    times[$twin]+="$(echo "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_step_s"])') "
  done
  kiln_run dense-2wide "$rep" 2 "${dense[@]}" "${wide[@]}"
  kiln_run experts-2wide "$rep" 2 "${experts[@]}" "${wide[@]}"
done
d=$(echo "${times[dense]}" | median) e=$(echo "${times[experts]}" | median) t=$(echo "${times[transformers]}" | median)
td=$(echo "${times[transformers-dense]}" | median)
d3=$(echo "${times[dense-torch2]:-0}" | median) e3=$(echo "${times[experts-torch2]:-0}" | median)
d2=$(echo "${times[dense-2wide]}" | median) e2=$(echo "${times[experts-2wide]}" | median)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (b == 0) printf "null"; else printf "%.3f", a/b}'; }
echo "{\"bench\":\"experts\",\"median_step_s\":{\"dense\":$d,\"experts\":$e,\"transformers_experts\":$t,\"transformers_dense\":$td,\"dense_torch2\":$d3,\"experts_torch2\":$e3,\"dense_2wide\":$d2,\"experts_2wide\":$e2},\"experts_vs_dense_tokens_per_s\":$(ratio "$d" "$e"),\"transformers_experts_vs_dense\":$(ratio "$td" "$t"),\"kiln_vs_transformers\":$(ratio "$t" "$e"),\"kiln_vs_transformers_dense\":$(ratio "$td" "$d"),\"kiln_torch2_vs_transformers\":$(ratio "$t" "$e3"),\"kiln_torch2_vs_transformers_dense\":$(ratio "$td" "$d3"),\"dense_2wide_vs_1\":$(ratio "$d2" "$d"),\"experts_2wide_vs_1\":$(ratio "$e2" "$e")}"
