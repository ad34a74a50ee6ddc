# Writes the version header for tools/cli (pace_cli's --version) at build
# time, so that an incremental build after a commit reports the new revision.
# Run as: cmake -DPACE_SOURCE_DIR=... -DPACE_VERSION=... -DPACE_HEADER_IN=...
#               -DPACE_HEADER_OUT=... -P GitRevision.cmake
# configure_file writes the header only when its text changes, so an
# unchanged revision rebuilds nothing. Without git (a source tarball) the
# revision is the project version.
set(PACE_GIT_REVISION "")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(
    COMMAND ${GIT_EXECUTABLE} describe --always --tags --dirty
    WORKING_DIRECTORY ${PACE_SOURCE_DIR}
    OUTPUT_VARIABLE PACE_GIT_REVISION
    OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET
    RESULT_VARIABLE _pace_git_result)
  if(NOT _pace_git_result EQUAL 0)
    set(PACE_GIT_REVISION "")
  endif()
endif()
if(PACE_GIT_REVISION STREQUAL "")
  set(PACE_GIT_REVISION "v${PACE_VERSION}")
endif()
set(PROJECT_VERSION ${PACE_VERSION})
configure_file(${PACE_HEADER_IN} ${PACE_HEADER_OUT} @ONLY)
