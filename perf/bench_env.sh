# Sourced by the benchmarks in perf/: where kiln is, the ULFM Open MPI on PATH,
# and the checkout as working directory (the decks are in input/).
root=$(cd "$(dirname "${BASH_SOURCE[1]}")/.." && pwd)
build=${KILN_BUILD_DIR:-$root/build}
kiln=$build/kiln
export PATH=$root/.deps/ompi/bin:$PATH OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$root"

# A fresh working directory $work = build/NAME, with the licence texts prepared
# as source 'licenses' (byte tokens) in $work/data.
bench_workdir_with_licenses() {
  work=$build/$1
  rm -rf "$work"
  mkdir -p "$work"
  "$kiln" prep --source licenses --input /usr/share/common-licenses --out "$work/data" --overwrite --quiet >/dev/null
}
