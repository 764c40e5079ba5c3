# Sourced by kiln-run.sbatch: the requeue after an attempt that ended with 75, and which of the job's nodes
# it leaves out.
#
# Which host was lost is not always what the launch said. Open MPI's runtime names the first daemon it lost
# contact with, and under Slurm one srun step carries every daemon: a host cut off can take the step down with
# it, and the runtime then names a host that lives (seen on emulated hosts: host4 cut off, "Remote daemon ... on
# node host3"). Excluding that host would leave the lost one in the job and keep a healthy one out. So the job's
# nodes are asked first: a no-op step on each, and those that do not answer within KILN_PROBE_S (default 20)
# are the ones left out. Beyond KILN_PROBE_MAX_NODES (default 64) only the hosts named are asked, so as not to
# start a step per node of a large job at once.

# kiln_silent_nodes NAMED: the job's nodes that do not answer a no-op step, one per line (this node, which runs
# the batch script, answers by running it).
kiln_silent_nodes() {
  local named=$1 nodes self node
  nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null)
  self=${SLURMD_NODENAME:-$(hostname -s)}
  if [ "$(wc -w <<<"$nodes")" -gt "${KILN_PROBE_MAX_NODES:-64}" ]; then nodes=$named; fi
  local dir
  dir=$(mktemp -d)
  for node in $nodes; do
    [ "$node" = "$self" ] && continue
    ( timeout "${KILN_PROBE_S:-20}" srun --overlap --quiet -N 1 -n 1 -w "$node" true >"$dir/$node.words" 2>&1 ||
        { touch "$dir/$node"
          echo "kiln: host $node does not answer: $(grep -m1 -a . "$dir/$node.words" || echo "no answer in ${KILN_PROBE_S:-20} s")" >&2; } ) &
  done
  wait
  ls "$dir" | grep -v '\.words$'
  rm -rf "$dir"
}

# kiln_scontrol ARGS...: scontrol, again for up to a minute while slurmctld says to try again ("Job update not
# available right now, the DB index is being set").
kiln_scontrol() {
  local tries=0 out
  while :; do
    out=$(scontrol "$@" 2>&1) && return 0
    tries=$((tries + 1))
    if ((tries >= 12)) || ! grep -qiE "try again|not available right now|Resource temporarily unavailable" <<<"$out"; then
      echo "$out" >&2
      return 1
    fi
    sleep 5
  done
}

# kiln_silent_of RECORD_LOST: the nodes to leave out of the requeued job after a launch lost or a deadline: the
# job's nodes that do not answer, comma-separated (empty when all answer); a host the record named that answers
# stays, and is said to.
kiln_silent_of() {
  local record_lost=$1 named silent node
  named=$(awk '$1 == "host" && $2 != "" { print $2 }' "$record_lost" | tr ',' ' ')
  silent=$(kiln_silent_nodes "$named" | paste -sd, -)
  for node in $named; do
    [[ ",$silent," == *",$node,"* ]] || echo "kiln: host $node was named, but answers: it stays in the job" >&2
  done
  [ -n "$silent" ] || echo "kiln: every node of the job answers: none left out" >&2
  echo "$silent"
}

# kiln_requeue_without SILENT: requeue the job, then leave SILENT out of it. Slurm changes a job's node list only
# while it is pending ("Job is no longer pending execution" before the requeue), and the requeue ends this script
# (TERM, then KILL after KillWait): TERM is ignored meanwhile, and the update is tried until then. A job whose
# step still waits on a node that does not answer stays completing until Slurm marks that node down, and then
# Slurm places the job elsewhere by itself; so the intent is said first.
kiln_requeue_without() {
  local silent=$1 excluded
  trap '' TERM
  if [ -n "$silent" ]; then
    excluded=$(scontrol show job "$SLURM_JOB_ID" 2>/dev/null | sed -nE 's/.*ExcNodeList=([^ ]+).*/\1/p')
    [ -z "$excluded" ] || [ "$excluded" = "(null)" ] || silent="$excluded,$silent"
    echo "kiln: leaving host(s) $silent out of the requeued job (they do not answer)"
  fi
  kiln_scontrol requeue "$SLURM_JOB_ID" || return 1
  [ -n "$silent" ] || return 0
  for _ in $(seq 60); do  # twice a second: KillWait (30 s by default) ends this script first
    if scontrol update jobid="$SLURM_JOB_ID" ExcNodeList="$silent" >/dev/null 2>&1; then
      echo "kiln: host(s) $silent excluded from the requeued job"
      return 0
    fi
    sleep 0.5
  done
  echo "kiln: could not leave host(s) $silent out of the requeued job; Slurm places it on nodes it finds up"
}
