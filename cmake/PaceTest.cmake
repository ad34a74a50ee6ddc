# pace_test(NAME name SRCS a.cc ... DEPS lib ... LABELS unit|integration|slow [TIMEOUT s])
# Declares a GoogleTest binary and registers it with ctest under the given label.
# In sanitizer builds every TIMEOUT of the directory is multiplied by
# PACE_TEST_TIMEOUT_SCALE (cmake/Sanitizers.cmake).
#
# -DPACE_BUILD_SLOW_TESTS=OFF: a test labelled slow only (and not unit or
# integration) is declared and registered but left out of the default build;
# `make asan-build` / `tsan-build` pass it unless CTEST_LABELS names slow,
# since their suites run -L 'unit|integration' and never start it.
#
# Every test whose name starts with common_ or storage_ is also a dependency of
# the `storage_suite` target, which `make asan-storage` builds: adding a storage
# test can never leave the sanitizer run with a test that was not built.
option(PACE_BUILD_SLOW_TESTS "Build the tests labelled slow only" ON)

if(NOT TARGET storage_suite)
  add_custom_target(storage_suite)
endif()

function(pace_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(BUILD_TESTING AND NOT PACE_BUILD_SLOW_TESTS AND T_LABELS STREQUAL "slow")
    add_executable(${T_NAME} EXCLUDE_FROM_ALL ${T_SRCS})
  elseif(BUILD_TESTING)
    add_executable(${T_NAME} ${T_SRCS})
  else()
    # Declared, not built (-DBUILD_TESTING=OFF): settings made on it elsewhere stay valid.
    add_executable(${T_NAME} EXCLUDE_FROM_ALL ${T_SRCS})
  endif()
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main Threads::Threads)
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
  # Sanitizer builds: runtime options and suppressions (cmake/Sanitizers.cmake).
  pace_sanitize_test(${T_NAME})
  pace_sanitizer_env_for_directory()
  if(T_NAME MATCHES "^(common|storage)_")
    add_dependencies(storage_suite ${T_NAME})
  endif()
endfunction()

# pace_test_library(NAME name SRCS a.cc ... DEPS lib ...)
# A static library of test-only helpers (a module's testing/ folder), linked
# by its tests and by tests/. Built with the tests only (-DBUILD_TESTING=OFF:
# declared, not built).
function(pace_test_library)
  cmake_parse_arguments(T "" "NAME" "SRCS;DEPS" ${ARGN})
  if(BUILD_TESTING)
    add_library(${T_NAME} STATIC ${T_SRCS})
  else()
    add_library(${T_NAME} STATIC EXCLUDE_FROM_ALL ${T_SRCS})
  endif()
  target_link_libraries(${T_NAME} PUBLIC ${T_DEPS} GTest::gtest)
endfunction()
