#!/usr/bin/env bash
# The length index (doc_lengths.h5) against planning from the shards' offsets,
# on the shard-count corpora of bench_shards.sh (the same 1.47 G tokens as
# prep's default shards and as about 1 k, 10 k and 100 k shards), with the
# build's own bench_loader: `shards --steps STEPS` as a pipeline's middle stage
# (--slice 0), as a rank with one sample of the 64 a step (--slice 1), and as
# a rank that reads the whole batch; 1 rank, and 4 ranks of one sample each
# (the shard openings of a rank that do not shrink with its slice). The two
# modes alternate within every round. Prints, per corpus, slice and ranks,
# the medians of steps/s and of shard openings per step and rank, each mode's
# and their ratio, and the checksum of every delivered token (equal in both).
#
#   ./bootstrap.sh build && perf/bench_length_index.sh [ROUNDS (3) [STEPS (3000)]]
#
# About 12 minutes for 3 rounds (the 100 k-shard start-up check is 12 s a run);
# corpora kept in build/perf-shards, their length index written when missing.
set -euo pipefail
rounds=${1:-3} steps=${2:-3000}
. "$(dirname "$0")/bench_env.sh"
bench_shard_workdir
out=$work/lengths.jsonl
: >"$out"
for name in same-default same-1k same-10k same-100k; do
  [ -f "$work/$name/corpus/doc_lengths.h5" ] ||
    "$kiln" inspect "$work/$name/corpus" --no-verify --write-lengths >/dev/null
done
run() {  # run NAME RANKS SLICE MODE ROUND
  local args=(shards "$work/$1/corpus" --steps "$steps")
  [ "$3" = whole ] || args+=(--slice "$3")
  [ "$4" = offsets ] && args+=(--no-lengths)
  mpirun -n "$2" --oversubscribe "$build/perf/bench_loader" "${args[@]}" 2>/dev/null | grep '^{' |
    sed "s/^{/{\"mode\":\"$4\",\"round\":$5,\"layout\":\"$1\",\"want_slice\":\"$3\",/" >>"$out"
}
for round in $(seq "$rounds"); do
  for name in same-default same-1k same-10k same-100k; do
    find "$work/$name/corpus" -type f -exec cat {} + >/dev/null  # warm: the corpora do not all fit the page cache
    for slice in 0 1 whole; do
      for mode in index offsets; do run "$name" 1 "$slice" "$mode" "$round"; done
    done
    for mode in index offsets; do run "$name" 4 1 "$mode" "$round"; done
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = sorted({(r["layout"], r["ranks"], r["want_slice"]) for r in rows}, key=lambda k: (k[0], k[1], k[2]))
for layout, ranks, slice_ in keys:
    res = {"bench": "length-index", "layout": layout, "shards": None, "ranks": ranks, "slice": slice_}
    for mode in ("index", "offsets"):
        mine = [r for r in rows if (r["layout"], r["ranks"], r["want_slice"], r["mode"]) == (layout, ranks, slice_, mode)]
        res["shards"] = mine[0]["shards"]
        res[f"steps_per_s_{mode}"] = round(statistics.median(r["steps_per_s"] for r in mine), 1)
        res[f"openings_per_step_{mode}"] = round(statistics.median(r["openings_while_streaming"] / r["steps"] for r in mine), 2)
        res[f"peak_rss_mb_{mode}"] = max(r["peak_rss_mb"] for r in mine)
        res[f"checksums_{mode}"] = sorted({r["checksum"] for r in mine if r["rank"] == 0})
    res["speedup"] = round(res["steps_per_s_index"] / res["steps_per_s_offsets"], 2)
    res["same_tokens"] = res["checksums_index"] == res["checksums_offsets"]
    print(json.dumps(res))
PY
