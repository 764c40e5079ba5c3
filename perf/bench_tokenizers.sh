#!/usr/bin/env bash
# Tokenizing speed of kiln prep with a Hugging Face tokenizer.json against the `tokenizers` wheel (issue 39,
# item 5): a byte-level BPE of GPT-2's design (its regex, 16 k ids) trained by `tokenizers` on the licence
# texts; the corpus of perf/bench_prep_formats.sh (40 k documents, 156.6 MB: licence text and base64) encoded by
# kiln prep on 1 rank and by Tokenizer.encode_batch on 1 thread (RAYON_NUM_THREADS=1), the same documents.
# One JSON line each, then the ratio.
#
#   ./bootstrap.sh test (or reference) && perf/bench_tokenizers.sh
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
python=${KILN_REFERENCE_PYTHON:-$root/.deps/torch-2.15.0/bin/python}
work=$build/perf-tokenizers
rm -rf "$work"
mkdir -p "$work"
[ -f "$build/perf-prep-formats/corpus.jsonl" ] || perf/bench_prep_formats.sh >/dev/null
corpus=$build/perf-prep-formats/corpus.jsonl
RAYON_NUM_THREADS=1 "$python" - "$work" "$corpus" <<'PY'
import glob, json, sys, time
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
work, corpus = sys.argv[1], sys.argv[2]
texts = [open(p, errors="replace").read() for p in sorted(glob.glob("/usr/share/common-licenses/*"))]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=16000, special_tokens=["<|endoftext|>"],
                                                   initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
tok.save(f"{work}/tokenizer.json")
docs = [json.loads(line)["text"] for line in open(corpus)]
mb = sum(len(d.encode()) for d in docs) / 1e6
start = time.perf_counter()
ids = tok.encode_batch(docs, add_special_tokens=False)
seconds = time.perf_counter() - start
tokens = sum(len(e.ids) for e in ids)
print(json.dumps({"tool": "tokenizers encode_batch, 1 thread", "seconds": round(seconds, 2), "text_mb_s": round(mb / seconds, 1),
                  "M_tokens_s": round(tokens / seconds / 1e6, 2), "tokens": tokens}))
json.dump({"seconds": seconds, "tokens": tokens}, open(f"{work}/reference.json", "w"))
PY
"$kiln" prep --source bpe --input "$corpus" --format jsonl --tokenizer "$work/tokenizer.json" --out "$work/data" --quiet \
  >"$work/kiln.log" 2>&1 || { cat "$work/kiln.log"; exit 1; }
python3 - "$work/kiln.log" "$work/reference.json" <<'PY'
import json, re, sys
log = open(sys.argv[1]).read()
m = re.search(r"kiln prep: (\d+) documents, (\d+) tokens .* in ([0-9.]+) s \(([0-9.]+) MB/s", log)
tokens, seconds, mb_s = int(m.group(2)), float(m.group(3)), float(m.group(4))
ref = json.load(open(sys.argv[2]))
print(json.dumps({"tool": "kiln prep, 1 rank", "seconds": seconds, "text_mb_s": mb_s, "M_tokens_s": round(tokens / seconds / 1e6, 2),
                  "tokens": tokens}))
print(f"TOKENIZE kiln_vs_tokenizers={ref['seconds'] / seconds:.2f}x same_tokens={tokens == ref['tokens']}")
PY
