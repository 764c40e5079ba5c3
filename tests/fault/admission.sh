#!/usr/bin/env bash
# Capacity that comes back while the job runs: new nodes asked for in the file RUN_DIR/admit. kiln starts
# their processes while the job trains (comm/spawn.hpp) and takes them in at the first step boundary after
# they are ready. A step computed for 10 s (":slow") leaves them the time to start on 2 shared cores. Every
# run is compared with the same deck's failure-free run: every step's loss and gradient norm to 1e-5
# relative. Pass criteria, each printed as PASS:
#  1. 3 nodes of 1 rank, f = 1, pipelines 2+1, one node asked for before the start: admitted after step
#     1 or 2 as a spare (an `admit` event saying how long the join took and that the start-up overlapped
#     training, "+1 spare" on the progress line, the request file consumed); a node of the 2-node
#     pipeline killed at step 5: the admitted node takes its place (the layout after is 2+1 again and
#     runs on start-up rank 3), the failure-free losses.
#  2. 2 nodes of 2 ranks, f = 1 (1+1): rank 3 killed at step 3 leaves one node (tolerance 0, said) and
#     rank 2 benched on the retired node; a node asked for then is admitted after step 8 or 9 (its
#     processes told that node 1 is retired, or their layouts would differ from the job's) and the job
#     regroups onto it at once (1+1, tolerance back to 1, said; layers moved to it). An admitted process
#     is killed at step 10: survived as well. Failure-free losses.
#  3. 2 nodes of 2 ranks, two nodes asked for at once: admitted as nodes of 2 ranks (start-up ranks 4 to
#     7), then rank 2 killed: a new node stands in, the failure-free losses.
#  4. A malformed request is refused with a warning that names the file, and removed; the run goes on.
#  5. A new process killed while it gets ready (fault.inject 3:0:ready): the job never waits for it. It
#     trains every step, says that the node asked for was given up, and keeps the failure-free losses.
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
ask() { mkdir -p "$work/$1/tiny" && echo "$2" >"$work/$1/tiny/admit"; }

# 1. A spare admitted before the first failure takes the failed node's place.
# The 10 s ":slow" steps must not pass for hangs: the step deadline's floor above them.
one=(--set cluster.ranks_per_node=1 --set fault.f=1 --set plan.pipelines=2+1 --set fault.step_deadline_floor_s=30)
must clean3 3 "${one[@]}"
ask spare3 1
must spare3 3 "${one[@]}" --set fault.inject=1:1:forward:slow,0:5:forward
losses clean3; losses spare3
same_curve "$work/clean3.losses" "$work/spare3.losses" 10
[ ! -e "$work/spare3/tiny/admit" ] || fail "1: the request file was not consumed"
grep -q "ADMIT after step [12]: 1 node admitted (node3; start-up ranks 3 to 3) in [0-9.]* ms, after [0-9.]* s of start-up while the job trained; they wait as spares" "$work/spare3.log" ||
  { cat "$work/spare3.log"; fail "1: no admission line"; }
grep -q "f 1 +1 spare" "$work/spare3.log" || fail "1: the progress line does not show the spare"
json spare3 | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert [e["step"] for e in d["events"] if e["kind"] == "admit"] in ([1], [2]), d["events"]
f = d["failures"]
assert [r["step"] for r in f] == [5] and f[0]["layout"].startswith("2:"), f
last = d["instantiations"][-1]
assert last["layout"].startswith("2:") and last["pipelines"] == 2 and last["tolerance"] == 1, last
assert "3" in last["ranks"].replace("|", ",").split(","), ("the admitted rank 3 runs a stage", last)
' || fail "1: diag.h5 events, /failures or /instantiations"
echo "PASS 1: a node admitted while the job runs waits as a spare and takes a failed node's place, same losses"

# 2. Degraded to one pipeline, restored to f + 1 by an admitted node, which then fails itself.
two=(--set cluster.ranks_per_node=2 --set fault.f=1 --set plan.pipelines= --set run.steps=12 --set fault.step_deadline_floor_s=30)
must clean2 4 "${two[@]}"
# Rank 1 computes for 10 s at step 8 (":slow"): time for the new processes to start, asked for once the
# tolerance dropped (taken at step 4 to 7).
(for _ in $(seq 600); do
   grep -q "TOLERANCE fault tolerance now 0" "$work/back2.log" 2>/dev/null && { ask back2 1; break; }
   sleep 0.05
 done) &
watcher=$!
must back2 4 "${two[@]}" --set fault.inject=3:3:forward,1:8:forward:slow,4:10:backward
wait $watcher || true
losses clean2; losses back2
same_curve "$work/clean2.losses" "$work/back2.losses" 12
# Ready during step 8's long compute: admitted after step 9 (or 8, had they been ready before its sums).
grep -q "TOLERANCE fault tolerance back to 1 simultaneous node failure (fault.f = 1): nodes admitted after step [89]" \
  "$work/back2.log" || { cat "$work/back2.log"; fail "2: the tolerance was not restored after step 4 or 5"; }
grep -q "ADMIT after step [89]: 1 node admitted (node2; start-up ranks 4 to 5) .*regrouped from 1 (2 stages) to 1+1 (2+2 stages), [0-9.]* MB" \
  "$work/back2.log" || { cat "$work/back2.log"; fail "2: no regroup onto the admitted node"; }
grep -q "nodes admitted after step [89]; tolerates 1 node failure at once; 1 retired node benched" "$work/back2.log" ||
  fail "2: the layout after the admission does not say that node 1 stays benched"
json back2 | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert [r["step"] for r in d["failures"]] == [3, 10], d["failures"]
tol = [(r["step"], r["pipelines"], r["tolerance"]) for r in d["instantiations"]]
assert tol in ([(0, 2, 1), (3, 1, 0), (s, 2, 1), (10, 1, 0)] for s in (8, 9)), tol
' || fail "2: /failures or /instantiations"
echo "PASS 2: an admitted node restores f + 1 pipelines at once; its own failure is survived too; same losses"

# 3. Nodes of 2 ranks, two at once.
three=(--set cluster.ranks_per_node=2 --set fault.f=1 --set plan.pipelines= --set fault.step_deadline_floor_s=30)
must clean22 4 "${three[@]}"
ask grow22 2
must grow22 4 "${three[@]}" --set fault.inject=0:1:forward:slow,2:6:forward
losses clean22; losses grow22
same_curve "$work/clean22.losses" "$work/grow22.losses" 10
grep -q "ADMIT after step [12]: 2 nodes admitted (node2, node3; start-up ranks 4 to 7)" "$work/grow22.log" ||
  { cat "$work/grow22.log"; fail "3: two nodes of 2 ranks not admitted"; }
grep -q "FAILURE step 6: failed rank 2 (node 1 retired)" "$work/grow22.log" || fail "3: no recovery at step 6"
echo "PASS 3: two nodes of 2 ranks admitted at once; a spare among them stands in for a failed node, same losses"

# 4. A malformed request.
ask bad 'two nodes please'
must bad 2 --set cluster.ranks_per_node=1 --set fault.f=1 --set plan.pipelines=
grep -q "admission request ignored: .*/bad/tiny/admit: expected the number of nodes to admit" "$work/bad.log" ||
  { cat "$work/bad.log"; fail "4: no warning naming the file"; }
[ ! -e "$work/bad/tiny/admit" ] && ! grep -q "ADMIT" "$work/bad.log" || fail "4: the request was not refused"
echo "PASS 4: a malformed admission request is refused with a message naming the file, and the run goes on"

# 5. A new process that dies while it gets ready costs the job nothing.
ask dies3 1
must dies3 3 "${one[@]}" --set fault.inject=1:1:forward:slow,3:0:ready
losses dies3
same_curve "$work/clean3.losses" "$work/dies3.losses" 10
grep -q "\[rank 3 on [^]]*\]: fault injection: killing this process (SIGKILL) at step 0 in ready" "$work/dies3.log" ||
  { cat "$work/dies3.log"; fail "5: the new process was not killed while it got ready"; }
grep -q "ADMIT after step [12]: 1 node asked for, none admitted: their processes failed while they started" "$work/dies3.log" ||
  { cat "$work/dies3.log"; fail "5: the job did not say that the node was given up"; }
! grep -q "admitted (node" "$work/dies3.log" || fail "5: a node was admitted"
echo "PASS 5: a new process killed while it got ready: the job trained on without waiting, said so, same losses"
