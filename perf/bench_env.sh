# Sourced by the benchmarks in perf/: where kiln is, the ULFM Open MPI on PATH,
# and the checkout as working directory (the decks are in input/).
root=$(cd "$(dirname "${BASH_SOURCE[1]}")/.." && pwd)
build=${KILN_BUILD_DIR:-$root/build}
kiln=$build/kiln
export PATH=$root/.deps/ompi/bin:$PATH OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# PyPI's torch, whose libtorch kiln is built against (bootstrap.sh): the baselines in PyTorch run on it.
torch_python=$root/.deps/torch-${KILN_TORCH_VERSION:-2.15.0}/bin/python
cd "$root"

# A fresh working directory $work = build/NAME, with the licence texts prepared
# as source 'licenses' (byte tokens) in $work/data.
bench_workdir_with_licenses() {
  work=$build/$1
  rm -rf "$work"
  mkdir -p "$work"
  "$kiln" prep --source licenses --input /usr/share/common-licenses --out "$work/data" --overwrite --quiet >/dev/null
}

# The pipeline benchmarks' model (8 layers, d_model 128, seq 128, micro-batch 4,
# global batch 32, one thread per rank), with a layer profile measured here:
# sets the arrays model=(...) and machine=(...) of kiln --set options.
bench_profiled_model() {
  model=(--set model.blocks=6 --set model.d_model=128 --set model.heads=4 --set data.seq_len=128
         --set train.micro_batch=4 --set data.global_batch=32 --set train.threads=1
         --set data.dir="$work/data" --set data.mix=licenses:1 --set data.tokenizer=bytes)
  "$kiln" profile input/tiny-cpu.ini "${model[@]}" --out "$work/profile.h5" >"$work/profile.log"
  # Shared memory between ranks of this machine: a few GB/s.
  machine=(--set plan.profile="$work/profile.h5" --set plan.intra_node_gb_s=5 --set plan.inter_node_gb_s=5)
}

# The shard-count benchmarks' working directory $work = build/perf-shards
# (prepared corpora are reused from an earlier run kept there), an empty
# $work/results.jsonl, the texts, and the large text as about 1 k, 10 k and
# 100 k shards (same-1k, same-10k, same-100k: 1.5 M, 150 k, 15 k tokens each)
# and as prep's default shards (same-default: 64 Mi tokens, 23 shards).
bench_shard_workdir() {
  work=$build/perf-shards
  mkdir -p "$work"
  : >"$work/results.jsonl"
  bench_shard_texts
  bench_shard_corpus "$work/large.jsonl" same-1k 1500000
  bench_shard_corpus "$work/large.jsonl" same-10k 150000
  bench_shard_corpus "$work/large.jsonl" same-100k 15000
  bench_shard_corpus "$work/large.jsonl" same-default 67108864
}

# The shard-count benchmarks' texts in $work (issue 23): small.jsonl, 150 MB
# of short documents (median 60 words), and large.jsonl, ten copies of it
# (generating 1.5 GB afresh takes Python half an hour).
bench_shard_texts() {
  [ -f "$work/small.jsonl" ] || python3 tools/gen_corpus.py --out "$work/small.jsonl" --mb 150 --median-words 60 --seed 23 >&2
  [ -f "$work/large.jsonl" ] || for i in 0 1 2 3 4 5 6 7 8 9; do cat "$work/small.jsonl"; done >"$work/large.jsonl"
}

# bench_shard_corpus TEXT NAME SHARD_TOKENS: TEXT prepared as source 'corpus'
# in $work/NAME (kept from an earlier run when there), its disk use appended
# to $work/results.jsonl.
bench_shard_corpus() {
  local text=$1 name=$2 tokens=$3
  if [ ! -f "$work/$name/corpus/manifest.json" ]; then
    mpirun -n 2 --oversubscribe "$kiln" prep --source corpus --input "$text" --format jsonl --split-mb 64 \
      --shard-tokens "$tokens" --out "$work/$name" --overwrite --quiet >"$work/prep-$name.log" 2>&1 ||
      { cat "$work/prep-$name.log"; exit 1; }
  fi
  du -sk "$work/$name/corpus" | python3 -c "
import json, sys
kb = int(sys.stdin.read().split()[0])
print(json.dumps({'bench': 'shards-disk', 'layout': '$name', 'shard_tokens': $tokens, 'mb_on_disk': round(kb / 1024, 1)}))" |
    tee -a "$work/results.jsonl"
}

# Issue 50: a fault benchmark's run counts only if it lost exactly the ranks its schedule chose (no collateral
# death, every victim recorded): tests/fault/victims.py on its diag.h5 and log; exits the benchmark otherwise.
# bench_victims DIAG_H5 LOG RANKS [--outside R,R] [--since T]
bench_victims() {
  local diag=$1 log=$2 ranks=$3
  shift 3
  python3 "$root/tests/fault/victims.py" "$kiln" "$diag" "$log" "$ranks" "$@" >&2 \
    || { echo "benchmark: $log: a rank its schedule did not choose was lost; its figures do not count" >&2; exit 1; }
}
