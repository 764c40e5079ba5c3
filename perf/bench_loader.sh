#!/usr/bin/env bash
# Loader benchmarks (issue 4); see perf/bench_loader.cpp for the metrics.
#   perf/bench_loader.sh        (after ./bootstrap.sh build; prepares its own data in build/perf-data)
# Output: JSON lines on stdout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KILN_BUILD_DIR:-$root/build}
work=$build/perf-data
bench=$build/perf/bench_loader
export PATH=$root/.deps/ompi/bin:$PATH OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$work"

# Byte-tokenized corpora of about 1e6, 1e7, 1e8 and 1e9 tokens.
for mb in 1 10 100 1000; do
  src=$work/tokens-${mb}mb
  if [ ! -f "$src/manifest.json" ]; then
    python3 "$root/tools/gen_corpus.py" --out "$work/gen-${mb}mb.jsonl" --mb "$mb" --seed "$mb" >&2
    "$build/kiln" prep --source "tokens-${mb}mb" --input "$work/gen-${mb}mb.jsonl" --format jsonl --out "$work" \
      --overwrite --quiet >&2
  fi
done
# Two sources to mix (the same generator, other seeds).
for name in mix-a mix-b; do
  if [ ! -f "$work/$name/manifest.json" ]; then
    python3 "$root/tools/gen_corpus.py" --out "$work/gen-$name.jsonl" --mb 50 --seed "${#name}$RANDOM" >&2
    "$build/kiln" prep --source "$name" --input "$work/gen-$name.jsonl" --format jsonl --out "$work" --overwrite --quiet >&2
  fi
  cat "$work/$name"/*.h5 >/dev/null   # page cache warm
done

for ranks in 1 2; do
  mpirun -n $ranks --oversubscribe "$bench" throughput "$work/mix-a" "$work/mix-b" --steps 60
done
for mb in 1 10 100 1000; do
  cat "$work/tokens-${mb}mb"/*.h5 >/dev/null
  "$bench" startup "$work/tokens-${mb}mb"
  "$bench" startup "$work/tokens-${mb}mb" --baseline
done
for ranks in 1 2 4; do
  mpirun -n $ranks --oversubscribe "$bench" cursor-save --repeat 20
done
