#!/usr/bin/env bash
# A launch is not stopped by what an earlier, killed launch left behind. Open MPI keeps its runtime's session
# directory (PMIx rendezvous files) in $TMPDIR/ompi.<mpirun's PID>; a killed mpirun leaves it, and a later mpirun
# that draws the same PID fails at once ("The PMIx server's listener thread failed to start"). kiln-mpirun gives
# each launch a session directory of its own and removes it however mpirun ended. Pass criterion, all in a private
# TMPDIR (the stale directories planted here must not reach other tests' launches):
#  1. Stale session directories planted for the next PIDs stop a plain mpirun (the plant reaches it: the test can
#     fail).
#  2. With the same plant, kiln-mpirun launches and exits 0, and leaves no directory of its own behind.
#  3. kiln-mpirun ended by SIGTERM (as Slurm ends a job) forwards it, ends, and leaves nothing behind.
#  4. Under the jobscript's supervision (KILN_END_RECORD), a launch without kiln's end record exits 75 and leaves
#     nothing behind.
#  5. With a session directory base set in the environment (as the test suite sets one) and the plant in it,
#     kiln-mpirun launches inside a directory of its own there, exits 0 and leaves nothing behind.
set -uo pipefail
mpirun=$1 launcher=$2 work=$3
rm -rf "$work"
mkdir -p "$work/tmp"
export TMPDIR=$work/tmp
unset PRTE_MCA_prte_tmpdir_base  # Open MPI's default place, in the private TMPDIR: where the stale directories are planted
fail() { echo "FAIL: $*"; ls -la "$TMPDIR"; exit 1; }
plant() {  # [DIR]: stale session directories, as a killed mpirun leaves them, for the next 400 PIDs (in $TMPDIR)
  python3 - "${1:-$TMPDIR}" "$(hostname)" <<'PY'
import os, sys
tmp, host = sys.argv[1], sys.argv[2]
top = int(open("/proc/sys/kernel/pid_max").read())
last = int(open("/proc/sys/kernel/ns_last_pid").read())
for k in range(1, 401):
    pid = (last + k) % top
    d = os.path.join(tmp, f"ompi.{pid}")
    os.makedirs(d, mode=0o700, exist_ok=True)
    for name in (f"pmix.{host}.tool", f"pmix.{host}.tool.{pid}", f"pmix.{host}.tool.prterun-{host}-{pid}@0"):
        with open(os.path.join(d, name), "w") as f:
            f.write("stale\n")
PY
}
own_dirs() { find "$TMPDIR" -maxdepth 1 -name 'kiln-mpirun.*' | wc -l; }

plant
timeout -k 10 60 "$mpirun" -n 1 true >"$work/plain.log" 2>&1 && fail "a plain mpirun started in spite of the planted session directories: the plant missed its PID"
grep -q "listener thread failed to start" "$work/plain.log" || { cat "$work/plain.log"; fail "a plain mpirun failed otherwise"; }
echo "PASS 1: a stale session directory for its PID stops a plain mpirun"

plant
timeout -k 10 60 "$launcher" -n 1 true >"$work/launcher.log" 2>&1 || { cat "$work/launcher.log"; fail "kiln-mpirun did not start over the planted session directories"; }
[ "$(own_dirs)" = 0 ] || fail "kiln-mpirun left its session directory"
echo "PASS 2: kiln-mpirun starts over the same plant and leaves nothing behind"

timeout -k 10 60 "$launcher" -n 1 sleep 50 >"$work/term.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do [ "$(own_dirs)" = 1 ] && pgrep -f "sleep 50" >/dev/null && break; sleep 0.1; done
kill -TERM "$pid"
started=$SECONDS
wait "$pid"
status=$?
((SECONDS - started < 30)) || fail "kiln-mpirun took $((SECONDS - started)) s to end after SIGTERM"
[ "$status" != 0 ] || fail "kiln-mpirun ended by SIGTERM exited 0"
# mpirun ends its processes as it ends, and under load one may still be dying when kiln-mpirun has ended (seen
# once beside the CUDA build's tests): gone within 5 s, not left running for its 50 s.
for _ in $(seq 1 50); do pgrep -f "sleep 50" >/dev/null || break; sleep 0.1; done
pgrep -f "sleep 50" >/dev/null && fail "the launched process outlived kiln-mpirun by 5 s"
[ "$(own_dirs)" = 0 ] || fail "kiln-mpirun ended by SIGTERM left its session directory"
echo "PASS 3: kiln-mpirun ended by SIGTERM (status $status) ends its launch and leaves nothing behind"

KILN_END_RECORD=$work/end timeout -k 10 120 "$launcher" -n 1 true >"$work/supervised.log" 2>&1
status=$?
[ "$status" = 75 ] || { cat "$work/supervised.log"; fail "a supervised launch without an end record exited $status, not 75"; }
[ "$(own_dirs)" = 0 ] || fail "a supervised launch left its session directory"
echo "PASS 4: a supervised launch without kiln's end record exits 75 and leaves nothing behind"

# The test suite sets a base for its launches' session directories: kiln-mpirun's launch has its own inside it, so
# that a launch it cut short (the host tests') leaves nothing there for another test's mpirun to draw.
mkdir -p "$work/base"
plant "$work/base"
PRTE_MCA_prte_tmpdir_base=$work/base timeout -k 10 60 "$launcher" -n 1 true >"$work/base.log" 2>&1 \
  || { cat "$work/base.log"; fail "kiln-mpirun did not start over session directories planted in the base the environment set"; }
[ "$(find "$work/base" -maxdepth 1 -name 'kiln-mpirun.*' | wc -l)" = 0 ] || fail "kiln-mpirun left its session directory in the base"
echo "PASS 5: in a base the environment sets, kiln-mpirun's launch has a directory of its own: it starts over the plant there and leaves nothing behind"
