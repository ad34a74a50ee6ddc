# Sanitizer builds: -DPACE_SANITIZE=asan (ASan + UBSan) or tsan, each in its
# own build dir (`make asan`, `make tsan`). Every binary of the build is
# instrumented, so the multi-process tests start the sanitizer builds of
# paced, pace_mf, pacectl, ...: tests find them next to themselves
# (tests/testing/subprocess.h BinaryDir(), or $<TARGET_FILE:...>).
#
# Runtime options reach every test and every process it starts through the
# environment (children inherit it):
#  - pace_test() tests get them as an ENVIRONMENT_MODIFICATION (it wins over a
#    per-test ENVIRONMENT, so do not set *SAN_OPTIONS per test);
#  - every other test (add_test) gets them from sanitizer_env.cmake, which
#    ctest includes before running the tests of a directory.
# Reports go to files under <build>/sanitizer-logs/<test>.<pid> instead of
# stderr, so a report in a child process (whose stderr a test may discard,
# and whose exit code it may not check) is never lost:
# cmake/sanitizer_reports.sh, run by `make asan|tsan` after ctest, fails when
# any report exists and prints them. A UBSan report also makes its process
# exit 1 at once (-fno-sanitize-recover: a failed test, or a child that dies
# under its test); with clang (the Makefile's SAN_CXX) it is logged there
# too, while GCC's separate UBSan runtime ignores log_path when ASan is
# linked and writes it to the process's stderr only.
#
# Code that must know which sanitizer is on tests PACE_ASAN / PACE_TSAN
# (common/sanitizers.h): clang 14 does not define GCC's __SANITIZE_ADDRESS__.
#
# Suppressions (only for code we do not build, each with its reason):
# cmake/tsan.supp, cmake/lsan.supp.
set(PACE_SANITIZE "" CACHE STRING "Sanitizer build: asan, tsan or empty")
set(PACE_SANITIZER_LOG_DIR ${CMAKE_BINARY_DIR}/sanitizer-logs)
# The TIMEOUT of every test in a directory that calls
# pace_sanitizer_env_for_directory() (pace_test() does) is multiplied by this
# at the end of the directory. The timeouts are hang guards sized for
# Release; instrumented code runs several times slower (TSan, on a loaded
# 2-core machine: apps_cli_test >300 s, cluster_netns_mf_test 178 s of its
# 180), so the guards scale with it instead of failing slow tests.
set(PACE_TEST_TIMEOUT_SCALE 1)
if(PACE_SANITIZE STREQUAL "asan")
  set(PACE_TEST_TIMEOUT_SCALE 2)
elseif(PACE_SANITIZE STREQUAL "tsan")
  set(PACE_TEST_TIMEOUT_SCALE 3)
endif()

if(PACE_SANITIZE STREQUAL "asan")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  # abort_on_error=0: exit code 1, not SIGABRT (a test expecting a child's
  # crash cannot mistake a sanitizer report for it). detect_leaks: LSan at exit.
  set(_pace_asan_options
      "detect_leaks=1:abort_on_error=0:check_initialization_order=1:strict_init_order=1")
  set(_pace_ubsan_options "print_stacktrace=1:halt_on_error=1")
  set(_pace_lsan_options "suppressions=${CMAKE_SOURCE_DIR}/cmake/lsan.supp:print_suppressions=0")
  set(_pace_sanitizer_vars ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS)
elseif(PACE_SANITIZE STREQUAL "tsan")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
  # exitcode=66 (TSan's default, explicit): a process with a report fails.
  set(_pace_tsan_options
      "suppressions=${CMAKE_SOURCE_DIR}/cmake/tsan.supp:second_deadlock_stack=1:exitcode=66:print_suppressions=0")
  set(_pace_sanitizer_vars TSAN_OPTIONS)
elseif(NOT PACE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "PACE_SANITIZE must be asan, tsan or empty, not '${PACE_SANITIZE}'")
endif()

# pace_sanitizer_env(<out-var> <log-name>): the list of VAR=value settings of
# this build's sanitizer runtime options, reports logged to
# sanitizer-logs/<log-name>.<pid>. Empty for a build without sanitizers.
function(pace_sanitizer_env out log_name)
  set(env "")
  set(log "log_path=${PACE_SANITIZER_LOG_DIR}/${log_name}")
  if(PACE_SANITIZE STREQUAL "asan")
    list(APPEND env "ASAN_OPTIONS=${_pace_asan_options}:${log}"
                    "UBSAN_OPTIONS=${_pace_ubsan_options}"
                    "LSAN_OPTIONS=${_pace_lsan_options}")
  elseif(PACE_SANITIZE STREQUAL "tsan")
    list(APPEND env "TSAN_OPTIONS=${_pace_tsan_options}:${log}")
  endif()
  set(${out} "${env}" PARENT_SCOPE)
endfunction()

# pace_sanitize_test(<test>): gives one test (declared in the current
# directory) this build's sanitizer options; pace_test() calls it.
function(pace_sanitize_test name)
  if(PACE_SANITIZE STREQUAL "")
    return()
  endif()
  pace_sanitizer_env(env ${name})
  set(mods "")
  foreach(setting IN LISTS env)
    string(REGEX REPLACE "^([A-Z_]+)=(.*)$" "\\1=set:\\2" mod "${setting}")
    list(APPEND mods "${mod}")
  endforeach()
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT_MODIFICATION ${mods})
endfunction()

# The directory-wide default for tests declared with plain add_test: ctest
# includes this file (TEST_INCLUDE_FILES) before it runs a directory's tests.
if(NOT PACE_SANITIZE STREQUAL "")
  pace_sanitizer_env(_pace_default_env other)
  set(_pace_env_script "")
  foreach(setting IN LISTS _pace_default_env)
    string(REGEX REPLACE "^([A-Z_]+)=(.*)$" "set(ENV{\\1} \"\\2\")\n" line "${setting}")
    string(APPEND _pace_env_script "${line}")
  endforeach()
  set(PACE_SANITIZER_ENV_FILE ${CMAKE_BINARY_DIR}/sanitizer_env.cmake)
  file(WRITE ${PACE_SANITIZER_ENV_FILE} "${_pace_env_script}")
  file(MAKE_DIRECTORY ${PACE_SANITIZER_LOG_DIR})
  set_property(DIRECTORY ${CMAKE_SOURCE_DIR} APPEND PROPERTY TEST_INCLUDE_FILES
               ${PACE_SANITIZER_ENV_FILE})
endif()

# pace_sanitizer_env_for_directory(): lets `ctest` run inside a subdirectory
# of the build see the defaults too; pace_test() calls it.
# It also scales the directory's test timeouts (PACE_TEST_TIMEOUT_SCALE), once
# every test of the directory is declared.
function(pace_sanitizer_env_for_directory)
  if(NOT DEFINED PACE_SANITIZER_ENV_FILE)
    return()
  endif()
  get_property(files DIRECTORY PROPERTY TEST_INCLUDE_FILES)
  if(NOT PACE_SANITIZER_ENV_FILE IN_LIST files)
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${PACE_SANITIZER_ENV_FILE})
  endif()
  get_property(scaled DIRECTORY PROPERTY PACE_TIMEOUTS_SCALED)
  if(NOT scaled AND PACE_TEST_TIMEOUT_SCALE GREATER 1)
    set_property(DIRECTORY PROPERTY PACE_TIMEOUTS_SCALED TRUE)
    cmake_language(DEFER CALL _pace_scale_test_timeouts)
  endif()
endfunction()

function(_pace_scale_test_timeouts)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS tests)
    get_test_property(${t} TIMEOUT timeout)
    if(timeout)
      math(EXPR timeout "${timeout} * ${PACE_TEST_TIMEOUT_SCALE}")
      set_tests_properties(${t} PROPERTIES TIMEOUT ${timeout})
    endif()
  endforeach()
endfunction()

# pace_sanitize_hosted_test(<test>): for a test whose process is a program we
# do not build (python3) that loads our instrumented code as a shared object
# (the pacedb module): the sanitizer runtime must be loaded first, so it is
# preloaded (LD_PRELOAD, inherited by the processes the test starts, which
# already link the same runtime). LeakSanitizer is off in that test: the
# interpreter does not free its objects at exit; our binaries are
# leak-checked in their own tests.
function(pace_sanitize_hosted_test name)
  if(PACE_SANITIZE STREQUAL "")
    return()
  endif()
  if(PACE_SANITIZE STREQUAL "asan")
    set(runtime_name libasan.so)
  else()
    set(runtime_name libtsan.so)
  endif()
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${runtime_name}
                  OUTPUT_VARIABLE runtime OUTPUT_STRIP_TRAILING_WHITESPACE)
  get_filename_component(runtime "${runtime}" REALPATH)
  # libstdc++ too: ASan resolves the real __cxa_throw when it starts, and an
  # interpreter that does not link libstdc++ would leave it null.
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so
                  OUTPUT_VARIABLE libstdcxx OUTPUT_STRIP_TRAILING_WHITESPACE)
  get_filename_component(libstdcxx "${libstdcxx}" REALPATH)
  pace_sanitizer_env(env ${name})
  set(mods "LD_PRELOAD=set:${runtime}:${libstdcxx}")
  foreach(setting IN LISTS env)
    string(REGEX REPLACE "^([A-Z_]+)=(.*)$" "\\1=set:\\2" mod "${setting}")
    string(REPLACE "detect_leaks=1" "detect_leaks=0" mod "${mod}")
    list(APPEND mods "${mod}")
  endforeach()
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT_MODIFICATION ${mods})
  pace_sanitizer_env_for_directory()
endfunction()
