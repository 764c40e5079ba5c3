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

# The pipeline benchmarks' model (8 layers, d_model 128, seq 128, micro-batch 4,
# global batch 32, one thread per rank), with a layer profile measured here:
# sets the arrays model=(...) and machine=(...) of kiln --set options.
bench_profiled_model() {
  model=(--set model.blocks=6 --set model.d_model=128 --set model.heads=4 --set data.seq_len=128
         --set train.micro_batch=4 --set data.global_batch=32 --set train.threads=1
         --set data.dir="$work/data" --set data.mix=licenses:1 --set data.tokenizer=bytes)
  "$kiln" profile input/tiny-cpu.ini "${model[@]}" --out "$work/profile.h5" >"$work/profile.log"
  # Shared memory between ranks of this machine: a few GB/s.
  machine=(--set plan.profile="$work/profile.h5" --set plan.intra_node_gb_s=5 --set plan.inter_node_gb_s=5)
}
