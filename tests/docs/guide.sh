#!/usr/bin/env bash
# The guide's commands beyond the tour (tour.sh runs the README's, docs/diagnostics.md's and docs/choosing.md's),
# run as a reader pastes them: every ```sh block of docs/data.md and docs/running.md, in order, in one shell a
# page, in a directory set up as a checkout after `./bootstrap.sh demo`: this checkout's build/, input/ and
# .deps/; data/ with the demo's sources (quotes, and manuals from a part of the Vim manuals, so that their
# tokenizer trains in seconds); and the inputs the examples name, written by the generators the format tests use.
# mpirun may start more ranks than the machine has cores (PRTE's :oversubscribe), as on a larger workstation.
# Blocks marked ```sh setup are what ./bootstrap.sh and .ci/run do; ```sh slurm ones need a cluster.
# Pass criteria, each printed as PASS:
#  1. Every block of docs/data.md runs without an error, in order, and every source its examples wrote verifies.
#  2. docs/running.md's run trains input/tiny-cpu.ini to its last step as 2+1 pipelines on 6 ranks (3 nodes of
#     2, ULFM on, the world's check passed, the stages' layers as planned).
#  3. No page of the guide holds a ```sh block that neither this test nor tour.sh runs.
# Usage: guide.sh BUILD WORK ARROW_PYTHON REFERENCE_PYTHON
set -euo pipefail
build=$(cd "$1" && pwd) work=$2 arrow_python=$3 reference_python=$4
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
kiln=$build/kiln
export PATH=$build:$root/.deps/ompi/bin:$PATH PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe

# The checkout after ./bootstrap.sh demo.
box=$work/checkout
mkdir -p "$box/data" "$work/gen/hf" "$work/gen/arrow" "$work/gen/tokens"
ln -s "$build" "$box/build"
ln -s "$root/input" "$box/input"
ln -s "$root/.deps" "$box/.deps"
/usr/bin/python3 "$root/tools/demo_corpora.py" --out "$box/data/raw" >/dev/null
vimdoc=$(ls -d /usr/share/vim/vim*/doc | head -1)  # as ./bootstrap.sh demo finds it
"$kiln" prep --source manuals --input "$vimdoc"/usr_0{1,2,3,4,5}.txt --format file --out "$box/data" \
  --train-tokenizer --tokenizer "$box/data/tokenizer.model" --vocab 4000 --quiet >"$work/demo.log" 2>&1 &&
  "$kiln" prep --source quotes --input "$box/data/raw/quotes.jsonl" --format jsonl --field text \
    --tokenizer "$box/data/tokenizer.model" --out "$box/data" --quiet >>"$work/demo.log" 2>&1 ||
  { cat "$work/demo.log"; fail "the demo's sources"; }

# The inputs docs/data.md names.
"$reference_python" "$root/tests/reference/hf_tokenizers.py" "$work/gen/hf" >"$work/gen.log" 2>&1 &&
  "$arrow_python" "$root/tests/cli/arrow_inputs.py" "$work/gen/arrow" >>"$work/gen.log" 2>&1 &&
  /usr/bin/python3 "$root/tests/cli/token_inputs.py" "$work/gen/tokens" >>"$work/gen.log" 2>&1 ||
  { cat "$work/gen.log"; fail "the generators of the examples' inputs"; }
(
  cd "$box"
  mkdir -p dumps books dolma fineweb/data train tokens edu_fineweb openwebtext
  cp "$work/gen/hf/corpus.jsonl" dumps/web-000.jsonl
  cp /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 books/
  gzip -c "$work/gen/hf/corpus.jsonl" >dolma/part-000.json.gz
  zstd -q -c "$work/gen/hf/corpus.jsonl" >dolma/part-001.jsonl.zst
  cp -r "$work/gen/hf/gpt2" "$work/gen/hf/llama3" .
  cp "$work/gen/arrow/fineweb.parquet" fineweb/data/000_00000.parquet
  cp "$work/gen/arrow/fineweb.arrow" train/data-00000-of-00008.arrow
  cp "$work/gen/arrow/ids.parquet" tokens/part-000.parquet
  cp "$work/gen/tokens/mega.idx" pile_text_document.idx
  cp "$work/gen/tokens/mega.bin" pile_text_document.bin
  cp "$work/gen/tokens/llmc.bin" edu_fineweb/edu_fineweb_train_000001.bin
  cp "$work/gen/tokens/flat.npy" edu_fineweb/edufineweb_train_000002.npy
  cp "$work/gen/tokens/raw.bin" openwebtext/train.bin
)

# One shell a page, started in the checkout: exports and cd carry over from block to block.
run_page() {  # page name
  local page=$1 name=$2 count
  count=$(/usr/bin/python3 "$root/tests/docs/blocks.py" "$root/$page" "" "$work/$name")
  [ "$count" -ge 1 ] || { fail "$page has no runnable block" >&2; }
  {
    echo "set -eo pipefail"
    echo "cd $box"
    for f in "$work/$name"-*.sh; do echo "echo '>>> block $(basename "$f")'"; cat "$f"; done
  } >"$work/$name.sh"
  bash "$work/$name.sh" >"$work/$name.log" 2>&1 || { tail -n 40 "$work/$name.log"; fail "a block of $page failed (above)"; } >&2
  echo "$count"
}

count=$(run_page docs/data.md data)
sources=$(cd "$box/data" && ls -d */ | tr -d / | grep -vx raw)
for source in $sources; do
  "$kiln" inspect "$box/data/$source" >"$work/inspect-$source.log" 2>&1 || { cat "$work/inspect-$source.log"; fail "source $source does not verify"; }
done
for source in licenses web books dolma fineweb cache ibm pile edu owt; do
  grep -qx "$source" <<<"$sources" || fail "docs/data.md's examples wrote no source $source"
done
echo "PASS 1: docs/data.md's $count command blocks ran in order; the $(wc -w <<<"$sources") sources they and the demo wrote verify"

count=$(run_page docs/running.md running)
for line in "ranks +6 on 3 nodes" "ULFM active. fault\.f = 1" "sum of ranks 15 \(expected 15\)" \
            "layout +2\+1 \(4\+2 stages\) on 3 nodes: pinned by plan\.pipelines" \
            "pipeline 1 microbatches 2-3  rank 4: 0-[0-9] \| rank 5: [0-9]-5" "step +40/40  loss [0-9.]+" "kiln run: steps 0 to 40"; do
  grep -qE "$line" "$work/running.log" || { tail -n 30 "$work/running.log"; fail "docs/running.md's run does not say '$line'"; }
done
echo "PASS 2: docs/running.md's $count command block trained input/tiny-cpu.ini to step 40 as 2+1 pipelines on 6 ranks"

/usr/bin/python3 "$root/tests/docs/blocks.py" --unrun "$root" "README.md#A ten-minute tour" docs/diagnostics.md docs/choosing.md \
  docs/data.md docs/running.md docs/continued-pretraining.md || fail "blocks of the guide that no test runs (above)"
echo "PASS 3: every runnable block of README.md and docs/ is run by tour.sh, reference_continued_pretraining or this test"
