#!/usr/bin/env bash
# A host lost whole, recovered inside the job or requeued, and what kiln's launch relay costs (issue 64, item 2),
# on 3 emulated hosts of 2 ranks (tests/hosts/hosts.sh: needs root), in the same run:
#
# 1. Throughput of the failure-free run (6 blocks, d_model 256, 40 steps, nodes by host name) under Open MPI's own
#    launch with the TCP transport's put (KILN_HOST_RELAY=0, btl_tcp_flags Open MPI's default) against kiln-mpirun's
#    (daemons through kiln launch-relay, no put), and the relay with put, alternated, REPEATS (default 3) each: the
#    median step seconds (diag.h5) and the launch's wall seconds.
# 2. host3 killed whole after step 6 (tests/hosts/host_faults.sh, FAULTS=kill, its pass criteria), with the relay and
#    without: the first launch's exit, seconds from the fault to its end, the requeued launch's seconds.
#
# Prints one JSON object per measurement.
#
#   ./bootstrap.sh build && perf/bench_host_relay.sh
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
bench_workdir_with_licenses perf-host-relay
hosts=$work/hosts
trap 'bash tests/hosts/hosts.sh down "$hosts" >/dev/null 2>&1' EXIT
bash tests/hosts/hosts.sh up "$hosts" 3 >/dev/null
deck=(input/tiny-cpu.ini --set data.dir="$work/data" --set data.mix=licenses:1 --set data.tokenizer=bytes
      --set cluster.ranks_per_node=0 --set cluster.waits=sleep --set plan.pipelines= --set fault.f=1 --set run.steps=40
      --set model.blocks=6 --set model.d_model=256 --set model.heads=4 --set checkpoint.every=0 --set checkpoint.resume=false)
run() {  # run NAME RELAY FLAGS: one failure-free launch on the 3 hosts
  local name=$1 relay=$2 flags=$3 start end
  start=$(date +%s.%N)
  bash tests/hosts/hosts.sh exec "$hosts" 1 env KILN_HOSTS_DIR="$hosts" PATH="$PATH" KILN_HOST_RELAY="$relay" \
    KILN_SSH_AGENT="$root/tests/hosts/hosts-ssh" OMPI_MCA_btl_tcp_flags="$flags" \
    KILN_MPIRUN_ARGS="--host host1:2,host2:2,host3:2" \
    timeout 600 "$build/kiln-mpirun" -n 6 "$kiln" run "${deck[@]}" --set run.out_dir="$work/$name" >"$work/$name.log" 2>&1
  end=$(date +%s.%N)
  local step
  step=$("$kiln" diag "$work/$name/tiny/diag.h5" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["median_step_s"])')
  printf '{"bench":"host_relay_throughput","run":"%s","relay":%s,"btl_tcp_flags":"%s","median_step_s":%.5f,"launch_wall_s":%.2f}\n' \
    "$name" "$relay" "$flags" "$step" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')"
}
repeats=${REPEATS:-3}
put=send,put,inplace,need-ack,need-csum,hetero-rdma noput=send,inplace,need-ack,need-csum
for i in $(seq 1 "$repeats"); do
  run "openmpi-$i" 0 "$put"
  run "relay-put-$i" 1 "$put"  # the relay alone
  run "kiln-$i" 1 "$noput"
done
bash tests/hosts/hosts.sh down "$hosts" >/dev/null
for relay in 1 0; do
  line=$(KILN_HOST_RELAY=$relay FAULTS=kill bash tests/hosts/host_faults.sh "$kiln" "$build/kiln-mpirun" "$work/data" \
         "$work/kill-relay-$relay" 2>&1 | tee "$work/kill-relay-$relay.log" | grep -m1 "^HOSTFAULT" || true)
  [ -n "$line" ] || { tail -20 "$work/kill-relay-$relay.log"; echo "bench_host_relay: the kill case failed (relay $relay)" >&2; exit 1; }
  python3 - "$relay" "$line" <<'PY'
import json, sys
fields = dict(kv.split("=", 1) for kv in sys.argv[2].split()[1:])
print(json.dumps({"bench": "host_relay_kill", "relay": int(sys.argv[1]), "first_exit": int(fields["first_exit"]),
                  "ended_after_s": float(fields["ended_after_s"]), "requeue_s": float(fields["requeue_s"]),
                  "steps_redone": int(fields["steps_redone"]), "causes": fields["causes"]}))
PY
done
