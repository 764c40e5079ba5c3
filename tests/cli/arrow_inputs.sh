#!/usr/bin/env bash
# Parquet and Arrow inputs (issue 39, items 2 and 3a), on 2 ranks; tests/cli/arrow_inputs.py writes them with the
# pyarrow of .deps/arrow (the wheel whose C++ libraries kiln reads them with).
# Pass criteria, each printed as PASS:
#  1. FineWeb's layout as Parquet (10 row groups, shared by the ranks), Arrow IPC file and IPC stream: the
#     text column's documents and bytes, the null and the empty row counted as skipped with their row.
#  2. fms-fsdp's layout (a list<int32> column of ids): every row stored with exactly its ids (a trailing EOS not
#     stored twice), the row groups shared by the ranks.
#  3. Refused by name, nothing written: a column that is not there (the columns it has are listed), an id past
#     the vocabulary (file, row, row group, value), ids without their vocabulary.
set -euo pipefail
kiln=$1 mpirun=$2 work=$3 python=$4
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
"$python" "$(dirname "$0")/arrow_inputs.py" "$work" || fail "pyarrow could not write the inputs"
summary() { sed -n 's/^kiln prep: \([0-9]*\) documents, \([0-9]*\) tokens in \([0-9]*\) shards\{0,1\} .*/\1 \2 \3/p' "$1"; }
read -r docs bytes < <(/usr/bin/python3 -c "import json, sys; e = json.load(open(sys.argv[1])); print(e['documents'], e['bytes'])" "$work/expected.json")
for input in fineweb.parquet fineweb.arrow fineweb.stream; do
  name=${input/./-}
  "$mpirun" -n 2 --oversubscribe "$kiln" prep --source "$name" --input "$work/$input" --format "$([ "$input" = fineweb.parquet ] && echo parquet || echo arrow)" \
    --out "$work/data" --quiet >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; fail "kiln prep $input"; }
  read -r got_docs got_tokens shards < <(summary "$work/$name.log")
  [ "$got_docs $got_tokens" = "$docs $bytes" ] || fail "$input: $got_docs documents, $got_tokens tokens; expected $docs, $bytes"
  # Rows as the file numbers them (Parquet: with the row group), or within their record batch (IPC files of 128-row batches).
  case $input in
    *.parquet) null="row 10 (row group 0)" empty="row 500 (row group 5)" ;;
    *.arrow) null="record batch 0, row 10" empty="record batch 3, row 116" ;;
    *) null="row 10" empty="row 500" ;;
  esac
  grep -qF "skipped 1 record: null value (first at $work/$input: $null)" "$work/$name.log" || { cat "$work/$name.log"; fail "$input: the null row is not named"; }
  grep -qF "skipped 1 record: empty document (first at $work/$input: $empty)" "$work/$name.log" || { cat "$work/$name.log"; fail "$input: the empty row is not named"; }
  [ "$input" = fineweb.stream ] || [ "$shards" = 2 ] || fail "$input: not shared by the 2 ranks ($shards shards)"
done
echo "PASS 1: FineWeb's layout as Parquet, Arrow IPC file and stream: $docs documents, $bytes bytes, the null and empty rows named"

"$mpirun" -n 2 --oversubscribe "$kiln" prep --source ids --input "$work/ids.parquet" --format parquet --field input_ids \
  --vocab-size 50257 --eos 50256 --out "$work/data" --quiet >"$work/ids.log" 2>&1 || { cat "$work/ids.log"; fail "kiln prep ids.parquet"; }
/usr/bin/python3 tests/support/source_documents.py "$work/data/ids" | sort >"$work/ids.stored"
sort "$work/expected-ids.txt" | cmp -s - "$work/ids.stored" || fail "ids.parquet: the stored ids are not the rows'"
[ "$(ls "$work/data/ids"/shard-*.h5 | wc -l)" = 2 ] || fail "ids.parquet was not shared by the 2 ranks"
echo "PASS 2: fms-fsdp's layout (list<int32> input_ids): every row's ids stored exactly, shared by 2 ranks"

refused() {  # name expected prep-options...
  local name=$1 expected=$2
  shift 2
  if "$mpirun" -n 2 --oversubscribe "$kiln" prep --source "$name" --out "$work/data" --quiet "$@" >"$work/$name.log" 2>&1; then
    fail "$name was accepted"
  fi
  grep -qF -e "$expected" "$work/$name.log" || { cat "$work/$name.log"; fail "$name: the error does not say: $expected"; }
  [ "$(grep -c 'kiln: error' "$work/$name.log")" = 1 ] || { cat "$work/$name.log"; fail "$name: the error is not printed once"; }
  [ ! -e "$work/data/$name" ] && [ ! -e "$work/data/.$name.staging" ] || fail "$name left something behind"
}
refused column "no column 'content' (--field); its columns are: text (string), id (string), url (string), token_count (int64)" \
  --input "$work/fineweb.parquet" --format parquet --field content
refused range "bad-ids.parquet: row 17 (row group 0), id 3: token id 60000 is outside the vocabulary of 50257 ids" \
  --input "$work/bad-ids.parquet" --format parquet --field input_ids --vocab-size 50257 --eos 50256
refused novocab "column 'input_ids' holds token ids: name their tokenizer (--tokenizer) or their vocabulary" \
  --input "$work/ids.parquet" --format parquet --field input_ids
echo "PASS 3: a missing column (with the columns there), an id past the vocabulary (file, row, row group, value) and ids without a vocabulary are refused once, nothing written"
