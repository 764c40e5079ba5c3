#!/usr/bin/env bash
# Two builds of bench_loader against each other on the shard-count corpora of
# bench_shards.sh (the same 1.5 G tokens as about 1 k, 10 k and 100 k shards,
# and as prep's default shards of 64 Mi tokens):
# `shards --steps STEPS` on 1 and 2 ranks, the builds alternated within every
# round so that both see the same machine (runs on this 2-core VM spread
# +-15 %: only medians over rounds of one run are compared). Prints, per build
# and rank count, the median tokens/s per rank (wall and CPU), rank 0's
# rounds, peak RSS, the spread across shard counts (slowest over fastest, the
# issue 23 criterion) and the checksum of every delivered token (equal for
# builds that deliver the same stream).
#
#   cp build/perf/bench_loader /tmp/bench_before      # at the older commit
#   ./bootstrap.sh build && perf/bench_loader_ab.sh /tmp/bench_before build/perf/bench_loader [ROUNDS [STEPS]]
#
# About 13 minutes for 4 rounds of 3 000 steps; corpora kept in build/perf-shards
# (9 GB, prepared once, about 20 minutes).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BENCH_LOADER_A BENCH_LOADER_B [ROUNDS (4) [STEPS (3000)]]" >&2; exit 2; }
a=$(realpath "$1") b=$(realpath "$2") rounds=${3:-4} steps=${4:-3000}
. "$(dirname "$0")/bench_env.sh"
bench_shard_workdir
out=$work/ab.jsonl
: >"$out"
for round in $(seq "$rounds"); do
  for name in same-default same-1k same-10k same-100k; do
    # The four corpora do not all fit this VM's page cache: warm each before its runs.
    find "$work/$name/corpus" -type f -exec cat {} + >/dev/null
    for build in A B; do
      bin=$a; [ $build = B ] && bin=$b
      for ranks in 1 2; do
        mpirun -n "$ranks" --oversubscribe "$bin" shards "$work/$name/corpus" --steps "$steps" 2>/dev/null |
          grep '^{' | sed "s/^{/{\"build\":\"$build\",\"round\":$round,/" >>"$out"
      done
    done
  done
done
python3 - "$out" "$a" "$b" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
paths = {"A": sys.argv[2], "B": sys.argv[3]}
for build in ("A", "B"):
    for ranks in (1, 2):
        mine = [r for r in rows if r["build"] == build and r["ranks"] == ranks]
        layouts = sorted({r["shards"] for r in mine})
        wall = {s: statistics.median(r["tokens_per_s"] for r in mine if r["shards"] == s) for s in layouts}
        cpu = {s: statistics.median(r["tokens_per_cpu_s"] for r in mine if r["shards"] == s) for s in layouts}
        print(json.dumps({
            "bench": "loader-ab", "build": build, "binary": paths[build], "ranks": ranks,
            "tokens_per_s_per_rank": {s: round(wall[s]) for s in layouts},
            "tokens_per_cpu_s": {s: round(cpu[s]) for s in layouts},
            "rank0_rounds_m": {s: [round(r["tokens_per_s"] / 1e6) for r in mine if r["shards"] == s and r["rank"] == 0]
                               for s in layouts},
            "peak_rss_mb": {s: max(r["peak_rss_mb"] for r in mine if r["shards"] == s) for s in layouts},
            "slowest_over_fastest": round(min(wall.values()) / max(wall.values()), 3),
            # Issue 23's criterion: 1 k, 10 k and 100 k shards (not the default's 23).
            "slowest_over_fastest_1k_10k_100k": round(min(v for s, v in wall.items() if s > 100) /
                                                      max(v for s, v in wall.items() if s > 100), 3),
            "slowest_over_fastest_cpu": round(min(cpu.values()) / max(cpu.values()), 3)}))
sums = {b: sorted({r["checksum"] for r in rows if r["build"] == b and r["rank"] == 0}) for b in ("A", "B")}
print(json.dumps({"bench": "loader-ab-checksums", "A": sums["A"], "B": sums["B"], "same": sums["A"] == sums["B"]}))
PY
