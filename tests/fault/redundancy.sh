#!/usr/bin/env bash
# Redundancy restored after every failure (f counts simultaneous failures, not failures per run), spare
# nodes, live ranks of retired nodes handing on their layers, and a requeue onto more nodes. Every run is
# compared with the same deck's failure-free run: every step's loss and gradient norm to 1e-5 relative.
# Pass criteria, each printed as PASS:
#  1. 4 nodes of 1 rank, f = 1, a sync-bound cost model, start-up layout 3+1 (pinned): rank 1 killed at step 5 and
#     rank 2 at step 10. The first regroup keeps at least 2 pipelines; both failures are survived (exit 0,
#     two /failures rows) with the failure-free losses.
#  2. 8 nodes of 1 rank, f = 1, a model that needs 2 nodes per pipeline: nodes lost one at a time in
#     forward, backward, allreduce, sums and commit, each survived; when 3 nodes are left (no room for 2
#     pipelines) the lowered tolerance is said once (log, diag event, /instantiations tolerance 0); the
#     next failure loses layers: exit 75, `latest` is the last periodic checkpoint, and the job resumed
#     on the 2 nodes left (fault.f lowered to 0: one pipeline needs both) finishes with the failure-free losses.
#  3. f = 2, 6 nodes of 1 rank, failures in pairs (2 nodes at step 3, 2 more at step 7): 3 pipelines after
#     the first pair, 2 after the second (tolerance 1, said), the failure-free losses.
#  4. Spares: 4 nodes + 1 spare (cluster.spare_nodes = 1), pipelines 3+1, a node of the 3-node pipeline
#     killed: the layout after is the layout before with the spare in the failed node's place (the 1-node
#     replica keeps its place), only the failed node's layers move, the failure-free losses.
#  5. A requeue onto more nodes: 5 steps on 2 nodes, resumed on 4 (2 pipelines at least): the losses of
#     the failure-free run on 4 nodes.
#  6. Two nodes lose one rank each while their other ranks live (3 nodes of 2 ranks): the live ranks hand
#     their layers to the node that stays (layers migrated) and stay in the job without work (benched:
#     said by each, and by the layout line), the run goes on with the failure-free losses.
#     Rank 1 lost: rank 0, alive on its retired node, hands diag.h5 to the new rank 0 when it is benched
#     (every step recorded).
#     And with 4 nodes of 2 ranks where 3 nodes lose a rank each (no pipeline fits on the node left): the
#     beyond-f checkpoint holds the layers of a live rank of a retired node, and the job resumed from it
#     gives the failure-free losses.
#  7. 8 ranks as 4 nodes of 2, f = 2, pipelines 2+1+1: rank 0 killed in step 5's forward and rank 2 in its
#     backward (which it reaches only in the replay: in the first attempt it waits for rank 0's activations):
#     both failures have their /failures row (written by rank 4, the third holder of diag.h5), the
#     failure-free losses.
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
. "$(dirname "$0")/lib.sh"

# 1. The issue's scenario: two failures 5 steps apart on 4 nodes, f = 1.
one=(--set cluster.ranks_per_node=1 --set plan.pipelines=3+1 --set run.steps=14 --set plan.device_tflops=100
     --set plan.inter_node_gb_s=25 --set plan.intra_node_gb_s=200)
must clean4 4 "${one[@]}"
grep -q "layout     3+1 " "$work/clean4.log" || { cat "$work/clean4.log"; fail "1: start-up layout is not 3+1"; }
must apart4 4 "${one[@]}" --set fault.inject=1:5:forward,2:10:forward
losses clean4; losses apart4
same_curve "$work/clean4.losses" "$work/apart4.losses" 14
json apart4 | python3 -c '
import json, sys
d = json.load(sys.stdin)
f = d["failures"]
assert [r["step"] for r in f] == [5, 10], f
assert "+" in f[0]["layout"], ("the first regroup must keep 2 pipelines", f[0])
assert all(r["bytes_migrated"] >= 0 and r["migrate_s"] > 0 for r in f), f
layouts = d["instantiations"]
assert layouts[1]["pipelines"] >= 2 and layouts[1]["tolerance"] >= 1, layouts
' || fail "1: /failures or /instantiations"
echo "PASS 1: two failures 5 steps apart on 4 nodes with f = 1: 2+ pipelines after the first, both survived, same losses"

# 2. Six nodes lost one at a time on 8 nodes; a model that needs 2 nodes per pipeline (a memory budget below a
#    1-node pipeline's, the loader's 11.4 MB included), whose 2-node pipelines hold 2 microbatches in flight
#    (regroups never choose a layout that does not fit).
#    Checkpoints written at once: a background write of step 12 still in flight when step 13's failure took its only
#    writer of layers 2-3 cannot be published (right), which left nothing to resume from when the machine was busy
#    (this session's third suite) and step 12 when it was not: a race in the test, not in kiln.
eight=(--set cluster.ranks_per_node=1 --set plan.pipelines= --set run.steps=16 --set checkpoint.every=2
       --set checkpoint.background=false)
eight+=(--set plan.memory_gb="$(memory_between 8 "${eight[@]}")")
must clean8 8 "${eight[@]}"
set +e
run "$work/six" 8 "${eight[@]}" --set fault.inject=1:2:forward,2:4:backward,3:6:allreduce,4:8:sums,5:10:commit,6:13:send \
  >"$work/six.log" 2>&1
status=$?
set -e
[ "$status" = 75 ] || { cat "$work/six.log"; fail "2: exit status $status, expected 75"; }
[ "$(grep -c "  FAILURE step .*re-instantiated" "$work/six.log")" = 5 ] || { cat "$work/six.log"; fail "2: five recoveries expected"; }
[ "$(grep -c "TOLERANCE fault tolerance now 0 " "$work/six.log")" = 1 ] || { cat "$work/six.log"; fail "2: the lowered tolerance must be said once"; }
grep -q "layers 2, 3 lost every holder; no checkpoint can be written. A requeued job resumes from .*step-00000012.h5" "$work/six.log" \
  || { cat "$work/six.log"; fail "2: the lost layers are not reported"; }
grep -qx "step-00000012.h5" "$work/six/tiny/ckpt/latest" || fail "2: latest is not step 12"
json six | python3 -c '
import json, sys
d = json.load(sys.stdin)
tol = [l["tolerance"] for l in d["instantiations"]]
assert tol[0] >= 1 and tol[-1] == 0 and all(t >= 1 for t in tol[1:-1]), tol
assert any(e["kind"] == "tolerance" for e in d["events"]), d["events"]
assert len(d["failures"]) == 6 and d["failures"][-1]["layout"].startswith("stopped"), d["failures"]
' || fail "2: diag.h5"
# The requeued job on the 2 nodes left: fault.f = 1 is lowered to 0 (a pipeline needs both nodes).
run "$work/six" 2 "${eight[@]}" >"$work/six-resume.log" 2>&1 || { cat "$work/six-resume.log"; fail "2: resume"; }
grep -q "resumed from .*step-00000012.h5 at step 12" "$work/six-resume.log" || { cat "$work/six-resume.log"; fail "2: no resume"; }
grep -q "fault.f = 1 lowered to 0: this job's 2 nodes cannot hold 2 pipelines of this model (each needs at least 2 nodes)" \
  "$work/six-resume.log" || { cat "$work/six-resume.log"; fail "2: f was not lowered for the model's smallest pipeline"; }
losses clean8; losses six
same_curve "$work/clean8.losses" "$work/six.losses" 16
echo "PASS 2: 8 nodes, f = 1: five failures survived one at a time, the lowered tolerance said once, the sixth beyond f; resumed with the same losses"

# 3. f = 2, failures in pairs.
pairs=(--set cluster.ranks_per_node=1 --set plan.pipelines= --set fault.f=2)
must clean6 6 "${pairs[@]}"
must pairs 6 "${pairs[@]}" --set fault.inject=1:3:forward,2:3:forward,3:7:backward,4:7:backward
json pairs | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert [r["step"] for r in d["failures"]] == [3, 7], d["failures"]
p = [l["pipelines"] for l in d["instantiations"]]
assert p[1] >= 3 and p[2] == 2, p
assert [l["tolerance"] for l in d["instantiations"]][2] == 1, d["instantiations"]
' || fail "3: layouts"
grep -q "TOLERANCE fault tolerance now 1 simultaneous node failure (fault.f = 2)" "$work/pairs.log" || fail "3: tolerance not said"
losses clean6; losses pairs
same_curve "$work/clean6.losses" "$work/pairs.losses" 10
echo "PASS 3: f = 2, two failures in pairs: 3 pipelines after the first pair, 2 after the second, same losses"

# 4. A spare takes the failed node's place.
spare=(--set cluster.ranks_per_node=1 --set plan.pipelines=3+1 --set cluster.spare_nodes=1)
must clean-spare 5 "${spare[@]}"
must spare 5 "${spare[@]}" --set fault.inject=1:5:backward
grep -q "a spare took the failed node's place after step 5 failed" "$work/spare.log" || { cat "$work/spare.log"; fail "4: no spare"; }
json spare | python3 -c '
import json, sys
d = json.load(sys.stdin)
l = d["instantiations"]
assert len(l) == 2 and l[0]["layout"] == l[1]["layout"] == "3:3+1:1", l
assert l[0]["spares"] == 1 and l[1]["spares"] == 0 and l[1]["tolerance"] == 1, l
assert l[0]["ranks"] == "0,1,2|3" and l[1]["ranks"] == "0,4,2|3", l
f = d["failures"][0]
assert 0 < f["bytes_migrated"] < 1.2e6, f   # layers 2-3 only (the whole model is 2.8 MB)
' || fail "4: layouts"
losses clean-spare; losses spare
same_curve "$work/clean-spare.losses" "$work/spare.losses" 10
echo "PASS 4: a spare in the failed node's place: the same layout and tolerance, only its layers moved, same losses"

# 5. A requeue onto more nodes than the job had.
more=(--set cluster.ranks_per_node=1 --set plan.pipelines= --set train.decay_steps=5 --set checkpoint.every=5)
must clean-more 4 "${more[@]}"
run "$work/more" 2 "${more[@]}" --set run.steps=5 >"$work/more-2.log" 2>&1 || { cat "$work/more-2.log"; fail "5: first part"; }
run "$work/more" 4 "${more[@]}" >"$work/more-4.log" 2>&1 || { cat "$work/more-4.log"; fail "5: second part"; }
grep -q "resumed from .*step-00000005.h5 at step 5" "$work/more-4.log" || { cat "$work/more-4.log"; fail "5: no resume"; }
grep -q "layout     1+1+1+1 (1+1+1+1 stages) on 4 nodes" "$work/more-4.log" || { cat "$work/more-4.log"; fail "5: not on 4 nodes"; }
losses clean-more; losses more
same_curve "$work/clean-more.losses" "$work/more.losses" 10
echo "PASS 5: 5 steps on 2 nodes, requeued onto 4: every node runs a pipeline, same losses"

# 6. Live ranks of retired nodes hand on their layers: to the ranks that stay, or into the checkpoint.
must clean32 6
KILN_VERBOSE=1 must halfdead 6 --set fault.inject=3:5:forward,4:5:forward  # verbose: each benched rank says so
grep -q "FAILURE step 5: failed ranks 3,4 (nodes 1,2 retired); 2 ranks on 1 node remain.*migrated [1-9]" "$work/halfdead.log" \
  || { cat "$work/halfdead.log"; fail "6: recovery report"; }
[ "$(grep -c "this rank's node is retired; its layers handed on, it stays in the job without work (benched)" \
  "$work/halfdead.log")" = 2 ] || { cat "$work/halfdead.log"; fail "6: ranks 2 and 5 were not benched after handing on"; }
grep -q "2 retired nodes benched" "$work/halfdead.log" || { cat "$work/halfdead.log"; fail "6: the layout does not say 2 nodes are benched"; }
losses clean32; losses halfdead
same_curve "$work/clean32.losses" "$work/halfdead.losses" 10
# Rank 1 dies: rank 0, alive on the retired node 0, holds diag.h5 and hands it over when it is benched.
must handover 6 --set fault.inject=1:5:forward
grep -q "takeover .*by start-up rank 2 after rank 0 was retired with its node" <<<"$("$kiln" diag "$work/handover/tiny/diag.h5")" \
  || fail "6: diag.h5 was not handed over"
losses handover
same_curve "$work/clean32.losses" "$work/handover.losses" 10
wide=(--set plan.pipelines= --set checkpoint.every=0)
wide+=(--set plan.memory_gb="$(memory_between 4 "${wide[@]}")")  # 2-node pipelines only
must clean42 8 "${wide[@]}"
set +e
run "$work/threedead" 8 "${wide[@]}" --set fault.inject=2:5:forward,5:5:forward,7:5:forward >"$work/threedead.log" 2>&1
status=$?
set -e
[ "$status" = 75 ] || { cat "$work/threedead.log"; fail "6: exit status $status, expected 75"; }
grep -q "1 node left, and a pipeline needs at least 2: writing a checkpoint of step 5 from the surviving holders" "$work/threedead.log" \
  || { cat "$work/threedead.log"; fail "6: no beyond-f checkpoint"; }
grep -qx "step-00000005.h5" "$work/threedead/tiny/ckpt/latest" || fail "6: latest"
resume=(--set plan.pipelines= --set checkpoint.every=0 --set fault.f=0)
resume+=(--set plan.memory_gb="$(memory_between 2 "${resume[@]}")")  # one pipeline on both nodes
run "$work/threedead" 4 "${resume[@]}" >"$work/threedead-resume.log" 2>&1 \
  || { cat "$work/threedead-resume.log"; fail "6: resume"; }
losses clean42; losses threedead
same_curve "$work/clean42.losses" "$work/threedead.losses" 10
echo "PASS 6: live ranks of retired nodes hand their layers to the node that stays and are benched, or write them into the beyond-f checkpoint; same losses"

# 7. A second failure inside the replay of the step the first one hit: both are recorded.
must cleanf2 8 --set fault.f=2 --set plan.pipelines=2+1+1
must replay8 8 --set fault.f=2 --set plan.pipelines=2+1+1 --set fault.inject=0:5:forward,2:5:backward
[ "$(grep -c "FAILURE step 5" "$work/replay8.log")" = 2 ] || { cat "$work/replay8.log"; fail "7: not two failures at step 5"; }
losses cleanf2; losses replay8
same_curve "$work/cleanf2.losses" "$work/replay8.losses" 10
json replay8 | python3 -c '
import json, sys
d = json.load(sys.stdin)
f = d["failures"]
assert [(r["step"], r["failed_ranks"]) for r in f] == [(5, "0"), (5, "2")], f
assert f[0]["replay_s"] > 0 and f[1]["replay_s"] > 0, f
' || fail "7: /failures must hold both failures"
echo "PASS 7: a failure inside the replay of a failed step: both failures in /failures, same losses"
