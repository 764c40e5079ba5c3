# Test registration helpers. Every test gets a label and a timeout.
find_package(GTest REQUIRED)

# Open MPI refuses root without these; CI and containers run as root.
# The tests run on one machine with no fabric, where Open MPI's libfabric transports (btl and mtl ofi) spend
# about 1 s of every MPI_Init probing for one: most kiln launches would pay more for that than for training.
set(KILN_TEST_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OMPI_MCA_btl=^ofi;OMPI_MCA_mtl=^ofi")

# kiln_add_unit_test(name SOURCES a.cpp ... [LIBS ...])
function(kiln_add_unit_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT "${KILN_TEST_ENV}")
endfunction()

# kiln_add_mpi_test(name NP n SOURCES ... [LIBS ...] [FAULT] [TIMEOUT s] [ARGS ...])
# Runs under mpirun -n NP --oversubscribe; FAULT adds --with-ft ulfm and label fault.
# The binary uses tests/mpi/gtest_mpi_main.cpp unless it has its own main (NO_GTEST).
# The main of the MPI gtest binaries, compiled once for all of them.
if(NOT TARGET kiln_gtest_mpi_main)
  add_library(kiln_gtest_mpi_main STATIC ${CMAKE_SOURCE_DIR}/tests/mpi/gtest_mpi_main.cpp)
  target_link_libraries(kiln_gtest_mpi_main PUBLIC GTest::gtest MPI::MPI_CXX)
endif()
function(kiln_add_mpi_test name)
  cmake_parse_arguments(T "FAULT;NO_GTEST" "NP;TIMEOUT" "SOURCES;LIBS;ARGS;PASS_REGEX" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS})
  if(NOT T_NO_GTEST)
    target_link_libraries(${name} PRIVATE kiln_gtest_mpi_main GTest::gtest MPI::MPI_CXX)
  endif()
  set(launch ${MPIEXEC_EXECUTABLE} -n ${T_NP} --oversubscribe)
  set(labels mpi)
  if(T_FAULT)
    list(APPEND launch --with-ft ulfm)
    set(labels fault)
  endif()
  if(T_PASS_REGEX)
    # The report must be there and the job must end well: a pass regex alone
    # (ctest's PASS_REGULAR_EXPRESSION) ignores the exit code, so a crash
    # after the PASS line would go unseen.
    string(REPLACE ";" "@@" command "${launch};$<TARGET_FILE:${name}>;${T_ARGS}")
    string(REPLACE ";" "@@" regex "${T_PASS_REGEX}")
    add_test(NAME ${name}
             COMMAND ${CMAKE_COMMAND} "-DCMD=${command}" "-DEXPECT_RC=0" "-DEXPECT_REGEX=${regex}"
                     -P ${CMAKE_SOURCE_DIR}/tests/cli/expect.cmake)
  else()
    add_test(NAME ${name} COMMAND ${launch} $<TARGET_FILE:${name}> ${T_ARGS})
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT ${T_TIMEOUT}
                       ENVIRONMENT "${KILN_TEST_ENV}" PROCESSORS ${T_NP})
endfunction()

# kiln_add_cli_test(name LABEL l RC 0|nonzero REGEX r1 [r2 ...] COMMAND cmd ...)
# Runs a command line (kiln itself, often under mpirun) and checks exit code and output.
function(kiln_add_cli_test name)
  cmake_parse_arguments(T "" "LABEL;RC;TIMEOUT;PROCESSORS" "REGEX;COMMAND" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  if(NOT T_PROCESSORS)
    set(T_PROCESSORS 1)
  endif()
  # Lists travel to the script joined with "@@": ';' does not survive add_test.
  string(REPLACE ";" "@@" regex "${T_REGEX}")
  string(REPLACE ";" "@@" command "${T_COMMAND}")
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=${command}" "-DEXPECT_RC=${T_RC}" "-DEXPECT_REGEX=${regex}"
                   -P ${CMAKE_SOURCE_DIR}/tests/cli/expect.cmake
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABEL}" TIMEOUT ${T_TIMEOUT}
                       ENVIRONMENT "${KILN_TEST_ENV}" PROCESSORS ${T_PROCESSORS})
endfunction()

# kiln_set_per_test(PROPERTY name:value ...): PROPERTY set to each value on its test, where that test exists
# (the Slurm tests are registered only where Slurm is installed).
function(kiln_set_per_test property)
  foreach(pair IN LISTS ARGN)
    string(REPLACE ":" ";" pair "${pair}")
    list(GET pair 0 name)
    list(GET pair 1 value)
    if(TEST ${name})
      set_tests_properties(${name} PROPERTIES ${property} ${value})
    endif()
  endforeach()
endfunction()
