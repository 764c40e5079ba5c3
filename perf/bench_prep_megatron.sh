#!/usr/bin/env bash
# kiln prep against Megatron-LM's way of preparing data (issue 39, item 5): tools/preprocess_data.py encodes
# JSON Lines in a multiprocessing.Pool (imap, chunks of 25 documents), one document at a time with a
# transformers tokenizer, appends the EOD, and writes the .bin/.idx with megatron-core's IndexedDatasetBuilder.
# perf/megatron_preprocess.py does those steps (megatron-core is installed; the script itself lives in the
# Megatron-LM repository, not in the wheel). Both prepare the first 10,000 documents of perf/bench_prep_formats.sh's
# corpus with perf/bench_tokenizers.sh's byte-level BPE (tokenizer.json), on 1 and on 2 processes: Pool workers
# against kiln ranks (Megatron's main process, which writes, runs beside its workers). One JSON line each,
# then the ratio at each count and whether every document's ids agree.
#
#   ./bootstrap.sh test (or reference) && perf/bench_prep_megatron.sh
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
python=${KILN_REFERENCE_PYTHON:-$root/.deps/torch-2.15.0/bin/python}
work=$build/perf-prep-megatron
rm -rf "$work"
mkdir -p "$work"
[ -f "$build/perf-tokenizers/tokenizer.json" ] || perf/bench_tokenizers.sh >/dev/null
tokenizer=$build/perf-tokenizers/tokenizer.json
head -n 10000 "$build/perf-prep-formats/corpus.jsonl" >"$work/corpus.jsonl"
for n in 1 2; do
  "$python" perf/megatron_preprocess.py "$work/corpus.jsonl" "$tokenizer" "<|endoftext|>" $n "$work/megatron-$n" \
    2>"$work/megatron-$n.err" | tee -a "$work/results.jsonl"
  start=$(date +%s.%N)
  mpirun -n $n --oversubscribe "$kiln" prep --source kiln-$n --input "$work/corpus.jsonl" --format jsonl --tokenizer "$tokenizer" \
    --out "$work/data" --split-mb 8 --quiet >"$work/kiln-$n.log" 2>&1 || { cat "$work/kiln-$n.log"; exit 1; }
  end=$(date +%s.%N)
  python3 - "$work/kiln-$n.log" $n "$start" "$end" <<'PY' | tee -a "$work/results.jsonl"
import json, re, sys
log, n, start, end = open(sys.argv[1]).read(), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
m = re.search(r"kiln prep: (\d+) documents, (\d+) tokens .* from ([0-9.]+) MB", log)
tokens, mb, seconds = int(m.group(2)), float(m.group(3)), end - start
print(json.dumps({"tool": "kiln prep", "processes": n, "seconds": round(seconds, 2), "text_mb_s": round(mb / seconds, 1),
                  "M_tokens_s_per_process": round(tokens / seconds / n / 1e6, 3), "tokens": tokens}))
PY
done
# The same ids: Megatron's documents (EOD dropped) against kiln's (1 rank: in corpus order), every id.
/usr/bin/python3 tests/support/source_documents.py "$work/data/kiln-1" >"$work/kiln-1.documents"
"$python" - "$work" <<'PY' 2>"$work/compare.err"
import json, sys
import numpy
from megatron.core.datasets.indexed_dataset import IndexedDataset
work = sys.argv[1]
rows = [json.loads(line) for line in open(f"{work}/results.jsonl")]
meg = IndexedDataset(f"{work}/megatron-1")
kiln = open(f"{work}/kiln-1.documents").read().splitlines()
same = len(kiln) == len(meg.document_indices) - 1 and all(
    meg[d][:-1].tolist() == [int(t) for t in kiln[d].split()] for d in range(len(kiln)))
for n in (1, 2):
    m = next(r for r in rows if r["tool"].startswith("megatron") and r["processes"] == n)
    k = next(r for r in rows if r["tool"] == "kiln prep" and r["processes"] == n)
    print(f"PREP_VS_MEGATRON processes={n} kiln_speedup={m['seconds'] / k['seconds']:.2f}x "
          f"same_ids={same and m['tokens'] - m['documents'] == k['tokens']}")
PY
