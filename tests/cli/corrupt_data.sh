#!/usr/bin/env bash
# A corrupt shard never reaches the model. The licence texts are prepared
# anew (shard format 2, per-chunk checksums) and a bit is flipped on disk in
# every chunk of /tokens. Pass criteria, each printed as PASS:
#  1. kiln run on 2 ranks (a 2-stage pipeline: only its first and last rank read data) stops at once with exit
#     status 1 and one error line (printed once, whichever rank read the chunk) naming the source, the shard,
#     the chunk, and kiln inspect; no step is recorded.
#  2. kiln data stops the same way.
#  3. kiln inspect names the corrupt chunk and exits non-zero.
set -uo pipefail
kiln=$1 mpirun=$2 flip=$3 work=$4
rm -rf "$work"
"$kiln" prep --source corrupt --input /usr/share/common-licenses --out "$work/data" --quiet >/dev/null || exit 1
"$flip" "$work/data/corrupt/shard-00000.h5" || exit 1
settings=(--set data.dir="$work/data" --set data.mix=corrupt:1 --set data.tokenizer=bytes --set run.out_dir="$work/runs"
          --set fault.f=0 --set cluster.ranks_per_node=1 --set plan.pipelines=2 --set train.threads=1)

"$mpirun" -n 2 --oversubscribe "$kiln" run input/tiny-cpu.ini "${settings[@]}" >"$work.run.log" 2>&1
status=$?
[ $status = 1 ] || { cat "$work.run.log"; echo "FAIL: kiln run exit status $status"; exit 1; }
grep -q "kiln: error: source corrupt: .*shard-00000.h5: reading tokens .* failed in chunk [0-9]" "$work.run.log" \
  || { cat "$work.run.log"; echo "FAIL: the error does not name source, shard and chunk"; exit 1; }
grep -q "Check it with kiln inspect .*/corrupt" "$work.run.log" || { cat "$work.run.log"; echo "FAIL: no kiln inspect hint"; exit 1; }
[ "$(grep -c 'kiln: error' "$work.run.log")" = 1 ] || { cat "$work.run.log"; echo "FAIL: not printed once"; exit 1; }
grep -q "MPI_ABORT\|index out of range" "$work.run.log" && { cat "$work.run.log"; echo "FAIL: abort or libtorch error"; exit 1; }
grep -q "^step " "$work.run.log" && { cat "$work.run.log"; echo "FAIL: a step was trained"; exit 1; }
echo "PASS 1: kiln run on 2 ranks stops before training with one error naming source, shard and chunk"

"$mpirun" -n 2 --oversubscribe "$kiln" data input/tiny-cpu.ini "${settings[@]}" --steps 20 --show 0 >"$work.data.log" 2>&1
status=$?
[ $status = 1 ] || { cat "$work.data.log"; echo "FAIL: kiln data exit status $status"; exit 1; }
grep -q "kiln: error: source corrupt: .*failed in chunk" "$work.data.log" || { cat "$work.data.log"; echo "FAIL: kiln data error"; exit 1; }
[ "$(grep -c 'kiln: error' "$work.data.log")" = 1 ] || { cat "$work.data.log"; echo "FAIL: kiln data: not printed once"; exit 1; }
echo "PASS 2: kiln data stops with the same error"

"$kiln" inspect "$work/data/corrupt" >"$work.inspect.log" 2>&1 && { cat "$work.inspect.log"; echo "FAIL: inspect passed"; exit 1; }
grep -q "failed in chunk 0" "$work.inspect.log" || { cat "$work.inspect.log"; echo "FAIL: inspect does not name the chunk"; exit 1; }
echo "PASS 3: kiln inspect names the corrupt chunk"
