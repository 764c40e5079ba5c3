#!/usr/bin/env bash
# kiln-mpirun's verdicts on a launch whose mpirun does not end (a lost host's daemon kept from Open MPI's runtime by
# kiln launch-relay, a host gone silent), from what kiln leaves beside KILN_END_RECORD (io/launch_record.hpp). The
# launched command stands in for kiln: one process that writes those files itself and then sleeps, as ranks that
# died behind a runtime that waits. Pass criterion, each as PASS:
#  1. Every side stood down: a side without the job's quorum wrote KILN_END_RECORD.stood_down (claim limit 3 s)
#     and no side claimed the quorum witness it names: kiln-mpirun ends the launch within 20 s of the limit,
#     exits 75, says why, leaves the cause in KILN_END_RECORD.lost for the requeue, and no launched process lives.
#  2. A side stood down and another claimed the witness: kiln-mpirun waits past the limit for the side that goes
#     on, whose end record (status 0) then ends the launch with 0.
#  3. The alive beacon silent past its limit (3 s) with no stand-down: the launch ends with 75 as hung.
set -uo pipefail
launcher=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
left() { pgrep -f "kiln-verdict-sleeper-$1" >/dev/null; }
# launch NAME SCRIPT: kiln-mpirun over one process that runs SCRIPT (bash) with KILN_END_RECORD=$work/NAME.end.
launch() {
  local name=$1 script=$2
  KILN_END_RECORD=$work/$name.end timeout -k 10 120 "$launcher" -n 1 bash -c "$script" kiln-verdict-sleeper "$name" \
    >"$work/$name.log" 2>&1
}
stood_down() {  # the file kiln's standing-down side writes: limit, the witness another side would claim
  printf 'kiln-stood-down 1\nstale_after_s 3\nwitness %s\nstep 8: this side holds 1 of the 3 nodes\n' "$1"
}

# 1.
started=$SECONDS
launch none "$(declare -f stood_down); stood_down '$work/none-quorum-00000001' >\"\$KILN_END_RECORD.stood_down\"; exec -a kiln-verdict-sleeper-\$1 sleep 300"
status=$? took=$((SECONDS - started))
[ "$status" = 75 ] || { cat "$work/none.log"; fail "1: every side stood down, yet kiln-mpirun exited $status, not 75"; }
((took < 25)) || fail "1: kiln-mpirun took $took s to end a launch whose every side stood down (limit 3 s)"
grep -q "no side claimed the job's quorum" "$work/none.log" || { cat "$work/none.log"; fail "1: kiln-mpirun did not say why it ended the launch"; }
grep -q "^cause every side that lived stood down" "$work/none.end.lost" 2>/dev/null ||
  fail "1: the loss record for the requeue says: $(cat "$work/none.end.lost" 2>/dev/null || echo nothing)"
left none && fail "1: the launched process outlived kiln-mpirun"
echo "PASS 1: every side stood down with no quorum claimed: kiln-mpirun ended the launch in $took s, exit 75, cause kept for the requeue"

# 2.
touch "$work/held-quorum-00000001"
started=$SECONDS
launch held "$(declare -f stood_down); stood_down '$work/held-quorum-00000001' >\"\$KILN_END_RECORD.stood_down\"; sleep 8
  printf 'kiln-end-record 1\nstatus 0\nfinished: steps 0 to 10\nnode_failures 1\n' >\"\$KILN_END_RECORD\"; exec -a kiln-verdict-sleeper-\$1 sleep 300"
status=$? took=$((SECONDS - started))
[ "$status" = 0 ] || { cat "$work/held.log"; fail "2: another side held the quorum, yet kiln-mpirun exited $status"; }
((took >= 8)) || fail "2: kiln-mpirun ended the launch after $took s, before the side that held the quorum finished"
left held && fail "2: the launched process outlived kiln-mpirun"
echo "PASS 2: a side stood down while another held the quorum: kiln-mpirun waited for it ($took s) and exited 0 with its end record"

# 3.
started=$SECONDS
launch hung 'printf "stale_after_s 3\n" >"$KILN_END_RECORD.alive"; exec -a kiln-verdict-sleeper-$1 sleep 300'
status=$? took=$((SECONDS - started))
[ "$status" = 75 ] || { cat "$work/hung.log"; fail "3: a silent alive beacon, yet kiln-mpirun exited $status, not 75"; }
((took < 25)) || fail "3: kiln-mpirun took $took s to end a launch whose beacon went silent (limit 3 s)"
grep -q "^cause kiln's alive beacon went silent" "$work/hung.end.lost" 2>/dev/null ||
  fail "3: the loss record says: $(cat "$work/hung.end.lost" 2>/dev/null || echo nothing)"
left hung && fail "3: the launched process outlived kiln-mpirun"
echo "PASS 3: the alive beacon silent past its limit: kiln-mpirun ended the launch in $took s, exit 75"
