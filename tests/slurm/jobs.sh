#!/usr/bin/env bash
# kiln's jobscripts under a real Slurm: a private one on this host (cluster.sh),
# 3 emulated nodes of 2 CPUs; kiln learns its nodes from Slurm (SLURMD_NODENAME),
# not from the host name they share. Every scenario is submitted with sbatch
# and judged by Slurm's records (scontrol show job, the jobcomp log) and the
# job's own log. Pass lines:
#   PASS 1: MPI-parallel prep through kiln-prep.sbatch
#   PASS 2: two node failures inside a job (one injected, one killed from outside) survived; Slurm says COMPLETED
#   PASS 3: a deck whose ranks per node disagree with Slurm's is refused, naming the key; a jobscript setting too
#   PASS 4: beyond f: exit 75, requeued onto fewer nodes with fault.f lowered, resumed, losses as without failure
#   PASS 5: the requeue bound (KILN_MAX_REQUEUES): not requeued, and Slurm shows exit code 75
#   PASS 6: the time limit: stopped ahead of it with a checkpoint, requeued and resumed from it
# Usage: jobs.sh KILN_BUILD_DIR WORK
set -uo pipefail
build=$(cd "$1" && pwd)
work=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
rm -rf "$work"
mkdir -p "$work"
cluster=$(mktemp -d /tmp/kiln-slurm.XXXXXX)
trap 'bash "$here/cluster.sh" stop "$cluster"; rm -rf "$cluster"' EXIT
eval "$(bash "$here/cluster.sh" start "$cluster" 3 2)" || { echo "FAIL: the test Slurm did not start"; exit 1; }
export PATH=$build:$PATH KILN_JOBSCRIPTS=$root/jobscripts
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$root"

fail() {
  echo "FAIL: $*"
  for f in "$work"/*.out; do echo "--- $f"; grep -av "^step " "$f" | tail -40; done
  echo "--- the jobs"; scontrol show job 2>/dev/null | grep -E "JobId|JobState|NumNodes|StartTime"
  echo "--- slurmctld"; tail -30 "$cluster/log/slurmctld.log"
  exit 1
}
field() { scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | sed -n 1p; }
# Waits until job $1 is in one of the states $2 (regex), at most $3 seconds.
await() {
  local state
  for _ in $(seq 1 $(( $3 * 2 ))); do
    state=$(field "$1" JobState)
    [[ "$state" =~ ^($2)$ ]] && return 0
    sleep 0.5
  done
  fail "job $1 is $state after $3 s, expected $2"
}
await_log() {  # job log $1 shows the regex $2 within $3 seconds
  for _ in $(seq 1 $(( $3 * 2 ))); do grep -qE "$2" "$1" 2>/dev/null && return 0; sleep 0.5; done
  fail "$1 does not show '$2' after $3 s"
}
await_idle() {  # all 3 nodes idle (the last job's nodes are released a moment after it ends)
  for _ in $(seq 1 60); do [ "$(sinfo -h -N -t idle -o %N | wc -l)" -ge 3 ] && return 0; sleep 0.5; done
  fail "the nodes did not become idle: $(sinfo -N)"
}
# Updates a requeued job ($1) while it waits. Slurm holds a requeued job back for the lifetime
# of its revoked job credential (cred_expire: 5 s in the test Slurm, 120 s by default; started
# sooner, it fails with "Job credential revoked"). An update takes only once the job is fully
# back in the queue, so it is repeated until field $2 reads $3.
update_requeued() {
  local job=$1 check=$2 value=$3
  shift 3
  for _ in $(seq 1 120); do
    if [ "$(field "$job" JobState)" = PENDING ] && [ "$(field "$job" Restarts)" = 1 ]; then
      scontrol update jobid="$job" "$@" 2>/dev/null
      [ "$(field "$job" "$check")" = "$value" ] && return 0
    fi
    [ "$(field "$job" Restarts)" = 1 ] && [ "$(field "$job" JobState)" = RUNNING ] && return 0
    sleep 1
  done
  fail "could not update requeued job $job ($*)"
}
train=(--set data.mix=licenses:1 --set data.tokenizer=bytes --set train.threads=1 --set checkpoint.resume=true)

# 1. Data preparation, 2 nodes x 1 rank.
job=$(sbatch --parsable -N 2 --ntasks-per-node=1 -o "$work/prep.out" jobscripts/kiln-prep.sbatch \
      --source licenses --input /usr/share/common-licenses --out "$work/data" --quiet) || fail "sbatch prep"
await "$job" COMPLETED 120
[ "$(field "$job" ExitCode)" = 0:0 ] || fail "prep job exit code $(field "$job" ExitCode)"
[ -f "$work/data/licenses/manifest.json" ] || fail "prep wrote no manifest"
grep -q "JobId=$job .*JobState=COMPLETED" "$cluster/jobcomp.log" || fail "no completion record for the prep job"
echo "PASS 1: MPI-parallel prep through kiln-prep.sbatch (job $job, 2 nodes, COMPLETED 0:0)"
train+=(--set data.dir="$work/data")

# 2. Inside the job: rank 2 killed by injection at step 5; rank 0 computes 10 s at step 12,
#    while this script kills start-up rank 4 from outside. f = 2 on 1+1+1. The step deadline's floor
#    is above that computation, which must not pass for a hang (at the 10 s default it raced it).
await_idle
job=$(sbatch --parsable -N 3 --ntasks-per-node=2 -o "$work/survive.out" jobscripts/kiln-run.sbatch input/tiny-cpu.ini \
      "${train[@]}" --set run.out_dir="$work/survive" --set run.steps=30 --set fault.f=2 --set plan.pipelines=1+1+1 \
      --set fault.inject=2:5:allreduce,0:12:forward:slow --set fault.step_deadline_floor_s=30) || fail "sbatch survive"
await_log "$work/survive.out" "computing for 10 s without MPI at step 12" 120
victim=
for pid in $(pgrep -f "kiln run input/tiny-cpu.ini"); do  # this job's rank 4, not another test's
  vars=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null) || continue
  grep -qx "OMPI_COMM_WORLD_RANK=4" <<<"$vars" && grep -qx "SLURM_JOB_ID=$job" <<<"$vars" && victim=$pid
done
[ -n "$victim" ] || fail "no process of start-up rank 4 found"
kill -KILL "$victim"
await "$job" "COMPLETED|FAILED|CANCELLED|TIMEOUT" 120
[ "$(field "$job" JobState)" = COMPLETED ] && [ "$(field "$job" ExitCode)" = 0:0 ] \
  || fail "survive job: $(field "$job" JobState) $(field "$job" ExitCode)"
[ "$(grep -c "FAILURE step" "$work/survive.out")" = 2 ] || fail "expected two recoveries in the survive job"
grep -q "kiln run: steps 0 to 30" "$work/survive.out" || fail "the survive job did not finish its 30 steps"
grep -q "JobId=$job .*JobState=COMPLETED" "$cluster/jobcomp.log" || fail "no completion record for the survive job"
python3 "$root/tests/fault/victims.py" "$build/kiln" "$work/survive/tiny/diag.h5" "$work/survive.out" 6 --outside 4 \
  || fail "survive job: a rank other than the victims (2, and 4 from outside) was lost or went unrecorded"
echo "PASS 2: two node failures inside job $job (one injected, one killed from outside) survived; Slurm says COMPLETED 0:0"

# 3. The deck says 2 ranks per node, Slurm gives 1.
job=$(sbatch --parsable -N 3 --ntasks-per-node=1 -o "$work/mismatch.out" jobscripts/kiln-run.sbatch input/tiny-cpu.ini \
      "${train[@]}" --set run.out_dir="$work/mismatch") || fail "sbatch mismatch"
await "$job" "COMPLETED|FAILED" 60
[ "$(field "$job" JobState)" = FAILED ] || fail "the mismatched job should fail"
grep -q "cluster.ranks_per_node = 2, but Slurm placed 1 rank on node n1" "$work/mismatch.out" \
  || fail "no clear message for the ranks-per-node mismatch"
# A setting of the jobscript's own is refused by name before anything runs.
job=$(KILN_PROBE_S=soon sbatch --parsable -N 1 --ntasks-per-node=1 -o "$work/probe.out" jobscripts/kiln-run.sbatch \
      input/tiny-cpu.ini "${train[@]}" --set run.out_dir="$work/probe") || fail "sbatch probe"
await "$job" "COMPLETED|FAILED" 60
[ "$(field "$job" JobState)" = FAILED ] || fail "KILN_PROBE_S=soon was accepted"
grep -q "KILN_PROBE_S = 'soon' is not a whole number above 0" "$work/probe.out" || fail "KILN_PROBE_S=soon: not named"
echo "PASS 3: a deck with cluster.ranks_per_node = 2 under --ntasks-per-node=1 is refused with a message naming the key; so is KILN_PROBE_S=soon"

# 4. Beyond f onto fewer nodes: f = 2 on 3 nodes (1+1+1, the planner's choice); at step 12 every
#    node loses its first stage's rank, so no replica is left: every survivor exits 75 and the job is requeued.
#    The jobscript ranks round-robin over the nodes: node k holds ranks k and k + 3, its first stage on rank k.
#    n3 is drained (as an administrator would after a node failure) and the waiting job is let
#    down to 2 nodes (Slurm requeues with the node count a job had; an update applies only once
#    it is pending, after the jobscript has ended, so the user or an administrator does it), so it
#    gets 2 nodes and runs with fault.f lowered to 1 (fault.min_f = 0), from the checkpoint of
#    step 10.
await_idle
job=$(sbatch --parsable -N 3 --ntasks-per-node=2 -o "$work/beyond.out" jobscripts/kiln-run.sbatch \
      input/tiny-cpu.ini "${train[@]}" --set run.out_dir="$work/beyond" --set run.steps=20 --set checkpoint.every=5 \
      --set train.grad_clip=0 --set fault.f=2 --set plan.pipelines= \
      --set fault.inject=0:12:allreduce,1:12:allreduce,2:12:allreduce) || fail "sbatch beyond"
await_log "$work/beyond.out" "attempt 1 on 3 nodes" 60
scontrol update nodename=n3 state=drain reason="kiln test: a failed node" || fail "drain"
await_log "$work/beyond.out" "requeueing job $job" 120
update_requeued "$job" NumCPUs 4 numnodes=2-3 numtasks=4 numcpus=4
await_log "$work/beyond.out" "attempt 2 on 2 nodes" 120
await "$job" "COMPLETED|FAILED" 120
scontrol update nodename=n3 state=resume
[ "$(field "$job" JobState)" = COMPLETED ] && [ "$(field "$job" Restarts)" = 1 ] \
  || fail "beyond job: $(field "$job" JobState), $(field "$job" Restarts) restarts"
grep -q "attempt ended with exit status 75" "$work/beyond.out" || fail "attempt 1 did not end with 75"
grep -q "layers .* lost every holder; no checkpoint can be written. A requeued job resumes from .*step-00000010.h5" "$work/beyond.out" \
  || fail "the lost layers were not reported"
[ "$(grep -c "fault.f = 2 lowered to 1: this job.s 2 nodes cannot hold 3 pipelines of this model (each needs at least 1 node), and fault.min_f = 0 allows it" "$work/beyond.out")" = 1 ] \
  || fail "fault.f was not lowered on the requeued job (or not said once)"
grep -q "resumed from .*step-00000010.h5 at step 10" "$work/beyond.out" || fail "did not resume from step 10"
grep -q "kiln run: steps 10 to 20" "$work/beyond.out" || fail "the requeued attempt did not finish"
grep -q '"kind": *"fault_f"' <<<"$("$build/kiln" diag "$work/beyond/tiny/diag.h5" --json)" || fail "no fault_f event in diag.h5"
# Issue 50: beyond f too, the failure has its /failures row, and no process but the victims ended (the first
# attempt's survivors event names the other three ranks; the second attempt lost none of its four).
"$build/kiln" diag "$work/beyond/tiny/diag.h5" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
# One recovery round, or more when the three kills land apart (a busy machine): each victim once, nothing else,
# and the last round stops beyond f.
rows = [sorted(int(r) for r in f["failed_ranks"].split(",")) for f in d["failures"]]
assert sorted(r for row in rows for r in row) == [0, 1, 2] and d["failures"][-1]["layout"].startswith("stopped"), d["failures"]
survivors = [e["detail"] for e in d["events"] if e["kind"] == "survivors"]
assert survivors == ["3-5", "0-3"], survivors
' || fail "beyond job: /failures must name ranks 0, 1, 2 and no other rank may end"
kiln-mpirun -n 2 "$build/kiln" run input/tiny-cpu.ini "${train[@]}" --set run.out_dir="$work/clean" --set run.steps=20 \
  --set checkpoint.resume=false --set train.grad_clip=0 --set fault.f=0 --set plan.pipelines=1 >"$work/clean.log" 2>&1 \
  || fail "the failure-free run"
"$build/kiln" diag "$work/clean/tiny/diag.h5" --losses >"$work/clean.losses"
"$build/kiln" diag "$work/beyond/tiny/diag.h5" --losses >"$work/beyond.losses"
paste "$work/clean.losses" "$work/beyond.losses" | awk '
  { n++; d = $2 - $5; if (d < 0) d = -d; if (d > 1e-5 * $2 || $1 != $4) { bad++; print "step " $1 ": " $2 " vs " $5 } }
  END { if (n != 20 || bad) { print "losses differ (" n " steps)"; exit 1 } }' || fail "losses of the requeued job"
echo "PASS 4: beyond f (every node lost a rank, recorded, no other rank lost), job $job exited 75, was requeued onto 2 nodes, ran with fault.f lowered to 1 from step 10 and matched the failure-free losses"

# 5. The requeue bound: with KILN_MAX_REQUEUES=0 the same failure ends the job, and Slurm shows 75.
await_idle
job=$(KILN_MAX_REQUEUES=0 sbatch --parsable -N 3 --ntasks-per-node=2 -o "$work/bound.out" jobscripts/kiln-run.sbatch \
      input/tiny-cpu.ini "${train[@]}" --set run.out_dir="$work/bound" --set run.steps=20 --set checkpoint.every=5 \
      --set fault.f=2 --set plan.pipelines= --set fault.inject=0:7:allreduce,1:7:allreduce,2:7:allreduce) || fail "sbatch bound"
await "$job" "COMPLETED|FAILED" 120
[ "$(field "$job" JobState)" = FAILED ] && [ "$(field "$job" ExitCode)" = 75:0 ] && [ "$(field "$job" Restarts)" = 0 ] \
  || fail "bound job: $(field "$job" JobState) $(field "$job" ExitCode), $(field "$job" Restarts) restarts"
grep -q "requeued 0 times already (KILN_MAX_REQUEUES = 0): stopping" "$work/bound.out" || fail "no message about the bound"
echo "PASS 5: with KILN_MAX_REQUEUES=0 job $job was not requeued; Slurm shows FAILED with exit code 75"

# 6. The time limit: 1 minute, the stop signal 50 s ahead; after the requeue the limit is raised.
await_idle
job=$(sbatch --parsable -N 3 --ntasks-per-node=2 --time=1 --signal=B:USR1@50 -o "$work/limit.out" \
      jobscripts/kiln-run.sbatch input/tiny-cpu.ini "${train[@]}" --set run.out_dir="$work/limit" --set run.steps=100000 \
      --set checkpoint.every=0 --set fault.f=1) || fail "sbatch limit"
await_log "$work/limit.out" "STOP after step [0-9]+" 90
stopped=$(grep -oE "STOP after step [0-9]+" "$work/limit.out" | grep -oE "[0-9]+$")
update_requeued "$job" TimeLimit 00:10:00 timelimit=10
await_log "$work/limit.out" "attempt 2 on" 90
await_log "$work/limit.out" "resumed from .*step-0*$stopped.h5 at step $stopped" 60
scancel "$job"
await "$job" "CANCELLED|COMPLETED|FAILED" 60
grep -q "attempt ended with exit status 75" "$work/limit.out" || fail "the signalled attempt did not end with 75"
grep -q "tmp" <<<"$(ls "$work/limit/tiny/ckpt")" && fail "a temporary checkpoint file was left"
echo "PASS 6: time limit: job $job stopped at step $stopped with a checkpoint, was requeued and resumed from it"
