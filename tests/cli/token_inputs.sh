#!/usr/bin/env bash
# Pre-tokenized corpora (issue 39, item 3): a Megatron-LM indexed dataset, a nanoGPT-style .npy and an llm.c
# .bin (tests/cli/token_inputs.py writes them, GPT-2's vocabulary), prepared on 2 ranks with --format tokens.
# Pass criteria, each printed as PASS:
#  1. Every document of every input is stored with exactly its ids (the EOD/EOS that ends or separates
#     documents not stored: kiln's loader puts it between documents), the Megatron dataset shared by the
#     ranks in runs of documents, the headerless file (--token-dtype uint16) in runs of ids.
#  2. kiln trains on the Megatron source, taking its vocabulary and EOS from it (data.tokenizer empty).
#  3. Refused, naming what is wrong, nothing written: an id past the vocabulary (file, id position and
#     value), --vocab-size without --eos, a headerless file without --token-dtype, a Megatron index cut short.
set -euo pipefail
kiln=$1 mpirun=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
/usr/bin/python3 "$(dirname "$0")/token_inputs.py" "$work"
ids=(--format tokens --vocab-size 50257 --eos 50256 --out "$work/data" --quiet)
for name in mega flat llmc raw; do
  input="$work/$name.bin" more=()
  [ $name = mega ] && input="$work/mega.idx"
  [ $name = flat ] && input="$work/flat.npy"
  [ $name = raw ] && more=(--token-dtype uint16)
  "$mpirun" -n 2 --oversubscribe "$kiln" prep --source $name --input "$input" "${ids[@]}" "${more[@]}" --split-mb 1 >"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; fail "kiln prep $name"; }
  /usr/bin/python3 tests/support/source_documents.py "$work/data/$name" | sort >"$work/$name.stored"
  sort "$work/expected-$name.txt" | cmp -s - "$work/$name.stored" || fail "$name: the stored ids are not the input's"
  echo "$name: $(wc -l <"$work/$name.stored") documents, as given"
done
for name in mega raw; do
  shards=$(ls "$work/data/$name"/shard-*.h5 | wc -l)
  [ "$shards" = 2 ] || fail "$name was not shared by the 2 ranks ($shards shards)"
done
grep -q '"id": "ids-v50257-eos50256"' "$work/data/mega/manifest.json" || grep -q 'ids-v50257-eos50256' "$work/data/mega/manifest.json" ||
  fail "the manifest does not record the ids' vocabulary and EOS"
echo "PASS 1: a Megatron-LM dataset and a headerless nanoGPT train.bin (each shared by 2 ranks), a .npy and an llm.c .bin stored with exactly their ids"

timeout -k 20 300 "$kiln" run input/tiny-cpu.ini --set run.out_dir="$work/run" --set data.dir="$work/data" --set data.mix=mega:1 \
  --set data.tokenizer= --set run.steps=2 --set checkpoint.every=0 --set train.threads=1 --set plan.pipelines= --set fault.f=0 >"$work/run.log" 2>&1 ||
  { cat "$work/run.log"; fail "training on the Megatron source"; }
grep -q "vocabulary 50257" "$work/run.log" || { cat "$work/run.log"; fail "the run does not take the source's vocabulary"; }
echo "PASS 2: kiln trains on the Megatron source with its vocabulary (50257) and EOS"

refused() {  # name expected-text prep-options...
  local name=$1 expected=$2
  shift 2
  if "$mpirun" -n 2 --oversubscribe "$kiln" prep --source "$name" --out "$work/data" --quiet "$@" >"$work/$name.log" 2>&1; then
    fail "$name was accepted"
  fi
  grep -qF -e "$expected" "$work/$name.log" || { cat "$work/$name.log"; fail "$name: the error does not say: $expected"; }
  [ ! -e "$work/data/$name" ] && [ ! -e "$work/data/.$name.staging" ] || fail "$name left something behind"
}
refused bad "bad.npy: id " --input "$work/bad.npy" --format tokens --vocab-size 50257 --eos 50256
grep -q "token id 50300 is outside the vocabulary of 50257 ids" "$work/bad.log" || { cat "$work/bad.log"; fail "the value is not named"; }
refused noeos "--vocab-size 50257 needs --eos" --input "$work/flat.npy" --format tokens --vocab-size 50257
refused nodtype "--token-dtype" --input "$work/raw.bin" --format tokens --vocab-size 50257 --eos 50256
head -c 100 "$work/mega.idx" >"$work/cut.idx"
cp "$work/mega.bin" "$work/cut.bin"
refused cut "cut.idx': 100 bytes, but" --input "$work/cut.idx" --format tokens --vocab-size 50257 --eos 50256
echo "PASS 3: an id past the vocabulary (file, position, value), --vocab-size without --eos, a headerless file without --token-dtype and a cut index are refused by name, nothing written"
