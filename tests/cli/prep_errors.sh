#!/usr/bin/env bash
# Errors of kiln prep on 2 ranks. Pass criteria, each printed as PASS:
#  1. --strict stopping at the first bad record: one error line naming file:line, a non-zero exit, and no
#     staging directory or source left behind.
#  2. A tokenizer file that is not a SentencePiece model: the same (nothing written, printed once).
#  3. A bad option value (--split-mb 0.5): the error is printed once, not once per rank.
set -uo pipefail
kiln=$1 mpirun=$2 out=$3
rm -rf "$out"
expect_once() {  # name log
  [ "$(grep -c 'kiln: error' "$2")" = 1 ] || { cat "$2"; echo "FAIL: $1: the error is not printed exactly once"; exit 1; }
}
nothing_left() {  # name source
  [ ! -e "$out/.$2.staging" ] && [ ! -e "$out/$2" ] || { ls -la "$out"; echo "FAIL: $1 left $out/.$2.staging or $out/$2"; exit 1; }
}

"$mpirun" -n 2 --oversubscribe "$kiln" prep --source strict --input tests/cli/sample.jsonl --format jsonl --out "$out" \
  --strict >"$out.strict.log" 2>&1 && { cat "$out.strict.log"; echo "FAIL: --strict succeeded"; exit 1; }
grep -q "sample.jsonl:3: not JSON (--strict makes every skipped record an error); nothing was written" "$out.strict.log" \
  || { cat "$out.strict.log"; echo "FAIL: no file:line"; exit 1; }
expect_once strict "$out.strict.log"
nothing_left strict strict
echo "PASS 1: --strict on 2 ranks: one error naming sample.jsonl:3, nothing left"

"$mpirun" -n 2 --oversubscribe "$kiln" prep --source badtok --input tests/cli/sample.jsonl --format jsonl --out "$out" \
  --tokenizer tests/cli/bad.ini >"$out.badtok.log" 2>&1 && { cat "$out.badtok.log"; echo "FAIL: bad tokenizer accepted"; exit 1; }
grep -q "is not a SentencePiece model" "$out.badtok.log" || { cat "$out.badtok.log"; echo "FAIL: wrong error"; exit 1; }
expect_once badtok "$out.badtok.log"
nothing_left badtok badtok
echo "PASS 2: a bad tokenizer file on 2 ranks: one error, nothing left"

"$mpirun" -n 2 --oversubscribe "$kiln" prep --source x --input tests/cli/sample.jsonl --out "$out" --split-mb 0.5 \
  >"$out.split.log" 2>&1 && { cat "$out.split.log"; echo "FAIL: --split-mb 0.5 accepted"; exit 1; }
expect_once split "$out.split.log"
echo "PASS 3: a bad option on 2 ranks is reported once"
