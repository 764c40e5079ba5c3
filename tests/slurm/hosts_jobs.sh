#!/usr/bin/env bash
# Issue 64, item 7: kiln's jobscript under a Slurm that spans emulated hosts (tests/hosts/hosts.sh): host1 the
# head node (slurmctld), host2..host5 compute nodes, one slurmd each (tests/slurm/cluster.sh with
# KILN_HOSTS_DIR). Every job is submitted from the head node as users submit, `sbatch -N 3 --ntasks-per-node=1
# jobscripts/kiln-run.sbatch`, fault.f = 1, the planner's layout, and Slurm places it on host2-4 (host2 runs
# the batch script and mpirun; host5 is idle). A host of the job fails after step AT_STEP:
#   PASS 1: kill: host4 dies whole (its slurmd, Open MPI daemon and ranks)
#   PASS 2: cut: host4's link goes down, its processes alive
#   PASS 3: partition: {host1-3} | {host4, host5}: the head node and two of the job's nodes on one side
# Pass criteria for each: the job recovers inside (one attempt) or is requeued without the lost host(s) and
# resumes from its checkpoint; Slurm says COMPLETED 0:0; the losses are the failure-free run's step for step;
# diag.h5 has a /failures row for the failure; no rank of a healthy host is recorded as failed; nothing of the
# job is left on any host. After each case the lost hosts come back (a killed host's slurmd is started again).
# The failure-free run is made outside Slurm on this machine (kiln's losses do not depend on the layout).
# Usage: hosts_jobs.sh KILN_BUILD_DIR DATA WORK
set -uo pipefail
build=$(cd "$1" && pwd)
data=$2 work=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
hosts_sh=$root/tests/hosts/hosts.sh
rm -rf "$work"
mkdir -p "$work"
hosts=$work/hosts cluster=$work/slurm
steps=24 at=${AT_STEP:-4}
cleanup() { KILN_HOSTS_DIR=$hosts bash "$here/cluster.sh" stop "$cluster" >/dev/null 2>&1; bash "$hosts_sh" down "$hosts" >/dev/null 2>&1; }
trap cleanup EXIT
on_head() { bash "$hosts_sh" exec "$hosts" 1 env SLURM_CONF="$cluster/slurm.conf" "$@"; }  # a command on the head node
current=""  # the case under way: its log comes first, and whole in its decisions, when it fails
fail() {
  echo "FAIL: $*"
  # CI shows a failed test's output cut in the middle: what kiln and the jobscript decided comes first, short.
  if [ -n "$current" ] && [ -f "$work/$current.out" ]; then
    echo "--- $work/$current.out: kiln's and the jobscript's decisions"
    grep -aE "^(kiln|=== kiln)|FAILURE|LAUNCH_LOST|TEARDOWN|QUORUM|error|warn|exit 75|stands down|deadline" \
      "$work/$current.out" | cut -c1-400 | tail -40
  fi
  for f in "$work"/*.out; do echo "--- $f"; grep -av "^step " "$f" | tail -30; done
  echo "--- the nodes"; on_head sinfo -N 2>&1
  echo "--- slurmctld"; tail -20 "$cluster/log/slurmctld.log"
  exit 1
}
field() { on_head scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | sed -n 1p; }
await() {  # job $1 in a state matching $2 within $3 s
  local state
  for _ in $(seq 1 $(($3 * 2))); do
    state=$(field "$1" JobState)
    [[ "$state" =~ ^($2)$ ]] && return 0
    sleep 0.5
  done
  fail "job $1 is $state after $3 s, expected $2"
}
await_log() {
  for _ in $(seq 1 $(($3 * 2))); do grep -aqE "$2" "$1" 2>/dev/null && return 0; sleep 0.5; done
  fail "$1 does not show '$2' after $3 s"
}
await_idle() {  # the 4 compute nodes idle
  for _ in $(seq 1 120); do [ "$(on_head sinfo -h -N -t idle -o %N 2>/dev/null | wc -l)" -ge 4 ] && return 0; sleep 0.5; done
  fail "the compute nodes did not all become idle"
}
leftovers() {  # kiln and Open MPI processes still on a host
  local h
  for h in 2 3 4 5; do
    bash "$hosts_sh" ps "$hosts" "$h" | awk -v h="$h" '$2 ~ /^(kiln|prted|prterun|mpirun)$/ { print "host" h ": " $0 }'
  done
}

bash "$hosts_sh" up "$hosts" 5 >/dev/null || fail "the emulated hosts did not start"
KILN_HOSTS_DIR=$hosts bash "$here/cluster.sh" start "$cluster" 4 1 >/dev/null || fail "the Slurm across the hosts did not start"
[ "$(on_head sinfo -h -N -o %N | tr '\n' ' ')" = "host2 host3 host4 host5 " ] || fail "Slurm's nodes are not host2-5"
echo "PASS 0: a Slurm across 5 emulated hosts: slurmctld on host1, slurmd on host2-5"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# cluster.waits=sleep, as tests/hosts: the emulated hosts share this machine's cores.
# Open MPI's heartbeats at 10 s, as tests/hosts: 5 s declared a healthy rank failed on a busy machine there.
# Every rank alike 80 ms slower a microbatch (no straggler): 24 steps of about half a second, so that the fault,
# struck once the checkpoint of step 4 exists, lands inside the run.
deck=(input/tiny-cpu.ini --set data.dir="$data" --set data.mix=licenses:1 --set data.tokenizer=bytes
      --set cluster.ranks_per_node=0 --set cluster.waits=sleep --set train.threads=1 --set train.grad_clip=0 --set run.steps=$steps --set checkpoint.every=4
      --set checkpoint.resume=true --set fault.hang_timeout_s=10 --set fault.step_timeout_s=15
      --set "fault.inject=0:1-100:slow=0.08,1:1-100:slow=0.08,2:1-100:slow=0.08,3:1-100:slow=0.08")
"$build/kiln-mpirun" -n 2 "$build/kiln" run "${deck[@]}" --set run.out_dir="$work/clean" --set checkpoint.resume=false \
  --set fault.f=0 --set plan.pipelines=1 >"$work/clean.log" 2>&1 || { tail -20 "$work/clean.log"; fail "the failure-free run"; }
"$build/kiln" diag "$work/clean/tiny/diag.h5" --losses >"$work/clean.losses"

# case NAME PASS-NUMBER: a job on host2-4, host4 (and for the partition host5) failing after step $at.
case_of() {
  local name=$1 n=$2 job state restarts causes lost excluded
  current=$name
  await_idle
  job=$(on_head env PATH="$build:$PATH" KILN_JOBSCRIPTS="$root/jobscripts" sbatch --parsable -N 3 --ntasks-per-node=1 \
        -o "$work/$name.out" "$root/jobscripts/kiln-run.sbatch" "${deck[@]}" --set fault.f=1 --set plan.pipelines= \
        --set run.out_dir="$work/$name") || fail "$name: sbatch"
  await_log "$work/$name.out" "attempt 1 on 3 nodes \(host\[2-4\]\)" 60
  # The checkpoint of step $at, not the job's log: Slurm writes the log late, and a 16-step job was once over
  # by the time its step 6 showed there, the fault striking nothing.
  for _ in $(seq 240); do [ -f "$work/$name/tiny/ckpt/step-$(printf %08d "$at").h5" ] && break; sleep 0.5; done
  [ -f "$work/$name/tiny/ckpt/step-$(printf %08d "$at").h5" ] || fail "$name: no checkpoint of step $at after 120 s"
  [ "$(field "$job" JobState)" = RUNNING ] || fail "$name: the job was $(field "$job" JobState) before the fault"
  case $name in
    kill) bash "$hosts_sh" kill "$hosts" 4; lost=4 ;;
    cut) bash "$hosts_sh" cut "$hosts" 4; lost=4 ;;
    partition) bash "$hosts_sh" partition "$hosts" "1,2,3|4,5"; lost="4 5" ;;
  esac
  # The job goes on or is requeued; requeued, it needs a third node: with host4 and host5 cut off, only two are
  # left, and the job is let down to 2 nodes as the jobscript's log says (a user's or an administrator's update).
  for _ in $(seq 1 240); do
    state=$(field "$job" JobState) restarts=$(field "$job" Restarts)
    [[ "$state" =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)$ ]] && break
    if [ "$name" = partition ] && [ "$state" = PENDING ] && [ "${restarts:-0}" -ge 1 ]; then
      on_head scontrol update jobid="$job" numnodes=2 numtasks=2 numcpus=2 >/dev/null 2>&1
    fi
    sleep 1
  done
  state=$(field "$job" JobState) restarts=$(field "$job" Restarts)
  [ "$state" = COMPLETED ] && [ "$(field "$job" ExitCode)" = 0:0 ] || fail "$name: job $job ended $state $(field "$job" ExitCode)"
  # The hosts come back: links up, the partition healed, what a cut host still ran ended, slurmd restarted.
  bash "$hosts_sh" join "$hosts"
  for h in $lost; do
    bash "$hosts_sh" kill "$hosts" "$h"
    bash "$hosts_sh" heal "$hosts" "$h"
    KILN_HOSTS_DIR=$hosts bash "$here/cluster.sh" boot "$cluster" "$h"
  done
  "$build/kiln" diag "$work/$name/tiny/diag.h5" --losses >"$work/$name.losses"
  paste "$work/clean.losses" "$work/$name.losses" | awk -v steps=$steps '
    { n++; d = $2 - $5; if (d < 0) d = -d; if (d > 1e-5 * $2 || $1 != $4) { bad++; print "step " $1 ": " $2 " vs " $5 } }
    END { if (n != steps || bad) { print "losses differ (" n " of " steps " steps)"; exit 1 } }' ||
    fail "$name: the losses are not the failure-free run's"
  # The failure's row; no rank of host2 or host3 (ranks 0 and 1) among those recorded as failed.
  causes=$("$build/kiln" diag "$work/$name/tiny/diag.h5" --json | python3 -c '
import json, sys
rows = json.load(sys.stdin).get("failures", [])
failed = {int(r) for row in rows if row.get("cause") == "process" and row.get("failed_ranks")
          for r in row["failed_ranks"].split(",")}
if failed & {0, 1}:
    sys.exit(f"healthy ranks {sorted(failed & {0, 1})} recorded as failed")
print(",".join(sorted({row.get("cause", "") for row in rows})))') || fail "$name: $causes"
  [ -n "$causes" ] || fail "$name: diag.h5 has no /failures row"
  if [ "$restarts" = 0 ]; then
    how="recovered inside the job"
  else
    grep -aq "attempt ended with exit status 75" "$work/$name.out" || fail "$name: requeued without an attempt ending in 75"
    grep -aqE "attempt 2 on [23] nodes \((host\[2-3,5\]|host\[2-3\])\)" "$work/$name.out" ||
      fail "$name: the requeued attempt ran on a lost host: $(grep -a "attempt 2 on" "$work/$name.out")"
    grep -aqE "resumed from .*step-[0-9]+\.h5 at step [0-9]+" "$work/$name.out" || fail "$name: the requeued attempt did not resume"
    # The jobscript leaves out the nodes that do not answer, never a healthy one (the runtime's words name host3
    # for host4 cut off at times: one srun step carries every daemon, jobscripts/kiln-requeue.sh).
    excluded=$(grep -aoE "leaving host\(s\) [^ ]+ out of the requeued job" "$work/$name.out")
    ! grep -qE "host[23]" <<<"$excluded" || fail "$name: the jobscript left a healthy host out: $excluded"
    # A host killed whole refuses the jobscript's question at once: it is left out before Slurm notices.
    [ "$name" != kill ] || grep -q host4 <<<"$excluded" || fail "kill: host4 was not left out (${excluded:-none})"
    how="requeued onto $(grep -aoE "attempt 2 on [23] nodes \([^)]*\)" "$work/$name.out" | sed 's/attempt 2 on //'), resumed"
  fi
  sleep 2
  remaining=$(leftovers)
  [ -z "$remaining" ] || fail "$name: processes of the job left on the hosts: $remaining"
  echo "PASS $n: $name: $(sed -E 's/([0-9])/host\1/g' <<<"${lost// /+}") lost after step $at; $how; COMPLETED 0:0, causes $causes, failure-free losses"
}
case_of kill 1
case_of cut 2
case_of partition 3
switch=$(cat "$hosts/switch.ns")
cleanup
! ip netns list | grep -qw "$switch" || fail "the harness left its switch namespace $switch"
echo "PASS 4: the Slurm and the hosts removed"
