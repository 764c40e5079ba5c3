#!/usr/bin/env bash
# Shards read with preads at the chunk places HDF5 reports, against every
# shard and block opened and read through HDF5 (bench_loader --hdf5-only, the
# baseline in the same run), on the same 1.5 G tokens as about 1 k, 10 k and
# 100 k shards (1.5 M, 150 k, 15 k tokens each; the corpora of
# bench_shards.sh, reused from build/perf-shards when kept there). Per layout,
# reading, rank count (1, 2) and run length (300 and 3 000 steps of 64 x 2049
# tokens: a stream meets a large shard's later blocks only in the longer),
# four rounds alternated; medians per rank, the spread across shard counts
# (slowest over fastest) and the checksum of every delivered token (equal
# across layouts and readings).
#
#   ./bootstrap.sh build && perf/bench_shard_reads.sh   (about 15 minutes, 9 GB in build/perf-shards,
#                                                         removed at the end unless KILN_BENCH_KEEP=1)
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
bench_shard_workdir
bench=$build/perf/bench_loader
: >"$work/reads.jsonl"
for round in 1 2 3 4; do
  for name in same-default same-1k same-10k same-100k; do
    find "$work/$name/corpus" -type f -exec cat {} + >/dev/null  # page cache warm: the disk is not what is measured
    for reading in "" --hdf5-only; do
      for steps in 300 3000; do
        for ranks in 1 2; do
          mpirun -n "$ranks" --oversubscribe "$bench" shards "$work/$name/corpus" --steps "$steps" $reading |
            sed "s/^{/{\"layout\":\"$name\",\"round\":$round,/" | tee -a "$work/reads.jsonl"
        done
      done
    done
  done
done
python3 - "$work/reads.jsonl" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows:
    by.setdefault((r["reads"], r["steps"], r["ranks"], r["shards"]), []).append(r)
for steps in (300, 3000):
    print(json.dumps({"bench": "shard-reads-same-stream", "steps": steps,
                      "ok": len({r["checksum"] for r in rows if r["rank"] == 0 and r["steps"] == steps}) == 1}))
    for ranks in (1, 2):
        rates = {}
        for (reads, s, n, shards), mine in sorted(by.items()):
            if s != steps or n != ranks:
                continue
            rates[(reads, shards)] = statistics.median(r["tokens_per_s"] for r in mine)
            print(json.dumps({"bench": "shard-reads", "reads": reads, "steps": steps, "ranks": ranks, "shards": shards,
                              "tokens_per_s_per_rank": round(rates[(reads, shards)]),
                              "range": [round(min(r["tokens_per_s"] for r in mine)), round(max(r["tokens_per_s"] for r in mine))],
                              "openings": mine[0]["openings_while_streaming"], "read_by_pread": mine[0]["read_by_pread"],
                              "open_s": round(statistics.median(r["open_s"] for r in mine), 3)}))
        for reads in ("preads", "hdf5"):
            mine = [v for (r, _), v in rates.items() if r == reads]
            print(json.dumps({"bench": "shard-reads-spread", "reads": reads, "steps": steps, "ranks": ranks,
                              "slowest_over_fastest": round(min(mine) / max(mine), 3)}))
PY
[ "${KILN_BENCH_KEEP:-0}" = 1 ] || rm -rf "$work"/same-* "$work/large.jsonl" "$work/small.jsonl"
