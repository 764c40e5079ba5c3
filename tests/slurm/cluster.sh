#!/usr/bin/env bash
# A private Slurm on this host, for tests: munge, slurmctld and NODES slurmd
# (emulated nodes n1..nN, all on this host, each with its own port and spool),
# every file under DIR; nothing of the system's Slurm or munge is used.
#
#   tests/slurm/cluster.sh start DIR NODES CPUS_PER_NODE   (prints the env to source)
#   tests/slurm/cluster.sh stop DIR                        (kills everything it started)
#   tests/slurm/cluster.sh boot DIR H                      (emulated hosts: host H's slurmd again)
#
# Scheduler clients need: export SLURM_CONF=DIR/slurm.conf
#
# With KILN_HOSTS_DIR naming a harness of emulated hosts (tests/hosts/hosts.sh, NODES + 1 hosts up), the
# Slurm spans them as it spans a cluster: slurmctld on host1 (the head node, no jobs), one slurmd on each of
# host2..host(NODES+1), named after its host, every daemon on the same port of its own network; a host that
# dies takes its slurmd and its job steps with it. Clients must then run on a host (hosts.sh exec DIR 1 ...).
# munge stays on this machine: its socket is a file, reached from every host's namespaces.
# Job accounting (sacct) needs slurmdbd and a database: this test Slurm keeps
# finished jobs in slurmctld's memory for an hour (scontrol show job) and
# writes a completion record per job to DIR/jobcomp.log instead.
set -euo pipefail

action=${1:?usage: cluster.sh start DIR NODES CPUS | stop DIR}
dir=${2:?usage: cluster.sh start DIR NODES CPUS | stop DIR}

# Processes of this test Slurm: its daemons and their step daemons carry
# KILN_TEST_SLURM=DIR; its jobs' processes carry SLURM_CONF=DIR/slurm.conf and
# a SLURM_JOB_ID (the submitting test has the first, never the second).
ours() {
  local environ pid vars
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}; pid=${pid%/environ}
    [ "$pid" = $$ ] || [ "$pid" = "$BASHPID" ] && continue
    vars=$(tr '\0' '\n' 2>/dev/null <"$environ") || continue
    if grep -qxF "KILN_TEST_SLURM=$dir" <<<"$vars" ||
       { grep -qxF "SLURM_CONF=$dir/slurm.conf" <<<"$vars" && grep -q "^SLURM_JOB_ID=" <<<"$vars"; }; then
      echo "$pid"
    fi
  done
  return 0
}

stop_cluster() {
  [ -d "$dir" ] || return 0
  if [ -f "$dir/slurm.conf" ]; then
    jobs=$(SLURM_CONF=$dir/slurm.conf timeout 5 squeue -h -o %i 2>/dev/null || true)
    if [ -n "$jobs" ]; then SLURM_CONF=$dir/slurm.conf timeout 5 scancel $jobs 2>/dev/null || true; fi
  fi
  for signal in TERM KILL; do
    pids=$(ours)
    if [ -n "$pids" ]; then kill -$signal $pids 2>/dev/null || true; fi
    for pidfile in "$dir"/run/*.pid; do
      if [ -f "$pidfile" ]; then kill -$signal "$(cat "$pidfile" 2>/dev/null)" 2>/dev/null || true; fi
    done
    sleep 1
  done
  rm -f "$dir"/run/*.pid
  left=$(ours)
  [ -z "$left" ] || { echo "cluster.sh: processes left: $left" >&2; return 1; }
}

if [ "$action" = stop ]; then stop_cluster; exit 0; fi
if [ "$action" = boot ]; then
  # boot DIR H: emulated host H (a harness's) is back after a failure that took its slurmd: started again, as a
  # rebooted node's slurmd is; ReturnToService=2 then lets the controller use it again.
  h=${3:?which host}
  export KILN_TEST_SLURM=$dir
  bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../hosts/hosts.sh" exec "${KILN_HOSTS_DIR:?boot needs KILN_HOSTS_DIR}" "$h" \
    slurmd -f "$dir/slurm.conf" -N "host$h"
  exit 0
fi
[ "$action" = start ] || { echo "cluster.sh: unknown action '$action' (start, boot or stop)" >&2; exit 2; }
nodes=${3:?NODES}
cpus=${4:?CPUS_PER_NODE}
host=$(hostname -s)
base_port=$(( 17000 + ($$ % 500) * 10 ))   # several test Slurms may run at once
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
harness=${KILN_HOSTS_DIR:-}
on_host() {  # on_host H COMMAND...: on emulated host H, or here without a harness
  local h=$1
  shift
  if [ -n "$harness" ]; then bash "$here/../hosts/hosts.sh" exec "$harness" "$h" "$@"; else "$@"; fi
}
if [ -n "$harness" ]; then
  [ "$(cat "$harness/count" 2>/dev/null || echo 0)" -gt "$nodes" ] ||
    { echo "cluster.sh: $nodes nodes need $((nodes + 1)) emulated hosts in $harness (host1 is the head node)" >&2; exit 1; }
  host=host1
  nodelines="NodeName=host[2-$((nodes + 1))] CPUs=$cpus RealMemory=1000"
  # A host that stops answering is down within seconds, as a lost node of a real cluster within its timeout.
  slurmd_timeout=10
else
  nodelines="NodeName=n[1-$nodes] NodeHostname=$host CPUs=$cpus RealMemory=1000 Port=$((base_port + 2))-$((base_port + 1 + nodes))"
  slurmd_timeout=30
fi

mkdir -p "$dir"/{run,log,state,munge}
chmod 700 "$dir" "$dir/munge"
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
export KILN_TEST_SLURM=$dir
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
  --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"

# A name of its own: two test Slurms side by side number their jobs alike from 1, and a jobscript's files named by
# cluster and job (.kiln-end.CLUSTER.JOB in the submit directory) must not meet.
cluster_name=kiln$(printf '%s' "$dir" | md5sum | cut -c1-8)
cat >"$dir/slurm.conf" <<CONF
ClusterName=$cluster_name
SlurmctldHost=$host
SlurmctldPort=$base_port
SlurmdPort=$((base_port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock,cred_expire=5
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
# Pending jobs tried every second, not every 30-60 s: a requeued job starts as soon as its held credential
# expires (cred_expire), which the requeue scenarios of the tests wait for.
SchedulerParameters=bf_interval=1,sched_interval=1
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.log
MinJobAge=3600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=$slurmd_timeout
MaxJobCount=1000
JobRequeue=1
$nodelines
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF

on_host 1 slurmctld -f "$dir/slurm.conf" -i
for n in $(seq 1 "$nodes"); do
  if [ -n "$harness" ]; then on_host $((n + 1)) slurmd -f "$dir/slurm.conf" -N "host$((n + 1))"
  else slurmd -f "$dir/slurm.conf" -N "n$n"; fi
done
export SLURM_CONF=$dir/slurm.conf
for _ in $(seq 1 60); do
  idle=$(on_host 1 sinfo -h -N -t idle -o "%N" 2>/dev/null | wc -l)
  [ "$idle" -ge "$nodes" ] && break
  sleep 0.5
done
[ "$idle" -ge "$nodes" ] || { echo "cluster.sh: only $idle of $nodes nodes came up; see $dir/log" >&2; on_host 1 sinfo -N >&2 || true; exit 1; }
echo "export SLURM_CONF=$dir/slurm.conf"
