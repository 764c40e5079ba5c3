#!/usr/bin/env bash
# kiln prep on compressed JSON Lines (issue 39, item 1), 2 ranks, as a user brings them: a 4 MB corpus as
# .jsonl, .jsonl.gz (gzip), .jsonl.zst made of 4 frames cut in the middle of lines (cat of zstd pieces, as
# pzstd or a sharded export writes them), and the zstd file under a name that says nothing.
# Pass criteria, each printed as PASS:
#  1. Every compressed form gives the plain file's documents and tokens; the zstd file is shared by the two
#     ranks (split between frames: one shard each), the gzip file is read by one.
#  2. A truncated .zst keeps the documents before the damage and reports it with the file and the byte;
#     with --strict it is an error naming them, and nothing is written.
set -euo pipefail
kiln=$1 mpirun=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
prep() {  # name input [options]: prints "documents tokens shards"
  local name=$1 input=$2
  shift 2
  "$mpirun" -n 2 --oversubscribe "$kiln" prep --source "$name" --input "$input" --format jsonl --out "$work/data" \
    --quiet "$@" >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; fail "kiln prep $name"; }
  sed -n 's/^kiln prep: \([0-9]*\) documents, \([0-9]*\) tokens in \([0-9]*\) shards\{0,1\} .*/\1 \2 \3/p' "$work/$name.log"
}

python3 - "$work/corpus.jsonl" <<'PY'
import base64, json, random, sys
random.seed(39)
with open(sys.argv[1], "w") as out:
    for i in range(2000):
        words = base64.b64encode(random.randbytes(random.randint(200, 3000))).decode()
        out.write(json.dumps({"text": f"document {i} café 日本語 " + words, "id": i}, ensure_ascii=False) + "\n")
        if i == 500:
            out.write("not json\n")
PY
gzip -k "$work/corpus.jsonl"
split -n 4 "$work/corpus.jsonl" "$work/piece-"  # 4 pieces of equal bytes: cut inside lines
for p in "$work"/piece-*; do zstd -q "$p" -o "$p.zst"; done
cat "$work"/piece-*.zst >"$work/corpus.jsonl.zst"
cp "$work/corpus.jsonl.zst" "$work/corpus.data"

read -r docs tokens shards < <(prep plain "$work/corpus.jsonl" --split-mb 1)
[ "$docs" = 2000 ] || fail "the plain file gave $docs documents, not 2000"
read -r gz_docs gz_tokens gz_shards < <(prep gz "$work/corpus.jsonl.gz" --split-mb 1)
read -r zst_docs zst_tokens zst_shards < <(prep zst "$work/corpus.jsonl.zst" --split-mb 1)
read -r data_docs data_tokens _ < <(prep renamed "$work/corpus.data" --split-mb 1)
for form in "gz $gz_docs $gz_tokens" "zst $zst_docs $zst_tokens" "renamed $data_docs $data_tokens"; do
  set -- $form
  [ "$2 $3" = "$docs $tokens" ] || fail "$1: $2 documents and $3 tokens, the plain file $docs and $tokens"
done
[ "$gz_shards" = 1 ] || fail "the gzip file was not read by one rank ($gz_shards shards)"
[ "$zst_shards" = 2 ] || fail "the zstd file was not shared by the two ranks ($zst_shards shards)"
grep -q "skipped 1 record: not JSON (first at .*corpus.jsonl.zst:502)" "$work/zst.log" ||
  { cat "$work/zst.log"; fail "the bad line is not named by its line in the decompressed file"; }
echo "PASS 1: .jsonl.gz, .jsonl.zst (4 frames cut inside lines, shared by 2 ranks) and a .zst named .data give the plain file's $docs documents and $tokens tokens"

size=$(stat -c %s "$work/corpus.jsonl.zst")
head -c $((size - 100000)) "$work/corpus.jsonl.zst" >"$work/cut.jsonl.zst"
read -r cut_docs _ < <(prep cut "$work/cut.jsonl.zst")
[ "$cut_docs" -gt 1000 ] && [ "$cut_docs" -lt "$docs" ] || fail "the truncated file gave $cut_docs documents"
grep -q "skipped 1 record: damaged zstd stream (the rest of its file is lost) (first at .*cut.jsonl.zst: truncated zstd stream: the file ends at byte $((size - 100000)) inside a frame that began at byte" "$work/cut.log" ||
  { cat "$work/cut.log"; fail "the damage is not reported with the file and byte"; }
grep -v "^not json" "$work/corpus.jsonl" | zstd -q -o "$work/clean.jsonl.zst"
head -c 100000 "$work/clean.jsonl.zst" >"$work/cut-clean.jsonl.zst"
if "$mpirun" -n 2 --oversubscribe "$kiln" prep --source strict --input "$work/cut-clean.jsonl.zst" --format jsonl --out "$work/data" \
  --strict --quiet >"$work/strict.log" 2>&1; then fail "--strict accepted a truncated file"; fi
grep -q "cut-clean.jsonl.zst: truncated zstd stream: the file ends at byte 100000" "$work/strict.log" || { cat "$work/strict.log"; fail "--strict does not name the damage"; }
[ ! -e "$work/data/strict" ] && [ ! -e "$work/data/.strict.staging" ] || fail "--strict left something behind"
echo "PASS 2: a truncated .zst keeps its $cut_docs documents before the damage and names the file and byte; --strict refuses it, nothing written"
