#!/usr/bin/env bash
# The jobscript's time-limit stop (jobscripts/kiln-time.sh), without Slurm: Slurm's durations in seconds,
# and when a stop signal means "stop now" or came at once because the limit is shorter than the margin.
set -euo pipefail
. "$(dirname "$0")/../../jobscripts/kiln-time.sh"
fail() { echo "FAIL: $*"; exit 1; }
for case in "1-02:03:04 93784" "02:03:04 7384" "2:00 120" "45 45" "0:09 9" "UNLIMITED " "NOT_SET " " "; do
  text=${case% *} want=${case##* }
  [ "$(kiln_seconds "$text")" = "$want" ] || fail "kiln_seconds '$text' = '$(kiln_seconds "$text")', expected '$want'"
done
[ -z "$(kiln_stop_delay 250 300)" ] || fail "a signal 250 s in is the usual one: stop now"
[ -z "$(kiln_stop_delay 10 50)" ] || fail "a signal with 50 s left: stop now"
[ -z "$(kiln_stop_delay 5 "")" ] || fail "no known limit: stop now"
[ "$(kiln_stop_delay 3 115)" = 95 ] || fail "a 2-minute job signalled 3 s in must stop 20 s before its limit"
[ "$(kiln_stop_delay 4 1000)" = 900 ] || fail "a signal 4 s in with 1000 s left must stop a tenth before the limit"
echo "PASS: Slurm durations read; an early stop signal (limit under the margin) is deferred to near the limit"
