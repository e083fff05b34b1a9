# Runs a command that must fail cleanly, for the CLI's bad-input tests:
#
#   cmake -DCMD=<program>|<arg>|<arg>...       the command; arguments separated by '|'
#         -DSTDERR_REGEX=<regex>               stderr must match (required)
#         [-DSTDOUT_REGEX=<regex>]             stdout must match
#         [-DEXIT_CODE=<n>]                    the exact exit code (default: any non-zero)
#         [-DUNCHANGED=<file>|<file>...]       files that must be byte-identical afterwards
#         [-DSNAPSHOT_DIR=<dir>]               where the copies of UNCHANGED go
#         [-DABSENT=<path>|<path>...]          paths the command must not create (removed first)
#         [-DWORKING_DIRECTORY=<dir>]
#         [-DTIMEOUT=<seconds>]
#         -P expect_fail.cmake
#
# Fails when the command succeeds, crashes (killed by a signal, or an exit code >= 128), exits
# with another code than EXIT_CODE, prints nothing that matches, changes an UNCHANGED file, or
# creates an ABSENT path.
cmake_minimum_required(VERSION 3.16)

if(NOT DEFINED CMD OR CMD STREQUAL "")
  message(FATAL_ERROR "expect_fail.cmake: -DCMD=... is required")
endif()
if(NOT DEFINED STDERR_REGEX OR STDERR_REGEX STREQUAL "")
  message(FATAL_ERROR "expect_fail.cmake: -DSTDERR_REGEX=... is required")
endif()

# Snapshot the files that must survive the failed command.
set(snapshots "")
if(DEFINED UNCHANGED AND NOT UNCHANGED STREQUAL "")
  string(REPLACE "|" ";" unchanged "${UNCHANGED}")
  if(NOT DEFINED SNAPSHOT_DIR OR SNAPSHOT_DIR STREQUAL "")
    set(SNAPSHOT_DIR "${CMAKE_CURRENT_BINARY_DIR}/expect_fail_snapshots")
  endif()
  file(REMOVE_RECURSE "${SNAPSHOT_DIR}")
  file(MAKE_DIRECTORY "${SNAPSHOT_DIR}")
  set(i 0)
  foreach(f IN LISTS unchanged)
    if(NOT EXISTS "${f}")
      message(FATAL_ERROR "expect_fail.cmake: UNCHANGED file '${f}' does not exist before the run "
                          "(the fixture that makes it did not run?)")
    endif()
    file(SHA256 "${f}" before_hash)
    configure_file("${f}" "${SNAPSHOT_DIR}/${i}" COPYONLY)
    list(APPEND snapshots "${f}|${SNAPSHOT_DIR}/${i}|${before_hash}")
    math(EXPR i "${i} + 1")
  endforeach()
endif()

string(REPLACE "|" ";" absent "${ABSENT}")
foreach(p IN LISTS absent)
  file(REMOVE_RECURSE "${p}")
endforeach()

include("${CMAKE_CURRENT_LIST_DIR}/run_command.cmake")
sg_run_command(120)

if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the command crashed or timed out (${rc}); it must fail with a message\n${report}")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "the command succeeded; expected a non-zero exit\n${report}")
endif()
if(rc GREATER_EQUAL 128)
  message(FATAL_ERROR "exit code ${rc} looks like a crash (signal); expected a clean failure\n${report}")
endif()
if(DEFINED EXIT_CODE AND NOT EXIT_CODE STREQUAL "" AND NOT rc EQUAL EXIT_CODE)
  message(FATAL_ERROR "exit code ${rc}; expected ${EXIT_CODE}\n${report}")
endif()
if(NOT err MATCHES "${STDERR_REGEX}")
  message(FATAL_ERROR "stderr does not match the regex\n  ${STDERR_REGEX}\n${report}")
endif()
if(DEFINED STDOUT_REGEX AND NOT STDOUT_REGEX STREQUAL "" AND NOT out MATCHES "${STDOUT_REGEX}")
  message(FATAL_ERROR "stdout does not match the regex\n  ${STDOUT_REGEX}\n${report}")
endif()

foreach(entry IN LISTS snapshots)
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 f)
  list(GET parts 1 copy)
  list(GET parts 2 before_hash)
  if(NOT EXISTS "${f}")
    message(FATAL_ERROR "'${f}' was removed by the failed command\n${report}")
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${f}" "${copy}" RESULT_VARIABLE same)
  file(SHA256 "${f}" after_hash)
  if(NOT same EQUAL 0 OR NOT after_hash STREQUAL before_hash)
    message(FATAL_ERROR "'${f}' was changed by the failed command (it must stay byte-identical)\n${report}")
  endif()
endforeach()

foreach(p IN LISTS absent)
  if(EXISTS "${p}")
    message(FATAL_ERROR "'${p}' was created by the failed command (it must be refused before writing)\n${report}")
  endif()
endforeach()

message(STATUS "ok: exit ${rc}, message matches: ${STDERR_REGEX}")
