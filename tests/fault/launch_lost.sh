#!/usr/bin/env bash
# Issue 64, item 3: a job never ends silently. Pass criterion, each case through kiln-mpirun with
# KILN_END_RECORD set, as the jobscript launches:
#  1. A run that finishes: exit 0, and kiln's end record says status 0 and its steps.
#  2. A launch that ends under kiln (every process of the job ends at once in step 6, as when Open MPI's runtime
#     loses a host and ends the job): exit 75 whatever mpirun said, the launcher's words kept for the next attempt,
#     and no process left behind.
#  3. The next attempt (the same KILN_END_RECORD, as a requeue): it resumes from the checkpoint of step 4,
#     finishes with exit 0, records the lost launch in diag.h5's /failures with cause "launch" and says so in a
#     LAUNCH_LOST line; its losses are the failure-free run's, step for step.
#  4. A bad deck is an error every rank meets: exit 1, recorded as such, not a requeue that would meet it again.
#  5. A requeue that starts afresh (beyond f before any checkpoint) keeps the failure that caused it (issue 65).
#  6. Open MPI's teardown after a lost host: 6 ranks as 3 nodes; node 2 dies in step 6 (recovered from), node 1 in
#     step 8, then the launch ends (node 0 in step 9) and the launcher names node 2's host as the one it lost. The
#     requeued attempt keeps node 2's row as cause "process", marks node 1's, recorded after node 2 was lost, as
#     the teardown's ("teardown"), says so in a TEARDOWN line, and finishes with the failure-free losses.
set -uo pipefail
kiln=$1 launcher=$2 data=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
deck=(input/tiny-cpu.ini --set data.dir="$data" --set data.mix=licenses:1 --set data.tokenizer=bytes
      --set cluster.ranks_per_node=2 --set fault.f=1 --set train.grad_clip=0 --set run.steps=12 --set plan.pipelines=)
launch() {  # name settings...: the job through kiln-mpirun, its output in $work/name.log, its status returned
  local name=$1
  shift
  KILN_END_RECORD=$work/$name.end timeout -k 20 300 "$launcher" -n 4 --oversubscribe "$kiln" run "${deck[@]}" \
    --set run.out_dir="$work/$name" "$@" >"$work/$name.log" 2>&1
}

# 1.
launch clean --set checkpoint.every=0
status=$?
[ "$status" = 0 ] || { tail -30 "$work/clean.log"; fail "1: a clean run exited $status"; }
grep -qx "status 0" "$work/clean.end" || fail "1: the end record says $(cat "$work/clean.end" 2>/dev/null || echo nothing)"
grep -q "finished: steps 0 to 12" "$work/clean.end" || fail "1: the end record names no steps: $(cat "$work/clean.end")"
echo "PASS 1: a finished run exits 0 with its end record ($(sed -n 3p "$work/clean.end"))"

# 2. Every process of the job ends at once in step 6 (each kills itself there: as the runtime ends a job whose host
#    it lost, and with no race against a run that takes a second).
launch lost --set checkpoint.every=4 --set fault.inject=0:6:forward,1:6:forward,2:6:forward,3:6:forward
status=$?
[ "$status" = 75 ] || { tail -30 "$work/lost.log"; fail "2: a launch ended under kiln exited $status, not 75"; }
grep -qE "^step +5/" "$work/lost.log" || fail "2: the run did not get to step 5 before it ended"
[ ! -f "$work/lost.end" ] || fail "2: an end record was written by a job that did not end: $(cat "$work/lost.end")"
grep -q "^cause ." "$work/lost.end.lost" || fail "2: no cause kept for the next attempt: $(cat "$work/lost.end.lost" 2>&1)"
grep -q "without kiln's end record.*exit 75" "$work/lost.log" || fail "2: kiln-mpirun did not say why it exits 75"
pgrep -f -- "run.out_dir=$work/lost( |$)" >/dev/null && fail "2: processes of the ended job are still running"
echo "PASS 2: a launch ended under kiln exits 75 and keeps its cause: $(sed -n 's/^cause //p' "$work/lost.end.lost")"

# 3. The requeue: the same record path, the run resumes from step 4.
mv "$work/lost.log" "$work/lost-first.log"
launch lost --set checkpoint.every=4
status=$?
[ "$status" = 0 ] || { tail -30 "$work/lost.log"; fail "3: the requeued attempt exited $status"; }
grep -q "LAUNCH_LOST the previous attempt ended without kiln's end record" "$work/lost.log" ||
  fail "3: no LAUNCH_LOST line"
[ ! -f "$work/lost.end.lost" ] || fail "3: the lost launch's file was not taken"
json=$("$kiln" diag "$work/lost/tiny/diag.h5" --json) || fail "3: kiln diag --json"
python3 - "$json" <<'PY' || fail "3: /failures has no row of cause launch"
import json, sys
rows = json.loads(sys.argv[1]).get("failures", [])
sys.exit(0 if any(r.get("cause") == "launch" for r in rows) else 1)
PY
"$kiln" diag "$work/clean/tiny/diag.h5" --losses >"$work/clean.losses"
"$kiln" diag "$work/lost/tiny/diag.h5" --losses >"$work/lost.losses"
paste "$work/clean.losses" "$work/lost.losses" | awk '
  { n++; d = $2 - $5; if (d < 0) d = -d; if (d > 1e-5 * $2 || $1 != $4) { bad++; print "step " $1 ": " $2 " vs " $5 } }
  END { if (n != 12 || bad) { print "FAIL: 3: the requeued run'"'"'s losses differ (" n " steps)"; exit 1 } }' || exit 1
echo "PASS 3: the requeued attempt resumed, recorded the lost launch (cause launch) and has the failure-free losses"

# 4.
launch bad --set train.micro_batch=0
status=$?
[ "$status" = 1 ] || { tail -20 "$work/bad.log"; fail "4: a bad deck exited $status, not 1"; }
grep -qx "status 1" "$work/bad.end" || fail "4: the end record says $(cat "$work/bad.end" 2>/dev/null || echo nothing)"
echo "PASS 4: a bad deck exits 1 with its end record, not a requeue"

# 5. Issue 65: a requeue that starts afresh keeps the failure that caused it. 6 ranks as 3 nodes, 2+1 pinned, two
#    nodes (one of each pipeline, every rank of both) killed at once in step 3, before any checkpoint: beyond f, exit 75, nothing to
#    resume from. The next attempt starts afresh; its diag.h5 has that failure's row and names the earlier file.
afresh=(--set plan.pipelines=2+1 --set checkpoint.every=0)
KILN_END_RECORD=$work/afresh.end timeout -k 20 300 "$launcher" -n 6 --oversubscribe "$kiln" run "${deck[@]}" \
  --set run.out_dir="$work/afresh" "${afresh[@]}" --set fault.inject=2:3:forward,3:3:forward,4:3:forward,5:3:forward >"$work/afresh.log" 2>&1
status=$?
[ "$status" = 75 ] || { tail -30 "$work/afresh.log"; fail "5: two nodes lost beyond f exited $status, not 75"; }
KILN_END_RECORD=$work/afresh.end timeout -k 20 300 "$launcher" -n 6 --oversubscribe "$kiln" run "${deck[@]}" \
  --set run.out_dir="$work/afresh" "${afresh[@]}" >"$work/afresh-again.log" 2>&1
status=$?
[ "$status" = 0 ] || { tail -30 "$work/afresh-again.log"; fail "5: the attempt that started afresh exited $status"; }
"$kiln" diag "$work/afresh/tiny/diag.h5" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
rows = [r for r in d.get("failures", []) if r.get("step") == 3 and r.get("cause") == "process"]
events = [e for e in d.get("events", []) if e.get("kind") == "earlier_attempt"]
sys.exit(0 if rows and events and "diag.h5." in events[0].get("detail", "") else 1)' ||
  fail "5: the fresh diag.h5 lost the failure that caused the requeue, or does not name the earlier file"
echo "PASS 5: a requeue that starts afresh keeps its failure row (step 3) and names the earlier diag.h5"

# 6.
teardown=(--set checkpoint.every=4 --set run.out_dir="$work/teardown")
KILN_END_RECORD=$work/teardown.end timeout -k 20 300 "$launcher" -n 6 --oversubscribe "$kiln" run "${deck[@]}" "${teardown[@]}" \
  --set fault.inject=4:6:forward,5:6:forward,2:8:forward,3:8:forward,0:9:forward,1:9:forward >"$work/teardown-first.log" 2>&1
status=$?
[ "$status" = 75 ] || { tail -30 "$work/teardown-first.log"; fail "6: the torn-down launch exited $status, not 75"; }
[ -f "$work/teardown.end.lost" ] || fail "6: no lost launch recorded"
# The launcher's account, naming the host it lost (an emulated node's name here, a host's on a cluster).
printf 'kind launch\nhost node2\ncause PRTE has lost communication with a remote daemon.\n' >"$work/teardown.end.lost"
KILN_END_RECORD=$work/teardown.end timeout -k 20 300 "$launcher" -n 6 --oversubscribe "$kiln" run "${deck[@]}" "${teardown[@]}" \
  >"$work/teardown.log" 2>&1
status=$?
[ "$status" = 0 ] || { tail -30 "$work/teardown.log"; fail "6: the requeued attempt exited $status"; }
rows=$("$kiln" diag "$work/teardown/tiny/diag.h5" --json | python3 -c "$(cat <<'PY'
import json, sys
print(" ".join(f"{r.get('failed_ranks')}:{r.get('cause')}" for r in json.load(sys.stdin).get("failures", [])))
PY
)")
[ "$rows" = "4,5:process 2,3:teardown :launch" ] || { cat "$work/teardown.log"; fail "6: the /failures rows are '$rows'"; }
grep -q "TEARDOWN the lost attempt recorded ranks 2,3 as failed after host node2 was lost" "$work/teardown.log" ||
  { cat "$work/teardown.log"; fail "6: no TEARDOWN line"; }
"$kiln" diag "$work/teardown/tiny/diag.h5" --losses >"$work/teardown.losses"
paste "$work/clean.losses" "$work/teardown.losses" | awk '
  { n++; d = $2 - $5; if (d < 0) d = -d; if (d > 1e-5 * $2 || $1 != $4) { bad++; print "step " $1 ": " $2 " vs " $5 } }
  END { if (n != 12 || bad) { print "FAIL: 6: the losses differ (" n " steps)"; exit 1 } }' || exit 1
echo "PASS 6: after a lost host, the rows of the deaths Open MPI's teardown caused on live hosts say 'teardown'"
