#!/usr/bin/env bash
# Hugging Face tokenizer.json in kiln prep (issues 39 and 53): BPE tokenizers trained by the `tokenizers` wheel
# (tests/reference/hf_tokenizers.py: GPT-2's design; Llama 3's with its Split regex and ignore_merges; Qwen's
# behind an NFC normalizer; GPT-2's behind NFKC; Llama 2's SentencePiece style, Prepend and Replace normalizers
# and byte fallback; Mistral's Metaspace, unsplit and split) on a corpus of many scripts, emoji, numbers,
# whitespace runs, combining characters, full-width forms, ligatures and special tokens in the text.
# Pass criteria, each printed as PASS:
#  1. For each tokenizer, kiln prep --tokenizer DIR/tokenizer.json stores for every document exactly the ids
#     `tokenizers` gives (encode, add_special_tokens=False), and records its EOS (<|endoftext|>; for the
#     llama3 one tokenizer_config.json's <|end_of_text|>).
#  2. kiln inspect --decode gives back the documents' text.
#  3. A tokenizer.json kiln cannot encode alike (a Lowercase normalizer) is refused naming the file and the field.
#  4. A Megatron-LM dataset of the corpus, written by megatron-core's IndexedDatasetBuilder as preprocess_data.py
#     does (uint16 and int32 ids), brought in with --format tokens, holds exactly the documents kiln stores
#     when it tokenizes the text itself.
set -euo pipefail
kiln=$1 work=$2 python=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
"$python" "$(dirname "$0")/hf_tokenizers.py" "$work" >"$work/make.log" 2>&1 || { cat "$work/make.log"; fail "tokenizers could not train"; }
for name in gpt2 llama3 qwen nfkc llama2 mistral metaspace; do
  "$kiln" prep --source $name --input "$work/corpus.jsonl" --format jsonl --tokenizer "$work/$name/tokenizer.json" \
    --out "$work/data" --quiet >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; fail "kiln prep with the $name tokenizer.json"; }
  /usr/bin/python3 tests/support/source_documents.py "$work/data/$name" >"$work/$name.stored"
  "$python" - "$work/$name.stored" "$work/$name/expected.txt" "$work/corpus.jsonl" <<'PY' || fail "$name: kiln's ids are not tokenizers'"
import json, sys
stored_path, expected_path, corpus_path = sys.argv[1:4]
stored = [[int(t) for t in line.split()] for line in open(stored_path).read().splitlines()]
expected = [[int(t) for t in line.split()] for line in open(expected_path).read().splitlines()]
texts = [json.loads(line)["text"] for line in open(corpus_path)]
assert len(stored) == len(expected), f"{len(stored)} documents stored, {len(expected)} expected"
bad = [i for i, (a, b) in enumerate(zip(stored, expected)) if a != b]
for i in bad[:3]:
    print(f"document {i}: {texts[i]!r}\n  kiln       {stored[i][:40]}\n  tokenizers {expected[i][:40]}")
assert not bad, f"{len(bad)} of {len(expected)} documents differ"
print(f"{len(stored)} documents, {sum(map(len, stored))} ids, all equal")
PY
done
grep -q '"eos_id": 0' "$work/data/gpt2/manifest.json" || { cat "$work/data/gpt2/manifest.json" | head -20; fail "gpt2: the EOS is not <|endoftext|> (id 0)"; }
grep -q '"eos_id": 1' "$work/data/llama3/manifest.json" || fail "llama3: the EOS is not tokenizer_config.json's <|end_of_text|> (id 1)"
for name in llama2 mistral metaspace; do
  grep -q '"eos_id": 2' "$work/data/$name/manifest.json" || fail "$name: the EOS is not tokenizer_config.json's </s> (id 2)"
done
echo "PASS 1: kiln's ids equal tokenizers' on every document, for the designs of GPT-2, Llama 3, Qwen (NFC), NFKC, Llama 2 (Prepend and Replace, byte fallback), Mistral (Metaspace) and Metaspace split"

for name in llama3 llama2 mistral; do
"$kiln" inspect "$work/data/$name" --tokenizer "$work/$name/tokenizer.json" --decode 5 --max-chars 100000 >"$work/decode.txt"
"$python" - "$work/decode.txt" "$work/corpus.jsonl" <<'PY' || fail "$name: kiln inspect --decode does not give back the text"
import json, sys
text = open(sys.argv[1], newline="").read()
decoded = text.split("--- document 5 (")[1].split(") ---\n", 1)[1].rsplit("\n---", 1)[0]
original = [json.loads(line)["text"] for line in open(sys.argv[2])][5]
assert decoded == original, (decoded, original)
PY
done
echo "PASS 2: kiln inspect --decode gives back a document's text (byte-level, and SentencePiece style with byte fallback)"

"$python" - "$work/gpt2/tokenizer.json" "$work/normalized.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["normalizer"] = {"type": "Lowercase"}
json.dump(t, open(sys.argv[2], "w"))
PY
if "$kiln" prep --source bad --input "$work/corpus.jsonl" --format jsonl --tokenizer "$work/normalized.json" --out "$work/data" \
  --quiet >"$work/bad.log" 2>&1; then fail "a tokenizer with a Lowercase normalizer was accepted"; fi
grep -q "normalized.json': normalizer = {\"type\":\"Lowercase\"}" "$work/bad.log" || { cat "$work/bad.log"; fail "the refusal does not name the field"; }
echo "PASS 3: a tokenizer.json with a normalizer kiln does not apply (Lowercase) is refused naming the file and the field"

# Megatron-LM's preprocess_data.py, as tests/reference/megatron_dataset.py does it with megatron-core's builder,
# then kiln prep --format tokens on its .idx: the same documents as kiln's own tokenizing of the text.
for name in gpt2:uint16:'<|endoftext|>' llama3:int32:'<|end_of_text|>'; do
  IFS=: read -r tok dtype eos <<<"$name"
  "$python" "$(dirname "$0")/megatron_dataset.py" "$work/corpus.jsonl" "$work/$tok/tokenizer.json" "$eos" "$dtype" \
    "$work/megatron-$tok" >"$work/megatron-$tok.log" 2>&1 || { cat "$work/megatron-$tok.log"; fail "megatron-core could not write the $tok dataset"; }
  "$kiln" prep --source "megatron-$tok" --input "$work/megatron-$tok.idx" --format tokens --tokenizer "$work/$tok/tokenizer.json" \
    --out "$work/data" --quiet >"$work/prep-megatron-$tok.log" 2>&1 || { cat "$work/prep-megatron-$tok.log"; fail "kiln prep of the $tok Megatron dataset"; }
  /usr/bin/python3 tests/support/source_documents.py "$work/data/megatron-$tok" >"$work/megatron-$tok.stored"
  cmp -s "$work/$tok.stored" "$work/megatron-$tok.stored" ||
    { diff "$work/$tok.stored" "$work/megatron-$tok.stored" | head -5; fail "$tok: the Megatron dataset's documents are not kiln's tokenizing of the same text"; }
  echo "$tok ($dtype): $(tail -1 "$work/megatron-$tok.log")"
done
echo "PASS 4: Megatron-LM datasets (megatron-core's builder; uint16 and int32, documents of 1 and 2 sequences) hold, in kiln, exactly kiln's own tokenizing of the text"
