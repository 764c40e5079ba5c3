#!/usr/bin/env bash
# Makes an installed kiln prefix stand alone: after `cmake --install BUILD --prefix PREFIX`, copies in
# the Open MPI 5 runtime kiln was built with and every shared library kiln needs that a stock Debian or
# RHEL system does not have, and points every run path at them relative to the file ($ORIGIN). The
# prefix then works after the checkout is moved or deleted, and after the prefix itself is moved.
#
#   tools/bundle_runtime.sh PREFIX MPI_PREFIX
#
#   PREFIX/bin/kiln, kiln-mpirun
#   PREFIX/lib/kiln/*.so              kiln's modules (libtorch commands, SentencePiece)
#   PREFIX/lib/kiln/ompi/             Open MPI 5 (mpirun, prted, its libraries and help files): the
#                                     PyPI build is relocatable (its mpirun sets OPAL_PREFIX from its path)
#   PREFIX/lib/kiln/deps/             the other libraries (HDF5, libtorch, Boost, Arrow, ...)
#
# Left to the system: the C and C++ runtimes every Linux has (glibc, libstdc++, libgcc_s) and the GPU
# driver (libcuda), which must match the node's kernel module. A site that builds kiln against its own
# Open MPI and HDF5 modules installs with `cmake --install` alone (docs/install.md).
set -euo pipefail
prefix=$(cd "${1:?usage: bundle_runtime.sh PREFIX MPI_PREFIX}" && pwd)
mpi=$(cd "${2:?usage: bundle_runtime.sh PREFIX MPI_PREFIX}" && pwd)
command -v patchelf >/dev/null || { echo "bundle_runtime: patchelf is needed (apt-get install patchelf)" >&2; exit 1; }

ompi=$prefix/lib/kiln/ompi deps=$prefix/lib/kiln/deps
rm -rf "$ompi" "$deps"
mkdir -p "$ompi/bin" "$ompi/lib" "$deps"
# The runtime only: launchers, daemons, info tools, libraries and plugins, help texts and defaults;
# not the compiler wrappers' headers or the wheel's Python environment.
for tool in mpirun mpiexec ompirun_wrapper prte prterun prted prte_info ompi_info pmix_info; do
  [ -e "$mpi/bin/$tool" ] && cp -a "$mpi/bin/$tool" "$ompi/bin/"
done
cp -a "$mpi"/lib/lib*.so* "$ompi/lib/"
[ -d "$mpi/lib/openmpi" ] && cp -a "$mpi/lib/openmpi" "$ompi/lib/"
for dir in share etc; do [ -d "$mpi/$dir" ] && cp -a "$mpi/$dir" "$ompi/"; done

# The launcher uses the bundled mpirun; the build's Open MPI, its fallback, may be gone with the checkout.
sed -i '/# where kiln was built (bundle_runtime.sh drops this line)$/d' "$prefix/bin/kiln-mpirun"

# Stock on every Linux kiln runs on, or bound to the machine: never copied.
is_system() {
  case $(basename "$1") in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libutil.so.*|ld-linux*|libresolv.so.*) return 0 ;;
    libstdc++.so.*|libgcc_s.so.*) return 0 ;;
    libcuda.so.*|libnvidia-*) return 0 ;;
  esac
  return 1
}

# kiln and its modules, with every library they load resolved as they resolve it now (ldd), copied once
# under the name they ask for.
elves=("$prefix/bin/kiln" "$prefix"/lib/kiln/*.so)
missing=$(for f in "${elves[@]}"; do ldd "$f"; done | awk '/not found/ {print $1}' | sort -u)
[ -z "$missing" ] || { echo "bundle_runtime: these libraries are not found now, so cannot be bundled: $missing" >&2; exit 1; }
for f in "${elves[@]}"; do ldd "$f"; done | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r soname path; do
    is_system "$soname" && continue
    case $path in "$mpi"/*|"$prefix"/*) continue ;; esac   # Open MPI's own, copied whole above; kiln's modules
    [ -e "$deps/$soname" ] || cp -L "$path" "$deps/$soname"
  done
chmod u+w "$deps"/* 2>/dev/null || true

# Run paths relative to each file: kiln finds its modules' and Open MPI's directories; a bundled library
# finds its neighbours and Open MPI (HDF5 needs libmpi).
patchelf --set-rpath '$ORIGIN/../lib/kiln/deps:$ORIGIN/../lib/kiln/ompi/lib' "$prefix/bin/kiln"
for f in "$prefix"/lib/kiln/*.so; do patchelf --set-rpath '$ORIGIN/deps:$ORIGIN/ompi/lib' "$f"; done
for f in "$deps"/*; do patchelf --set-rpath '$ORIGIN:$ORIGIN/../ompi/lib' "$f"; done

# Nothing may resolve outside the prefix but the system's own libraries.
leaks=$(for f in "$prefix/bin/kiln" "$prefix"/lib/kiln/*.so "$deps"/*; do ldd "$f" 2>/dev/null; done |
        awk '$2 == "=>" {print $1, $3}' | sort -u | while read -r soname path; do
          is_system "$soname" && continue
          case $path in "$prefix"/*) ;; *) echo "$soname => $path" ;; esac
        done)
[ -z "$leaks" ] || { echo "bundle_runtime: still resolved outside $prefix:"; echo "$leaks"; exit 1; } >&2
echo "bundle_runtime: $prefix stands alone: Open MPI $(basename "$(ls -d "$mpi"/lib/python3*/site-packages/openmpi-*.dist-info 2>/dev/null | head -1)" .dist-info | sed 's/openmpi-//') and $(ls "$deps" | wc -l) libraries ($(du -sh "$prefix" | cut -f1) in all)"
