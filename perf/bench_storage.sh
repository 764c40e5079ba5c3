#!/usr/bin/env bash
# Token storage benchmarks (issue 3): prep throughput on 1 and 2 ranks with
# the byte and a SentencePiece tokenizer, against two baselines measured in
# the same run (reading the input with cat; SentencePiece's own spm_encode
# tokenizing the same lines with no storage), then reader throughput
# (perf/bench_reader: HDF5 shards against a flat binary file).
#
#   perf/bench_storage.sh [MB]        (default 200; run after ./bootstrap.sh build)
#
# Output: JSON lines on stdout. Metrics: input MB/s = input bytes / wall
# seconds of the whole prep; tokens/s = tokens written / wall seconds.
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
mb=${1:-200}
work=$build/perf-data
mkdir -p "$work"
corpus=$work/corpus-${mb}mb.jsonl
[ -f "$corpus" ] || python3 "$root/tools/gen_corpus.py" --out "$corpus" --mb "$mb" >&2
bytes=$(stat -c %s "$corpus")

now() { date +%s.%N; }
json_prep() {  # name ranks tokenizer seconds summary-line
  local docs tokens
  docs=$(sed -E 's/.*prep: ([0-9]+) documents.*/\1/' <<<"$5")
  tokens=$(sed -E 's/.* ([0-9]+) tokens in.*/\1/' <<<"$5")
  printf '{"bench":"prep","tokenizer":"%s","ranks":%s,"input_mb":%.1f,"seconds":%.2f,"input_mb_per_s":%.2f,"tokens":%s,"tokens_per_s":%.0f,"docs":%s}\n' \
    "$3" "$2" "$(bc -l <<<"$bytes/1000000")" "$4" "$(bc -l <<<"$bytes/1000000/$4")" "$tokens" "$(bc -l <<<"$tokens/$4")" "$docs"
}

# Baseline 1: reading the input once (page cache warm after the first read).
cat "$corpus" >/dev/null
t0=$(now); cat "$corpus" >/dev/null; t1=$(now)
printf '{"bench":"prep-baseline","what":"cat","input_mb_per_s":%.1f}\n' "$(bc -l <<<"$bytes/1000000/($t1-$t0)")"

# A SentencePiece model of 8000 pieces trained on 8 MB of the corpus (timed apart).
model=$work/bench-sp.model
if [ ! -f "$model" ]; then
  t0=$(now)
  "$build/kiln" prep --source sp-train --input "$corpus" --format jsonl --out "$work" --overwrite --quiet \
    --train-tokenizer --tokenizer "$model" --vocab 8000 --sample-mb 8 >/dev/null
  t1=$(now)
  printf '{"bench":"tokenizer-train","vocab":8000,"sample_mb":8,"seconds":%.1f}\n' "$(bc -l <<<"$t1-$t0")"
fi

# Baseline 2: spm_encode alone on the same lines, one process, ids to /dev/null.
t0=$(now); spm_encode --model "$model" --output_format id <"$corpus" >/dev/null; t1=$(now)
printf '{"bench":"prep-baseline","what":"spm_encode","ranks":1,"input_mb_per_s":%.2f}\n' "$(bc -l <<<"$bytes/1000000/($t1-$t0)")"

for tokenizer in bytes sentencepiece; do
  spec=bytes; [ $tokenizer = sentencepiece ] && spec=$model
  for ranks in 1 2; do
    out=$(mpirun -n $ranks --oversubscribe "$build/kiln" prep --source "bench-$tokenizer-$ranks" --input "$corpus" \
          --format jsonl --out "$work" --overwrite --quiet --tokenizer "$spec" --split-mb 16 2>&1)
    line=$(grep "kiln prep: [0-9]* documents" <<<"$out")
    secs=$(sed -E 's/.* in ([0-9.]+) s .*/\1/' <<<"$line")
    json_prep prep "$ranks" "$tokenizer" "$secs" "$line"
  done
done

"$build/perf/bench_reader" "$work/bench-sentencepiece-1"
