# Finds everything kiln builds against and says what it found.

# --- MPI: the ULFM-capable Open MPI 5 in KILN_MPI_PREFIX, never Debian's 4.1.
if(EXISTS "${KILN_MPI_PREFIX}/bin/mpicxx")
  set(MPI_CXX_COMPILER "${KILN_MPI_PREFIX}/bin/mpicxx" CACHE FILEPATH "" FORCE)
  set(MPIEXEC_EXECUTABLE "${KILN_MPI_PREFIX}/bin/mpirun" CACHE FILEPATH "" FORCE)
else()
  message(WARNING "No Open MPI in KILN_MPI_PREFIX=${KILN_MPI_PREFIX}; using whatever MPI CMake finds. "
                  "Run ./bootstrap.sh setup to install the ULFM-capable Open MPI 5.")
endif()
find_package(MPI 3.1 REQUIRED COMPONENTS C CXX)

# ULFM: the fault-tolerance extension must be declared in mpi-ext.h.
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_LIBRARIES MPI::MPI_CXX)
check_cxx_source_compiles([[
#include <mpi.h>
#include <mpi-ext.h>
#if !defined(OMPI_HAVE_MPI_EXT_FTMPI) || !OMPI_HAVE_MPI_EXT_FTMPI
#error no ULFM
#endif
int main() { MPI_Comm c = MPI_COMM_WORLD; MPIX_Comm_revoke(c); MPIX_Comm_shrink(c, &c);
             int f = 1; MPIX_Comm_agree(c, &f); return 0; }
]] KILN_HAVE_ULFM)
unset(CMAKE_REQUIRED_LIBRARIES)
if(NOT KILN_HAVE_ULFM)
  set(KILN_HAVE_ULFM OFF)
  message(WARNING "MPI has no ULFM (mpi-ext.h lacks the ftmpi extension): kiln will refuse fault tolerance f > 0.")
endif()

# --- HDF5: Debian's parallel build; it links libmpi.so.40, which Open MPI 5 provides.
set(HDF5_PREFER_PARALLEL ON)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR "HDF5 at ${HDF5_INCLUDE_DIRS} is serial; kiln needs parallel HDF5 (libhdf5-openmpi-dev).")
endif()
add_library(kiln_hdf5 INTERFACE)
target_include_directories(kiln_hdf5 SYSTEM INTERFACE ${HDF5_C_INCLUDE_DIRS})
target_link_libraries(kiln_hdf5 INTERFACE ${HDF5_C_LIBRARIES} MPI::MPI_CXX)
target_compile_definitions(kiln_hdf5 INTERFACE ${HDF5_C_DEFINITIONS})

find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
find_package(fmt REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
# Compressed inputs of kiln prep: zstd, and gzip through zlib (HDF5's deflate too).
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
find_package(ZLIB REQUIRED)
# Apache Arrow and Parquet for kiln prep: the C++ libraries and headers the
# pyarrow wheel carries (Debian 12 packages none), in the environment
# bootstrap.sh makes. Without it kiln builds and refuses Parquet and Arrow inputs.
set(KILN_ARROW_ROOT "${CMAKE_SOURCE_DIR}/.deps/arrow" CACHE PATH "a Python environment with the pyarrow wheel")
set(KILN_HAVE_ARROW OFF)
file(GLOB _kiln_pyarrow "${KILN_ARROW_ROOT}/lib/python3*/site-packages/pyarrow")
if(_kiln_pyarrow)
  list(GET _kiln_pyarrow 0 _kiln_pyarrow)
  file(GLOB _kiln_arrow_lib "${_kiln_pyarrow}/libarrow.so.[0-9]*")
  file(GLOB _kiln_parquet_lib "${_kiln_pyarrow}/libparquet.so.[0-9]*")
  if(_kiln_arrow_lib AND _kiln_parquet_lib AND EXISTS "${_kiln_pyarrow}/include/arrow/api.h")
    list(GET _kiln_arrow_lib 0 _kiln_arrow_lib)
    list(GET _kiln_parquet_lib 0 _kiln_parquet_lib)
    add_library(kiln_arrow INTERFACE)
    target_include_directories(kiln_arrow SYSTEM INTERFACE "${_kiln_pyarrow}/include")
    target_link_libraries(kiln_arrow INTERFACE "${_kiln_parquet_lib}" "${_kiln_arrow_lib}")
    target_link_options(kiln_arrow INTERFACE "-Wl,-rpath,${_kiln_pyarrow}")
    set(KILN_HAVE_ARROW ON)
  endif()
endif()
message(STATUS "Apache Arrow (Parquet and Arrow inputs): ${KILN_HAVE_ARROW} ${_kiln_arrow_lib}")
# The pre-tokenizer regexes of Hugging Face tokenizer.json files (Unicode properties).
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# Unicode normalization (NFC, NFKC) of Hugging Face tokenizer.json normalizers.
pkg_check_modules(ICU REQUIRED IMPORTED_TARGET icu-uc)
# --- libtorch. KILN_TORCH_CPU_ROOT, the torch directory of a PyPI torch wheel (bootstrap.sh's CPU build): its
# CPU library and c10 alone, without the wheel's CMake package, which would link libtorch_cuda and make every
# rank load the CUDA libraries it never uses (about 0.3 CPU-s a rank; perf/RESULTS.md). Otherwise a libtorch
# found by CMake: the wheel's whole package (the CUDA build), a site's own, or Debian's libtorch-dev.
set(KILN_TORCH_CPU_ROOT "" CACHE PATH "torch directory of a PyPI torch wheel, whose CPU libraries kiln links alone")
if(KILN_TORCH_CPU_ROOT)
  set(_kiln_torch_version_file "${KILN_TORCH_CPU_ROOT}/share/cmake/Torch/TorchConfigVersion.cmake")
  if(EXISTS "${_kiln_torch_version_file}")
    file(STRINGS "${_kiln_torch_version_file}" _kiln_torch_version REGEX "set\\(PACKAGE_VERSION ")
    string(REGEX MATCH "[0-9]+\\.[0-9]+(\\.[0-9]+)?" Torch_VERSION "${_kiln_torch_version}")
  endif()
  if(NOT Torch_VERSION OR NOT EXISTS "${KILN_TORCH_CPU_ROOT}/lib/libtorch_cpu.so")
    message(FATAL_ERROR "KILN_TORCH_CPU_ROOT=${KILN_TORCH_CPU_ROOT} is not a torch wheel's directory "
                        "(expected share/cmake/Torch/TorchConfigVersion.cmake and lib/libtorch_cpu.so)")
  endif()
  set(TORCH_INSTALL_PREFIX "${KILN_TORCH_CPU_ROOT}")
  set(TORCH_INCLUDE_DIRS "${KILN_TORCH_CPU_ROOT}/include" "${KILN_TORCH_CPU_ROOT}/include/torch/csrc/api/include")
  set(TORCH_LIBRARIES "${KILN_TORCH_CPU_ROOT}/lib/libtorch_cpu.so" "${KILN_TORCH_CPU_ROOT}/lib/libc10.so")
  # CMake leaves directories inside the project (.deps/) out of the install run path; an installed kiln finds
  # libtorch where it was built against it, until tools/bundle_runtime.sh copies it into the prefix.
  list(APPEND CMAKE_INSTALL_RPATH "${KILN_TORCH_CPU_ROOT}/lib")
else()
  find_package(Torch REQUIRED)
endif()
# The torch wheel's TorchConfig looks for c10 on the system paths before its own directory, and finds
# Debian's (libtorch-dev 1.13) where both are installed. Linked beside the wheel's libtorch, two c10s
# register the same operators and the process aborts when libtorch loads: take the one beside it.
if(c10_LIBRARY AND NOT c10_LIBRARY MATCHES "^${TORCH_INSTALL_PREFIX}/" AND EXISTS "${TORCH_INSTALL_PREFIX}/lib/libc10.so")
  list(TRANSFORM TORCH_LIBRARIES REPLACE "^${c10_LIBRARY}$" "${TORCH_INSTALL_PREFIX}/lib/libc10.so")
  message(STATUS "libtorch: c10 from ${TORCH_INSTALL_PREFIX}/lib, not ${c10_LIBRARY}")
endif()
# The torch wheel ships fmt 12 headers in its include directory, which come
# first for every file that sees torch; Debian's libfmt is fmt 9. With both,
# kiln uses fmt header-only, so that each file is complete with the headers
# it saw (fmt versions live in separate inline namespaces) and no libfmt
# symbol of another version is asked for at link time.
add_library(kiln_fmt INTERFACE)
if(EXISTS "${TORCH_INSTALL_PREFIX}/include/fmt" AND NOT TORCH_INSTALL_PREFIX STREQUAL "/usr")
  target_link_libraries(kiln_fmt INTERFACE fmt::fmt-header-only)
  message(STATUS "fmt: header-only (libtorch brings its own fmt headers)")
else()
  target_link_libraries(kiln_fmt INTERFACE fmt::fmt)
endif()

# --- NCCL (and the CUDA runtime it needs), for the GPU tensor transport.
set(KILN_HAVE_NCCL OFF)
if(NOT KILN_WITH_NCCL STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  # KILN_NCCL_ROOT: the NCCL libtorch was built with (the CUDA build takes the
  # one of the torch wheel's nvidia-nccl package), so one libnccl is loaded.
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${KILN_NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
               HINTS ${KILN_NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(KILN_HAVE_NCCL ON)
    add_library(kiln_nccl INTERFACE)
    target_include_directories(kiln_nccl SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(kiln_nccl INTERFACE ${NCCL_LIBRARY} CUDA::cudart)
    message(STATUS "NCCL: ${NCCL_LIBRARY} (CUDA ${CUDAToolkit_VERSION})")
  elseif(KILN_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "KILN_WITH_NCCL=ON but NCCL or the CUDA toolkit was not found.")
  else()
    message(STATUS "NCCL: not found, GPU transport disabled")
  endif()
endif()
