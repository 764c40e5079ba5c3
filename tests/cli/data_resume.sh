#!/usr/bin/env bash
# kiln data as a user runs it. Pass criterion, printed last: "SAME" when
#  - the fingerprints of 6 steps on 1 rank equal those on 3 ranks, and
#  - 4 steps on 3 ranks, the cursor saved, then 2 more steps on 2 ranks from
#    it give the fingerprints of steps 4 and 5 of the straight run.
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4
deck="tests/cli/data.ini --set data.dir=$data"
mkdir -p "$work"
fp() { grep -o 'step [0-9]*  fingerprint [0-9a-f]*'; }
one=$("$kiln" data $deck --steps 6 --show 0 | fp)
three=$("$mpirun" -n 3 --oversubscribe "$kiln" data $deck --steps 6 --show 0 | fp)
[ -n "$one" ] && [ "$one" = "$three" ] || { echo "1 rank:"; echo "$one"; echo "3 ranks:"; echo "$three"; exit 1; }
"$mpirun" -n 3 --oversubscribe "$kiln" data $deck --steps 4 --show 0 --cursor-out "$work/c.h5" >/dev/null
resumed=$("$mpirun" -n 2 --oversubscribe "$kiln" data $deck --steps 2 --show 0 --cursor-in "$work/c.h5" | fp)
expected=$(echo "$one" | tail -2)
[ "$resumed" = "$expected" ] || { echo "resumed:"; echo "$resumed"; echo "expected:"; echo "$expected"; exit 1; }
echo "$one"
echo SAME
