#!/usr/bin/env bash
# Prepares the GPU check (perf/gpu_check.sh) for a GPU machine that has CUDA
# and PyTorch but no network, no MPI, HDF5 or Boost: builds kiln here against
# the libtorch of the torch version installed there (its C++ ABI must match
# exactly), and gathers into .gpu/ (ignored by git; carried to the machine)
# kiln, the libraries it needs that are not libtorch's, CUDA's or the C
# runtime's, and the Open MPI 5 prefix (relocated there with OPAL_PREFIX).
#
#   perf/gpu_pack.sh [TORCH_VERSION]    (default 2.11.0: the device machine's torch)
#
# Then, on the GPU machine, from the checkout: perf/gpu_check.sh (carry .gpu).
set -euo pipefail
version=${1:-2.11.0}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-gpu-$version
pack=$root/.gpu
KILN_TORCH_VERSION=$version KILN_CUDA_BUILD_DIR=$build "$root/bootstrap.sh" cuda

rm -rf "$pack"
mkdir -p "$pack/bin" "$pack/lib"
cp "$build/kiln" "$pack/bin/"
# What the loader resolves here, less what the GPU machine brings itself:
# libtorch and CUDA, and glibc's own libraries (libresolv, libutil... use
# glibc-private symbols and must come from the glibc they run with).
ldd "$build/kiln" | awk '$3 ~ /^\// {print $3}' \
  | grep -v -E '/torch/|/nvidia/|/\.deps/ompi/|/libstdc\+\+|/libgcc_s|/libcudart|/libcuda\.' \
  | grep -v -E '/(libc|libm|ld-linux-x86-64|libpthread|libdl|librt|libresolv|libutil|libanl|libnsl|libBrokenLocale)\.so' \
  | xargs -r cp -L -t "$pack/lib/"
# Open MPI 5: libraries, components, help texts, launcher (not its Python).
mkdir -p "$pack/ompi"
for d in bin etc lib share; do cp -a "$root/.deps/ompi/$d" "$pack/ompi/"; done
rm -rf "$pack/ompi/lib/python3"* "$pack/ompi/bin/pip"* "$pack/ompi/bin/activate"* "$pack/ompi/bin/Activate.ps1"
echo "$version" >"$pack/torch-version"
du -sh "$pack"
echo "gpu_pack: ready in .gpu/ (kiln against libtorch $version). On the GPU machine: perf/gpu_check.sh, carrying .gpu"
