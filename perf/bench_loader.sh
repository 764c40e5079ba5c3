#!/usr/bin/env bash
# Loader benchmarks (issue 4); see perf/bench_loader.cpp for the metrics.
#   perf/bench_loader.sh            (after ./bootstrap.sh build; prepares its own data in build/perf-data)
#   perf/bench_loader.sh checksums  only the cost of per-chunk checksums (issue 11): loader tokens/s on the
#                                   two mix sources as prepared (Fletcher-32 on every chunk) and on the same
#                                   shards with the filter removed (h5repack -f NONE), side by side
# Output: JSON lines on stdout.
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
work=$build/perf-data
bench=$build/perf/bench_loader
mode=${1:-all}
# Shards of format 2 (per-chunk checksums) from here on: older data is prepared again.
[ -f "$work/format-2" ] || rm -rf "$work"
mkdir -p "$work"
touch "$work/format-2"

# Two sources to mix (the same generator, other seeds).
for name in mix-a mix-b; do
  if [ ! -f "$work/$name/manifest.json" ]; then
    python3 "$root/tools/gen_corpus.py" --out "$work/gen-$name.jsonl" --mb 50 --seed "${#name}$RANDOM" >&2
    "$build/kiln" prep --source "$name" --input "$work/gen-$name.jsonl" --format jsonl --out "$work" --overwrite --quiet >&2
  fi
  cat "$work/$name"/*.h5 >/dev/null   # page cache warm
done

if [ "$mode" = checksums ]; then
  # Same source names (they key the shuffle): both deliver the same tokens, which the
  # benchmark's "checksum" of the delivered tokens confirms.
  for name in mix-a mix-b; do
    rm -rf "$work/nosum/$name"
    mkdir -p "$work/nosum/$name"
    cp "$work/$name/manifest.json" "$work/nosum/$name/"
    for f in "$work/$name"/*.h5; do h5repack -f NONE "$f" "$work/nosum/$name/$(basename "$f")"; done
    cat "$work/nosum/$name"/*.h5 >/dev/null
  done
  for round in 1 2 3; do  # alternated, so that drift of the machine hits both alike
    "$bench" throughput "$work/nosum/mix-a" "$work/nosum/mix-b" --steps 60 | sed 's/^{/{"checksums":false,/'
    "$bench" throughput "$work/mix-a" "$work/mix-b" --steps 60 | sed 's/^{/{"checksums":true,/'
  done
  exit 0
fi

# Byte-tokenized corpora of about 1e6, 1e7, 1e8 and 1e9 tokens.
for mb in 1 10 100 1000; do
  src=$work/tokens-${mb}mb
  if [ ! -f "$src/manifest.json" ]; then
    python3 "$root/tools/gen_corpus.py" --out "$work/gen-${mb}mb.jsonl" --mb "$mb" --seed "$mb" >&2
    "$build/kiln" prep --source "tokens-${mb}mb" --input "$work/gen-${mb}mb.jsonl" --format jsonl --out "$work" \
      --overwrite --quiet >&2
  fi
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
