#!/usr/bin/env bash
# Issue 64: kiln on emulated hosts (tests/hosts/hosts.sh), a host per node as on a cluster: HOSTS hosts (default 3)
# of RANKS_PER_HOST ranks (default 2), nodes grouped by host name (cluster.ranks_per_node = 0), fault.f = 1,
# launched through kiln-mpirun with KILN_END_RECORD as the jobscript does. Faults (FAULTS, default: kill power
# cut): kill (VICTIM dies whole), power (its link, then its processes), cut (its link; its processes live),
# outage (its link down for OUTAGE_S seconds, default 12, then back), lossy (its link LINK_DELAY_MS, default 50,
# slower each way and losing LINK_LOSS, default 0.05, of its frames for the whole run: nothing may be declared
# failed, the first launch must end 0 with no /failures row), split=GROUPS (a partition, e.g.
# split=1,2|3,4; host1's group is the launcher's side; split alone takes SPLIT). Pass criterion for each fault:
#   - the job never ends silently and never hangs: the first launch exits 0 with every step done, or 75;
#   - a host killed whole is recovered inside the job (exit 0): kiln-mpirun starts the daemons through kiln
#     launch-relay (KILN_SSH_AGENT: the harness's hosts-ssh behind it), which keeps the loss from Open MPI's runtime;
#     a host gone silent (power, cut) is recovered inside it too once Open MPI's detector has declared its ranks
#     failed (its verdict broadcast to every rank), or requeued when the step's deadline comes first (the CI test
#     requires exit 0, with ranks round-robin over the hosts: each watched from another host);
#   - a partition whose every side is a minority: each side stands down, writing nothing, and kiln-mpirun ends the
#     launch (75, its LAUNCHER line says why) once no side has claimed the quorum in the time the sides gave it;
#   - after 75, a relaunch on the hosts left (as the requeue excludes the lost ones) resumes and ends with 0;
#   - the steps' losses equal the failure-free run's, step for step (1e-5), and diag.h5 records the failure;
#   - at most one quorum witness per recovery names a side (no split brain), and no process is left on any
#     host; the harness leaves nothing behind.
# VICTIM (2..HOSTS, default the last) is the host that fails, AT_STEP (default 6) the step after which it fails;
# tests/hosts/campaign.sh draws them. Each line "HOSTFAULT kind=... host=... step=... causes=... recovered_after_s=...
# first_exit=... ended_after_s=... resumed=... steps_redone=... requeue_s=... exit=..." is a figure for perf/RESULTS.md
# (recovered_after_s: from the fault to the end of the first recovery inside the job; steps_redone: steps the first
# launch had logged that the requeue trained again; requeue_s: the requeued launch's time). REFERENCE (a campaign's): the directory
# of a failure-free run on the same hosts, used instead of running one. MPIRUN_EXTRA: more mpirun flags (e.g.
# "--map-by node": ranks round-robin over the hosts, so that Open MPI's detector ring crosses hosts). STEP_TIMEOUT_S:
# fault.step_timeout_s (default 15 s; the deadline for a silent peer adds twice the heartbeat's timeout).
set -uo pipefail
kiln=$1 launcher=$2 data=$3 work=$4
faults=${FAULTS-kill power cut}  # set and empty: the failure-free run alone (a campaign's reference)
count=${HOSTS:-3} per=${RANKS_PER_HOST:-2}
victim=${VICTIM:-$count}  # the host that fails (host1 runs mpirun: a job whose launch host dies is the scheduler's)
at=${AT_STEP:-6}          # it fails once this step is in the log
split=${SPLIT:-}
((victim >= 2 && victim <= count)) || { echo "FAIL: VICTIM=$victim: a host of 2..$count"; exit 1; }
hostlist() { local h out=""; for h in "$@"; do out+="${out:+,}host$h:$per"; done; echo "$out"; }
everyone=$(hostlist $(seq 1 "$count"))
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
hosts=$work/hosts
rm -rf "$work"
mkdir -p "$work"
name=""  # the case under way
fail() {
  echo "FAIL: $*"
  # CI shows a failed test's output cut in the middle: the case's decisions come first, short.
  local log
  for log in "$work/$name.log" "$work/$name-requeue.log"; do
    [ -n "$name" ] && [ -f "$log" ] || continue
    echo "--- $log: kiln's and the launcher's decisions"
    grep -aE "^kiln|FAILURE|LAUNCH_LOST|TEARDOWN|error|warn|exit 75|stands down|deadline|quorum" "$log" | cut -c1-400 | tail -30
  done
  [ -z "$name" ] || [ ! -f "$work/$name/tiny/diag.h5" ] || "$kiln" diag "$work/$name/tiny/diag.h5" --json 2>/dev/null |
    python3 -c 'import json, sys; [print("row:", r) for r in json.load(sys.stdin).get("failures", [])]' 2>/dev/null | cut -c1-400
  bash "$here/hosts.sh" down "$hosts"
  exit 1
}
trap 'bash "$here/hosts.sh" down "$hosts" >/dev/null 2>&1' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
steps=16
# cluster.waits=sleep: every emulated host counts the machine's cores as its own, but they share them.
# Open MPI's heartbeats at 10 s, not 5: with two emulated-host tests and a build beside it on 2 cores, a rank of a
# 4-host failure-free run was declared failed at step 1 at 5 s (a false detection; the partition never came).
deck=(input/tiny-cpu.ini --set data.dir="$data" --set data.mix=licenses:1 --set data.tokenizer=bytes
      --set cluster.ranks_per_node=0 --set cluster.waits=sleep --set plan.pipelines= --set fault.f=1 --set train.grad_clip=0 --set run.steps=$steps
      --set checkpoint.every=4 --set fault.hang_timeout_s=${HANG_TIMEOUT_S:-10} --set fault.step_timeout_s=${STEP_TIMEOUT_S:-15}
      --set fault.inject=$(for r in $(seq 0 $((count * per - 1))); do printf '%s' "${r:+$r:1-100:slow=0.03,}"; done))
# Every rank alike 30 ms slower a microbatch (no straggler): steps long enough for a host to die inside one.
# job NAME HOSTLIST [settings...]: kiln-mpirun on host1 over the hosts in HOSTLIST ("host1:2,host2:2,...").
job() {
  local name=$1 list=$2 ranks
  shift 2
  ranks=$(( $(tr ',' '\n' <<<"$list" | wc -l) * per ))
  KILN_END_RECORD=$work/$name.end KILN_LAUNCHER_GRACE_S=10 \
    timeout 400 bash "$here/hosts.sh" exec "$hosts" 1 env KILN_HOSTS_DIR="$hosts" PATH="$PATH" \
    KILN_END_RECORD="$work/$name.end" KILN_LAUNCHER_GRACE_S=10 KILN_SSH_AGENT="$here/hosts-ssh" \
    KILN_MPIRUN_ARGS="--host $list ${MPIRUN_EXTRA:-}" \
    "$launcher" -n "$ranks" "$kiln" run "${deck[@]}" --set run.out_dir="$work/$name" "$@"
}
losses() { "$kiln" diag "$work/$1/tiny/diag.h5" --losses; }
same_losses() {  # reference candidate
  paste <(losses "$1") <(losses "$2") | awk -v steps=$steps '
    { n++; d = $2 - $5; if (d < 0) d = -d; if (d > 1e-5 * $2 || $1 != $4) { bad++; print "step " $1 ": " $2 " vs " $5 } }
    END { if (n != steps || bad) { print "losses differ (" n " of " steps " steps)"; exit 1 } }'
}
tokps() {  # the median tokens/s of a run's step lines ("5.0k tok/s"), "-" without them
  grep -a "^step " "$1" 2>/dev/null | awk '{ for (i = 2; i <= NF; i++) if ($i == "tok/s") { v = $(i - 1); m = 1
    if (v ~ /k$/) m = 1000; if (v ~ /M$/) m = 1e6; sub(/[kM]$/, "", v); print v * m } }' | sort -n |
    awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "-" }'
}
leftovers() {  # kiln and Open MPI processes still on an emulated host, one line each ("" when none)
  local h
  for h in $(seq 1 "$count"); do
    bash "$here/hosts.sh" ps "$hosts" "$h" | awk -v h="$h" '$2 ~ /^(kiln|prted|prterun|mpirun)$/ { print "host" h ": " $0 }'
  done
}

describe_stall() {  # what a run that stopped progressing was doing, into $1: each host's processes and TCP
  # sockets (queues, retransmissions), and with gdb each kiln rank's threads (a stall is diagnosed from its run)
  local out=$1 h pid
  {
    for h in $(seq 1 "$count"); do
      echo "=== host$h"
      bash "$here/hosts.sh" exec "$hosts" "$h" ss -tino 2>&1 | head -60
      bash "$here/hosts.sh" ps "$hosts" "$h" | while read -r pid name _; do
        echo "--- $name pid $pid state $(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)"
        if [ "$name" = kiln ] && command -v gdb >/dev/null; then
          timeout 60 gdb -p "$pid" -batch -ex "thread apply all bt 12" 2>/dev/null | grep -E '^(Thread|#)'
        fi
      done
    done
  } >"$out" 2>&1
}

relay=""
[[ " $faults " != *" lossy "* ]] || relay=$victim  # its link through a user-space relay (delay and loss)
HOSTS_RELAY=$relay bash "$here/hosts.sh" up "$hosts" "$count" || fail "the emulated hosts did not start"
if [ -n "${REFERENCE:-}" ] && [ -f "$REFERENCE/tiny/diag.h5" ]; then
  # A campaign's runs share one failure-free run of the same hosts.
  ln -s "$REFERENCE" "$work/clean"
  echo "PASS: the failure-free run of $REFERENCE is the reference"
else
  # Through the user-space relay even the failure-free run's link can stall for seconds on a busy machine (a
  # Python process between two taps): the lossy case's hang timeout for it too (seen at 5 s: a rank of host3
  # declared failed in MPI_Init's communicators).
  clean_extra=()
  [ -z "$relay" ] || clean_extra=(--set fault.hang_timeout_s="${LOSSY_HANG_TIMEOUT_S:-60}")
  job clean "$everyone" "${clean_extra[@]}" >"$work/clean.log" 2>&1
  status=$?
  [ "$status" = 0 ] || { tail -40 "$work/clean.log"; fail "the failure-free run on $count hosts exited $status"; }
  grep -q "node $((count - 1)) .*host$count" "$work/clean.log" ||
    { grep -A4 "ranks " "$work/clean.log"; fail "kiln did not see $count hosts as $count nodes"; }
  echo "PASS: the failure-free run spans $count hosts as $count nodes"
fi

for fault in $faults; do
  kind=${fault%%=*} name=${fault%%=*}
  # split=GROUPS names its partition in FAULTS itself: "split=1,2|3,4 split=1,2,3|4".
  if [ "$kind" = split ] && [ "$fault" != split ]; then split=${fault#*=} name=split-$(tr ',|' '-_' <<<"$split"); fi
  # lossy: the victim's link slow and lossy from the start (nothing fails: a straggler, not a failure).
  [ "$kind" != lossy ] || bash "$here/hosts.sh" link "$hosts" "$victim" "${LINK_DELAY_MS:-50}" "${LINK_LOSS:-0.05}"
  # A lossy link stalls a TCP connection for seconds behind its lost segments, heartbeats with it (measured:
  # Open MPI's detector then calls healthy ranks dead at 5 s and 15 s): the case runs at the default 60 s.
  extra=()
  [ "$kind" != lossy ] || extra=(--set fault.hang_timeout_s="${LOSSY_HANG_TIMEOUT_S:-60}")
  job "$name" "$everyone" "${extra[@]}" >"$work/$name.log" 2>&1 &
  launched=$!
  for _ in $(seq 600); do
    grep -qE "^step +$at/" "$work/$name.log" 2>/dev/null && break
    kill -0 "$launched" 2>/dev/null || break
    sleep 0.2
  done
  if ! grep -qE "^step +$at/" "$work/$name.log"; then
    tail -30 "$work/$name.log"
    describe_stall "$work/$name.stall"
    grep -E "^(===|---)|retrans|Thread .* in |#[0-9]+ +.* in (kiln::|mca_|ompi_|poll|epoll|select)" "$work/$name.stall" | head -120
    fail "$kind: the run never reached step $at (its processes and sockets: $work/$name.stall)"
  fi
  struck=$(date +%s.%N)
  # The hosts the fault takes away from the launcher's side, and so from a requeue.
  case $kind in
    split)
      [ -n "$split" ] || fail "split needs SPLIT, e.g. 1,2|3,4"
      bash "$here/hosts.sh" partition "$hosts" "$split"
      lost=$(tr '|' '\n' <<<"$split" | grep -v -E '(^|,)1(,|$)' | tr ',\n' '  ' | xargs)
      ;;
    lossy) lost="" ;;
    outage)
      bash "$here/hosts.sh" cut "$hosts" "$victim"
      ( sleep "${OUTAGE_S:-12}"; bash "$here/hosts.sh" heal "$hosts" "$victim" ) &
      lost=$victim
      ;;
    *)
      bash "$here/hosts.sh" "$kind" "$hosts" "$victim"
      lost=$victim
      ;;
  esac
  # The job's log reaches this script late, and a fault takes a moment to apply (a host's processes are found in
  # /proc): one meant for a step near the end can find the run done, its end record written by the time the
  # fault is in place. Then nothing failed in it; the case says so (late=yes) and judges only that it ended well.
  late=no
  [ ! -f "$work/$name.end" ] || late=yes
  left=$(hostlist $(seq 1 "$count" | grep -v -x -E "$(tr ' ' '|' <<<"$lost")"))
  wait "$launched"
  first=$?
  ended=$(date +%s.%N)
  wait  # an outage's healing
  [ "$kind" != lossy ] || bash "$here/hosts.sh" link "$hosts" "$victim" 0 0
  # What the cut host still runs is ended, and every host is back for the next case (the same processes'
  # namespaces: a host that was powered off boots again).
  bash "$here/hosts.sh" join "$hosts"
  for h in $lost; do bash "$here/hosts.sh" kill "$hosts" "$h"; bash "$here/hosts.sh" heal "$hosts" "$h"; done
  case $first in
    0)
      # A host that dies whole is a failure recovered inside the job (issue 64, item 2): the daemon's link to
      # mpirun goes through kiln launch-relay, which keeps the loss from Open MPI's runtime.
      [ "$kind" != kill ] || [ "$late" = yes ] || grep -q "kiln launch-relay: host$victim: its daemon's link to mpirun ended" "$work/$name.log" ||
        fail "kill: recovered, but the relay never said it kept host$victim's loss from the runtime"
      # Counted in diag.h5, not in the log: a side cut off from the launcher that went on (it held the quorum)
      # trained where the launcher could not hear it.
      [ "$(losses "$name" | wc -l)" = "$steps" ] || fail "$kind: exit 0 without $steps steps in diag.h5: a silent end"
      resumed=no redone=0 requeue_s=0
      ;;
    75)
      grep -q "exit 75" "$work/$name.log" || fail "$kind: exit 75 with no word of why"
      grep -a "^kiln-mpirun: " "$work/$name.log" | cut -c1-300 | sed 's/^/LAUNCHER /'
      [ "$kind" != kill ] || [ "${KILN_HOST_RELAY:-1}" = 0 ] ||
        fail "kill: a host lost whole ended the launch (75): the job was to recover inside it"
      # The requeue: the hosts left, the same end record (the lost launch recorded by the new attempt).
      requeued_at=$(date +%s.%N)
      job "$name" "$left" >"$work/$name-requeue.log" 2>&1
      status=$?
      requeue_s=$(awk -v a="$requeued_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
      # Steps trained before the fault that the requeue trained again: the last logged one past the checkpoint.
      last=$(grep -aoE "^step +[0-9]+/" "$work/$name.log" | tail -1 | grep -oE "[0-9]+")
      from=$(grep -aoE "resumed from .* at step [0-9]+" "$work/$name-requeue.log" | grep -oE "[0-9]+$")
      redone=$(( ${last:-0} - ${from:-0} ))
      [ "$status" = 0 ] || { tail -40 "$work/$name-requeue.log"; fail "$kind: the requeued attempt exited $status"; }
      resumed=yes
      ;;
    *)
      tail -40 "$work/$name.log"
      fail "$kind: the launch exited $first: neither done (0) nor a requeue (75)"
      ;;
  esac
  same_losses clean "$name" || fail "$kind: the losses are not the failure-free run's"
  # The run's history has the failure: recovered inside the job (cause process), or the requeued attempt's row
  # for the launch lost or the job kiln ended at a deadline.
  causes=$("$kiln" diag "$work/$name/tiny/diag.h5" --json | python3 -c '
import json, sys
print(" ".join(sorted({r.get("cause", "") for r in json.load(sys.stdin).get("failures", [])})))')
  # From the fault to the end of the first recovery inside the job (its row's time; "-": none): detection, the
  # agreement and the recovery itself.
  recovered_after_s=$("$kiln" diag "$work/$name/tiny/diag.h5" --json | python3 -c '
import json, sys
t = [r["time"] for r in json.load(sys.stdin).get("failures", []) if r.get("cause") == "process"]
print("%.1f" % (min(t) - float(sys.argv[1])) if t else "-")' "$struck")
  if [ "$late" = yes ]; then
    [ "$first:$causes" = "0:" ] || fail "$kind: struck after the run ended, yet exit $first, causes '$causes'"
  elif [ "$kind" = lossy ]; then
    [ "$first:$causes" = "0:" ] || fail "lossy: a slow, lossy link was taken for a failure (exit $first, causes '$causes')"
  else
    case "$first:$causes" in
      0:*process* | 75:*launch* | 75:*deadline*) ;;
      *) fail "$kind: diag.h5 has no failure row for it (exit $first, causes '$causes')" ;;
    esac
  fi
  # No collateral: every rank a row calls failed is on the hosts the fault cut away, or (a partition) every such
  # rank is on one side of it, the side that did not go on. A rank's host is the one kiln's start-up table names
  # ("node N  hostH  ranks a,b": MPIRUN_EXTRA may place ranks round-robin), else host order, RANKS_PER_HOST each.
  sides=${split:-1}
  [ "$kind" = split ] || sides="$(seq -s, 1 "$count" | sed -E "s/(^|,)$victim(,|$)/\1\2/; s/,,/,/; s/^,|,$//g")|$victim"
  "$kiln" diag "$work/$name/tiny/diag.h5" --json | python3 -c '
import json, re, sys
per, sides = int(sys.argv[1]), [set(map(int, g.split(","))) for g in sys.argv[2].split("|")]
host_of = {}
for line in open(sys.argv[3], errors="replace"):
    m = re.match(r"\s+node \d+\s+host(\d+)\s+ranks ([\d,]+)\s*$", line)
    if m:
        host_of.update({int(r): int(m.group(1)) for r in m.group(2).split(",")})
failed = set()
for row in json.load(sys.stdin).get("failures", []):
    if row.get("cause") == "process" and row.get("failed_ranks"):
        failed |= {int(r) for r in row["failed_ranks"].split(",")}
hosts = {host_of.get(r, r // per + 1) for r in failed}
# The victims: all of one side (the hosts a fault took away), nothing of another.
if failed and not any(hosts == side for side in sides):
    sys.exit(f"ranks {sorted(failed)} on hosts {sorted(hosts)} recorded as failed; the sides were {sys.argv[2]}")' \
    "$per" "$sides" "$work/$name.log" || fail "$kind: a healthy rank was recorded as failed (collateral)"
  # No split brain: every recovery's witness names one side, and no two witnesses name disjoint sides of the
  # same epoch (the file system keeps one per epoch; a second would have to be another name).
  witnesses=$(ls "$work/$name/tiny"/quorum-* 2>/dev/null | wc -l)
  remaining=$(leftovers)
  [ -z "$remaining" ] || fail "$kind: processes left on the hosts after the job: $remaining"
  speed=""
  [ "$kind" != lossy ] || speed=" link=${LINK_DELAY_MS:-50}ms,${LINK_LOSS:-0.05} tokps=$(tokps "$work/$name.log") clean_tokps=$(tokps "$work/clean.log")"
  echo "HOSTFAULT kind=$name host=${lost// /+}${speed} step=$at hosts=${count}x$per witnesses=$witnesses causes=${causes// /,} recovered_after_s=$recovered_after_s first_exit=$first ended_after_s=$(awk -v a="$struck" -v b="$ended" 'BEGIN { printf "%.1f", b - a }') resumed=$resumed late=$late steps_redone=$redone requeue_s=$requeue_s exit=0"
  [ "$kind" != lossy ] || { echo "PASS: lossy: host$victim's link ${LINK_DELAY_MS:-50} ms slower each way, losing ${LINK_LOSS:-0.05} of its frames, the whole run: first launch exit 0, no failure recorded, failure-free losses,$speed"; continue; }
  echo "PASS: $name: host ${lost// /+} lost at step $at; first launch exit $first$([ "$resumed" = yes ] && echo ", requeued onto the other hosts and resumed"), failure-free losses"
done
switch=$(cat "$hosts/switch.ns")
bash "$here/hosts.sh" down "$hosts"
# Its own switch only: other harnesses (a campaign, the other host test) may run beside it.
! ip netns list | grep -qw "$switch" || fail "the harness left its switch namespace $switch behind"
echo "PASS: the harness removed everything it made"
