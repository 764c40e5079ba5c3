#!/usr/bin/env bash
# kiln prep throughput by input format (issue 39, item 5): one corpus of JSON Lines (156.6 MB of licence and
# base64 text, 40 k documents) as .jsonl (the baseline), .jsonl.gz (gzip -6), .jsonl.zst (zstd -3, in 64
# frames), Parquet (snappy, row groups of 1000 rows, as Hugging Face datasets writes it) and an Arrow IPC file
# (record batches of 1000 rows), prepared with the bytes tokenizer on 1 rank and on 2 ranks. Per case one JSON line: input MB/s (of the file as stored and of its text), tokens/s per rank, and
# the ratio to plain .jsonl on the same ranks.
#
#   ./bootstrap.sh build && perf/bench_prep_formats.sh
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
work=$build/perf-prep-formats
rm -rf "$work"
mkdir -p "$work"
python3 - "$work/corpus.jsonl" <<'PY'
import base64, glob, json, random, sys
random.seed(5)
texts = [open(p, errors="replace").read() for p in sorted(glob.glob("/usr/share/common-licenses/*"))]
with open(sys.argv[1], "w") as out:
    for i in range(40000):
        text = random.choice(texts)[: random.randint(500, 6000)] + base64.b64encode(random.randbytes(500)).decode()
        out.write(json.dumps({"text": text, "id": i}) + "\n")
PY
gzip -6 -k "$work/corpus.jsonl"
split -n 64 "$work/corpus.jsonl" "$work/piece-"
for p in "$work"/piece-*; do zstd -q -3 "$p" -o "$p.zst"; done
cat "$work"/piece-*.zst >"$work/corpus.jsonl.zst"
rm "$work"/piece-*
"$root/.deps/arrow/bin/python" - "$work" <<'PY'
import json, sys
import pyarrow as pa, pyarrow.ipc as ipc, pyarrow.parquet as pq
work = sys.argv[1]
table = pa.table({"text": [json.loads(line)["text"] for line in open(f"{work}/corpus.jsonl")]})
pq.write_table(table, f"{work}/corpus.parquet", row_group_size=1000, compression="snappy")
with ipc.new_file(f"{work}/corpus.arrow", table.schema) as writer:
    for batch in table.to_batches(max_chunksize=1000):
        writer.write_batch(batch)
PY
text_mb=$(python3 -c "import os; print(os.path.getsize('$work/corpus.jsonl') / 1e6)")
: >"$work/results.jsonl"
for ranks in 1 2; do
  for form in jsonl jsonl.gz jsonl.zst parquet arrow; do
    name=r$ranks-${form//./-}
    best=""
    for repeat in 1 2 3; do  # the best of 3 (the page cache warm after the first)
      format=jsonl
      [ $form = parquet ] && format=parquet
      [ $form = arrow ] && format=arrow
      mpirun -n $ranks --oversubscribe "$kiln" prep --source "$name" --input "$work/corpus.$form" --format $format \
        --out "$work/data" --overwrite --quiet --split-mb 16 >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
      seconds=$(sed -n 's/.* in \([0-9.]*\) s (.*/\1/p' "$work/$name.log")
      if [ -z "$best" ] || python3 -c "import sys; sys.exit(0 if $seconds < $best else 1)"; then best=$seconds; fi
    done
    tokens=$(sed -n 's/^kiln prep: [0-9]* documents, \([0-9]*\) tokens.*/\1/p' "$work/$name.log")
    stored=$(stat -c %s "$work/corpus.$form")
    python3 - "$ranks" "$form" "$best" "$tokens" "$stored" "$text_mb" <<'PY' | tee -a "$work/results.jsonl"
import json, sys
ranks, form, seconds, tokens, stored, text_mb = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
print(json.dumps({"ranks": ranks, "format": form, "seconds": seconds, "stored_mb": round(stored / 1e6, 1),
                  "stored_mb_s": round(stored / 1e6 / seconds, 1), "text_mb_s": round(text_mb / seconds, 1),
                  "tokens_per_s_per_rank": round(tokens / seconds / ranks / 1e6, 2)}))
PY
  done
done
python3 - "$work/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    base = next(b for b in rows if b["ranks"] == r["ranks"] and b["format"] == "jsonl")
    print(f"PREP ranks={r['ranks']} format={r['format']} text_mb_s={r['text_mb_s']} "
          f"M_tokens_s_per_rank={r['tokens_per_s_per_rank']} vs_plain={r['text_mb_s'] / base['text_mb_s']:.2f}x "
          f"stored_mb={r['stored_mb']}")
PY
