#!/usr/bin/env bash
# An installed kiln stands alone: `cmake --install` and tools/bundle_runtime.sh (what `./bootstrap.sh install
# PREFIX` runs) into a directory outside the checkout, the prefix then moved elsewhere, and everything after
# that done in a mount namespace where the checkout and the build directory are empty directories (a tmpfs
# mounted over each), with an environment that has only the prefix's bin/ and the system's on PATH: a private
# Slurm (tests/slurm/cluster.sh, copied out first) with 2 nodes of 2 CPUs, the data prepared by the prefix's
# kiln, and a 2-node job submitted with the prefix's jobscript, rank 2 (node 2) killed in step 3.
# Pass criteria, printed as PASS:
#  1. The prefix was installed, moved, and every library kiln and its modules load resolves inside it or to
#     the system's C and C++ runtimes (ldd); no script of the prefix names the checkout.
#  2. With the checkout hidden, the prefix's kiln reports its versions and prepares the data.
#  3. With the checkout hidden, the 2-node job under Slurm survived its node failure and trained every step:
#     Slurm says COMPLETED 0:0, the log has one recovery and the last step, no rank but rank 2 was lost
#     (tests/fault/victims.py), and the log names nothing of the checkout.
# Usage: install_prefix.sh BUILD_DIR MPI_PREFIX
set -uo pipefail
build=$(cd "$1" && pwd) mpi=$(cd "$2" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
fail() { echo "FAIL: $*"; exit 1; }
# Outside the checkout and the build directory, which will be hidden.
work=$(mktemp -d /tmp/kiln-install.XXXXXX)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/staged" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install"; }
bash "$root/tools/bundle_runtime.sh" "$work/staged" "$mpi" >>"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "bundle_runtime.sh"; }
mv "$work/staged" "$work/kiln"
prefix=$work/kiln
outside=$(for f in "$prefix/bin/kiln" "$prefix"/lib/kiln/*.so "$prefix"/lib/kiln/deps/*; do ldd "$f"; done |
          awk '$2 == "=>" {print $1, $3}' | sort -u |
          grep -vE "^(libc|libm|libdl|libpthread|librt|libutil|libresolv|libstdc\+\+|libgcc_s)\.so" |
          grep -v " $prefix/" || true)
[ -z "$outside" ] || fail "libraries resolved outside the moved prefix: $outside"
named=$(grep -rlI -e "$root" -e "$build" "$prefix/bin" "$prefix/share" 2>/dev/null | grep -v "\.ini$" || true)
[ -z "$named" ] || fail "scripts of the prefix name the checkout: $named"
echo "PASS 1: installed, moved to $prefix; $(ls "$prefix/lib/kiln/deps" | wc -l) bundled libraries and Open MPI resolve inside it"

cp "$here/cluster.sh" "$work/cluster.sh"
cp "$root/tests/fault/victims.py" "$work/victims.py"
cat >"$work/hidden.sh" <<EOF
set -uo pipefail
mount -t tmpfs none "$root" || { echo "FAIL: cannot hide the checkout (mount in a private namespace)"; exit 1; }
case "$build" in "$root"/*) ;; *) mount -t tmpfs none "$build" || exit 1 ;; esac
[ -z "\$(ls -A "$root")" ] || { echo "FAIL: the checkout is still visible"; exit 1; }
cd "$work"
kiln version >version.log 2>&1 || { cat version.log; echo "FAIL: kiln version"; exit 1; }
kiln prep --source licenses --input /usr/share/common-licenses --format file --out data --quiet >prep.log 2>&1 \
  || { cat prep.log; echo "FAIL: kiln prep"; exit 1; }
echo "PASS 2: with the checkout hidden, the prefix's kiln reports \$(grep -c . version.log) version lines and prepared the data"
eval "\$(bash cluster.sh start "$work/slurm" 2 2)" || { echo "FAIL: the test Slurm did not start"; exit 1; }
trap 'bash cluster.sh stop "$work/slurm"' EXIT
job=\$(sbatch --parsable --nodes=2 --ntasks-per-node=2 -o job.out "$prefix/share/kiln/jobscripts/kiln-run.sbatch" \
  "$prefix/share/kiln/input/tiny-cpu.ini" --set data.dir=data --set data.mix=licenses:1 --set data.tokenizer=bytes \
  --set train.threads=1 --set run.out_dir=runs --set run.steps=8 --set plan.pipelines= --set checkpoint.every=0 \
  --set fault.inject=2:3:forward) || { echo "FAIL: sbatch"; exit 1; }
for _ in \$(seq 1 240); do
  state=\$(scontrol show job "\$job" | tr ' ' '\n' | sed -n 's/^JobState=//p')
  [[ "\$state" =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)\$ ]] && break
  sleep 0.5
done
code=\$(scontrol show job "\$job" | tr ' ' '\n' | sed -n 's/^ExitCode=//p')
[ "\$state" = COMPLETED ] && [ "\$code" = 0:0 ] || { cat job.out; echo "FAIL: job \$job is \$state \$code"; exit 1; }
[ "\$(grep -c "FAILURE step" job.out)" = 1 ] || { cat job.out; echo "FAIL: expected one recovery in the job"; exit 1; }
grep -q "kiln run: steps 0 to 8" job.out || { cat job.out; echo "FAIL: the job did not train its 8 steps"; exit 1; }
python3 victims.py kiln runs/tiny/diag.h5 job.out 4 || { echo "FAIL: the job lost a rank other than rank 2, or left it unrecorded"; exit 1; }
! grep -q -e "$root" -e "$build" job.out || { grep -e "$root" -e "$build" job.out; echo "FAIL: the job's log names the checkout"; exit 1; }
echo "PASS 3: with the checkout hidden, 2-node job \$job from the prefix survived a node failure and trained 8 steps; Slurm says COMPLETED 0:0"
EOF
env -i HOME="$work" PATH="$prefix/bin:/usr/sbin:/usr/bin:/sbin:/bin" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMPI_MCA_btl="${OMPI_MCA_btl:-^ofi}" OMPI_MCA_mtl="${OMPI_MCA_mtl:-^ofi}" \
  unshare --mount --propagation private bash "$work/hidden.sh"
