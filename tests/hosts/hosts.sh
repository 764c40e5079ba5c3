#!/usr/bin/env bash
# Hosts in a box (issue 64): N emulated hosts on this machine, each a set of
# namespaces of its own (network, UTS, IPC, mount: its own hostname, address,
# /dev/shm and /etc/hosts), joined by a switch (a bridge in a namespace of its
# own) on a private range that exists only inside these namespaces. Open MPI's
# daemons start on them through hosts-ssh (a stand-in for ssh), so a job spans
# them as it spans a cluster's nodes, and a host can die whole (its processes
# and its daemon at once), lose power (its link first: no FIN, no RST), lose its
# link with its processes alive, or be cut off in a partition.
#
#   hosts.sh up DIR N          start N hosts (host1..hostN, 10.231.0.11..); state and logs in DIR
#   hosts.sh exec DIR H CMD..  run CMD on host H (a number)
#   hosts.sh ps DIR H          the live processes on host H (pid, name, command line)
#   hosts.sh kill DIR H        host H dies whole: every process on it, its daemon too
#   hosts.sh power DIR H       host H loses power: its link goes first, then every process
#   hosts.sh cut DIR H         host H's link goes down; its processes live on
#   hosts.sh heal DIR H        host H's link comes back
#   hosts.sh link DIR H MS P   host H's link delays frames MS ms each way, drops each with probability P
#                              (HOSTS_RELAY=H,... at up: those hosts' links go through tests/hosts/link_relay.py)
#   hosts.sh partition DIR A|B  only hosts of one group reach each other (e.g. "1,2|3,4")
#   hosts.sh join DIR          the partition heals
#   hosts.sh down DIR          remove everything it made
#
# Every command ends by itself; `down` is safe to run twice. Needs root (namespaces, a bridge).
set -euo pipefail

cmd=${1:?usage: hosts.sh up|exec|kill|power|cut|heal|partition|down DIR ...}
dir=${2:?the harness directory}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
subnet=10.231.0
switch_ns() { cat "$dir/switch.ns"; }
holder() { cat "$dir/host$1.pid"; }
# The host's temporary directory: Open MPI's and PMIx's session directories and sockets are named after the host
# name, and every harness has a host1; a directory per harness keeps harnesses side by side apart.
tmp_of() { echo "/tmp/$(switch_ns).h$1"; }
enter() {  # host command...: in every namespace of the host
  local h=$1
  shift
  # The caller's directory: a cluster's shared file system.
  nsenter -t "$(holder "$h")" -n -u -i -m --wd="$PWD" -- env TMPDIR="$(tmp_of "$h")" "$@"
}
# Every process on host H but its namespace holder: those whose UTS namespace is the holder's.
processes_of() {
  local h=$1 ns pid
  ns=$(readlink "/proc/$(holder "$h")/ns/uts")
  for pid in /proc/[0-9]*; do
    pid=${pid#/proc/}
    [ "$pid" = "$(holder "$h")" ] && continue
    [ "$(readlink "/proc/$pid/ns/uts" 2>/dev/null)" = "$ns" ] && echo "$pid"
  done
  return 0
}
kill_all_on() {
  local h=$1 pids
  pids=$(processes_of "$h")
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
}
link_of() { echo "kh$1"; }  # the host's port on the switch

case $cmd in
  up)
    n=${3:?how many hosts}
    mkdir -p "$dir"
    [ ! -f "$dir/switch.ns" ] || { echo "hosts.sh: $dir already holds hosts; run down first" >&2; exit 1; }
    sw=kiln-sw-$$
    ip netns add "$sw"
    echo "$sw" >"$dir/switch.ns"
    ip -n "$sw" link add br0 type bridge
    ip -n "$sw" link set br0 up
    : >"$dir/hosts"
    echo "127.0.0.1 localhost" >>"$dir/hosts"
    for h in $(seq 1 "$n"); do echo "$subnet.$((10 + h)) host$h" >>"$dir/hosts"; done
    # HOSTS_OWN_TMP=1: each host a /tmp of its own, as a cluster's nodes have (Slurm's PMIx plugin makes the same
    # directory names there on every node); the harness's users then keep what hosts share out of /tmp.
    own_tmp=""
    [ "${HOSTS_OWN_TMP:-0}" = 0 ] || own_tmp="mount -t tmpfs -o size=1g tmpfs /tmp;"
    for h in $(seq 1 "$n"); do
      # The holder keeps the namespaces alive; its own /dev/shm and /etc/hosts live in its mount namespace.
      unshare --net --uts --ipc --mount --propagation private sh -c \
        "hostname host$h; mount -t tmpfs -o size=2g tmpfs /dev/shm; mount --bind '$dir/hosts' /etc/hosts; $own_tmp \
         mkdir -p /tmp/$sw.h$h; \
         exec sleep infinity" &
      echo $! >"$dir/host$h.pid"
    done
    sleep 0.3
    for h in $(seq 1 "$n"); do
      pid=$(holder "$h")
      if [[ ",${HOSTS_RELAY:-}," == *,$h,* ]]; then
        # A link through a user-space relay (delay and loss: hosts.sh link), two tap devices it holds. At a high
        # priority: a wire does not slow down when the CPUs are busy, and the relay starved beside other tests
        # (a run stalled for 110 s at step 2; at 60 s Open MPI's detector called healthy ranks behind it dead).
        echo "0 0" >"$dir/host$h.link"
        setsid nice -n -15 python3 "$here/link_relay.py" "$pid" "$sw" "$(link_of "$h")" "$dir/host$h.link" \
          >"$dir/host$h.relay.log" 2>&1 </dev/null &
        echo $! >"$dir/host$h.relay"
        for _ in $(seq 50); do grep -qs ready "$dir/host$h.relay.log" && break; sleep 0.1; done
        grep -q ready "$dir/host$h.relay.log" || { cat "$dir/host$h.relay.log" >&2; echo "hosts.sh: host$h's relay did not start" >&2; exit 1; }
      else
        # Made inside the switch's namespace, never in the root one: harnesses side by side (a campaign beside
        # the test suite) reuse the same names without meeting.
        ip -n "$sw" link add "$(link_of "$h")" type veth peer name eth0 netns "/proc/$pid/ns/net"
      fi
      ip -n "$sw" link set "$(link_of "$h")" master br0 up
      nsenter -t "$pid" -n ip addr add "$subnet.$((10 + h))/24" dev eth0
      nsenter -t "$pid" -n ip link set eth0 up
      nsenter -t "$pid" -n ip link set lo up
    done
    echo "$n" >"$dir/count"
    echo "hosts.sh: $n hosts up (host1..host$n on $subnet.0/24)"
    ;;
  exec)
    h=${3:?which host}
    shift 3
    enter "$h" "$@"
    ;;
  ps)
    # The live processes on host H (pid, name and the start of its command line: which kiln command a leftover
    # was), its namespace holder left out.
    for pid in $(processes_of "${3:?which host}"); do
      state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) || continue
      [ "$state" = Z ] || echo "$pid $(cat "/proc/$pid/comm" 2>/dev/null) $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-160)"
    done
    ;;
  kill)
    kill_all_on "${3:?which host}"
    ;;
  power)
    h=${3:?which host}
    touch "$dir/host$h.dark"  # hosts-ssh: its sessions give no sign, as ssh over a dead link
    ip -n "$(switch_ns)" link set "$(link_of "$h")" down
    kill_all_on "$h"
    ;;
  cut)
    h=${3:?which host}
    touch "$dir/host$h.dark"
    ip -n "$(switch_ns)" link set "$(link_of "$h")" down
    ;;
  link)
    # link DIR H DELAY_MS LOSS: host H's link (a relay: HOSTS_RELAY at up) delays every frame DELAY_MS
    # milliseconds each way and drops each with probability LOSS (0.05: 5 %).
    h=${3:?which host}
    [ -f "$dir/host$h.relay" ] || { echo "hosts.sh: host$h's link is no relay (start with HOSTS_RELAY=$h)" >&2; exit 1; }
    echo "${4:?delay in ms} ${5:?loss probability}" >"$dir/host$h.link.new" && mv "$dir/host$h.link.new" "$dir/host$h.link"
    ;;
  heal)
    h=${3:?which host}
    ip -n "$(switch_ns)" link set "$(link_of "$h")" up
    rm -f "$dir/host$h.dark"
    ;;
  partition)
    groups=${3:?groups, e.g. 1,2|3,4}
    # A bridge port isolated from the ports of other groups: each group gets a bridge of its own.
    sw=$(switch_ns)
    g=0
    IFS='|' read -ra parts <<<"$groups"
    for part in "${parts[@]}"; do
      g=$((g + 1))
      ip -n "$sw" link add "br$g" type bridge 2>/dev/null || true
      ip -n "$sw" link set "br$g" up
      IFS=',' read -ra members <<<"$part"
      for h in "${members[@]}"; do
        ip -n "$sw" link set "$(link_of "$h")" master "br$g"
        # hosts-ssh runs on host1 (the launcher's): the hosts cut off from it give it no sign.
        [[ ",$part," == *,1,* ]] || touch "$dir/host$h.dark"
      done
    done
    ;;
  join)
    # The partition heals: every host on the one switch again.
    sw=$(switch_ns)
    for f in "$dir"/host*.pid; do
      h=$(basename "$f" .pid)
      ip -n "$sw" link set "$(link_of "${h#host}")" master br0
    done
    rm -f "$dir"/host*.dark
    ;;
  down)
    [ -d "$dir" ] || exit 0
    for f in "$dir"/host*.pid; do
      [ -f "$f" ] || continue
      h=$(basename "$f" .pid)
      h=${h#host}
      kill_all_on "$h"
      kill -KILL "$(cat "$f")" 2>/dev/null || true
      [ ! -f "$dir/host$h.relay" ] || kill -KILL "$(cat "$dir/host$h.relay")" 2>/dev/null || true
      rm -f "$f" "$dir/host$h.relay" "$dir/host$h.link"
    done
    if [ -f "$dir/switch.ns" ]; then
      rm -rf "/tmp/$(switch_ns).h"*
      ip netns del "$(switch_ns)" 2>/dev/null || true
    fi
    rm -f "$dir/switch.ns" "$dir/count" "$dir"/host*.dark
    ;;
  *)
    echo "hosts.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac
