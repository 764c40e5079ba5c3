#!/usr/bin/env bash
# Open MPI's crash inside MPIX_Comm_shrink when a second process dies during it (issue 37, item 6).
#   perf/ulfm_shrink_race.sh [RUNS] [MAX_DELAY_US] [BINARY] [shrink|rounds] [guard]
# Each run: 8 ranks, the last dies at once, the others notice it and shrink, the second-to-last dies a random
# 0..MAX_DELAY_US microseconds after the last (its notice then often reaches the others inside the shrink).
# Mode "rounds": the survivors then create communicators for 16 rounds (dup, split, create_group) while the
# second-to-last dies 0..MAX_DELAY_US after noticing the first failure: the same crash, reached more often. Prints one JSON line: runs that ended well, crashed (a signal, e.g. the segmentation fault in
# ompi_comm_revoke_local under ompi_comm_activate), hung (10 s; a run takes about 2), or hung after the survivors
# reported (MPI_Finalize waiting for a dead peer, Open MPI #9434), with the binary's Open MPI. KEEP=DIR keeps
# the output of crashed runs there.
set -uo pipefail
runs=${1:-200} max=${2:-3000} bin=${3:-build/ulfm_comm_creation} mode=${4:-shrink} guard=${5:-}
mpirun=${MPIRUN:-mpirun}
fine=0 crash=0 hang=0 late=0 segv=0 saves=0
for i in $(seq 1 "$runs"); do
  delay=$((RANDOM * 32768 + RANDOM)); delay=$((delay % (max + 1)))
  out=$(timeout 10 "$mpirun" -n 8 --oversubscribe --with-ft ulfm "$bin" "$delay" "$mode" $guard 2>&1); rc=$?
  if grep -q "guard: lent" <<<"$out"; then saves=$((saves + 1)); fi
  # Under ULFM a survivor that crashes is one more failure: the others may still end well, so a crash is
  # read from the output (Open MPI's report of the signal), not from the exit status alone.
  if grep -qiE "segmentation|signal 11|SIGSEGV|signal 6|SIGABRT" <<<"$out"; then
    crash=$((crash + 1))
    if grep -qiE "segmentation|signal 11|SIGSEGV" <<<"$out"; then segv=$((segv + 1)); fi
    [ -n "${KEEP:-}" ] && printf '%s\n' "$out" >"${KEEP}/crash-$i.log"
  else
    case "$rc" in
      0) fine=$((fine + 1)) ;;
      124) if grep -q "COMM-CREATION ok" <<<"$out"; then late=$((late + 1)); else hang=$((hang + 1)); fi ;;
      *) crash=$((crash + 1)) ;;
    esac
  fi
done
version=$("$mpirun" --version 2>&1 | head -1)
printf '{"bench":"ulfm-shrink-race","mode":"%s","guard":"%s","runs":%d,"max_delay_us":%d,"fine":%d,"crashed":%d,"segfaults":%d,"hung":%d,"hung_in_finalize":%d,"guard_saved_runs":%d,"mpi":"%s"}\n' \
  "$mode" "${guard:-off}" "$runs" "$max" "$fine" "$crash" "$segv" "$hang" "$late" "$saves" "$version"
