# Runs a command that must succeed, for the CLI's end-to-end tests, and checks what it printed
# and wrote:
#
#   cmake -DCMD=<program>|<arg>|<arg>...       the command; arguments separated by '|'
#         [-DCLEAN_DIR=<dir>]                  removed before the run (a fresh --out folder)
#         [-DSTDOUT_REGEX=<regex>]             stdout must match
#         [-DSUMMARY_KEYS=<key>|<key>...]      the last stdout line is a JSON object with these keys
#         [-DSUMMARY_EQUAL=<key>=<v>|...]      ... whose values equal these
#         [-DSUMMARY_MIN=<key>=<number>|...]   ... numbers >= these
#         [-DSUMMARY_MAX=<key>=<number>|...]   ... numbers <= these
#         [-DFILES_EXIST=<file>|<file>...]     non-empty files that must exist afterwards
#         [-DWORKING_DIRECTORY=<dir>] [-DTIMEOUT=<seconds>]
#         -P expect_ok.cmake
cmake_minimum_required(VERSION 3.19)  # string(JSON)

if(NOT DEFINED CMD OR CMD STREQUAL "")
  message(FATAL_ERROR "expect_ok.cmake: -DCMD=... is required")
endif()
if(DEFINED CLEAN_DIR AND NOT CLEAN_DIR STREQUAL "")
  file(REMOVE_RECURSE "${CLEAN_DIR}")
endif()

include("${CMAKE_CURRENT_LIST_DIR}/run_command.cmake")
sg_run_command(300)
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "the command failed\n${report}")
endif()
if(DEFINED STDOUT_REGEX AND NOT STDOUT_REGEX STREQUAL "" AND NOT out MATCHES "${STDOUT_REGEX}")
  message(FATAL_ERROR "stdout does not match the regex\n  ${STDOUT_REGEX}\n${report}")
endif()

# The summary: the last non-empty line of stdout.
string(STRIP "${out}" stripped)
string(FIND "${stripped}" "\n" nl REVERSE)
if(nl EQUAL -1)
  set(last "${stripped}")
else()
  math(EXPR start "${nl} + 1")
  string(SUBSTRING "${stripped}" ${start} -1 last)
endif()

function(summary_value key result)
  string(JSON value ERROR_VARIABLE json_error GET "${last}" "${key}")
  if(json_error)
    message(FATAL_ERROR "the last line has no \"${key}\" (${json_error})\n  last line: ${last}\n${report}")
  endif()
  set(${result} "${value}" PARENT_SCOPE)
endfunction()

if(DEFINED SUMMARY_KEYS AND NOT SUMMARY_KEYS STREQUAL "")
  string(JSON type ERROR_VARIABLE json_error TYPE "${last}")
  if(json_error OR NOT type STREQUAL "OBJECT")
    message(FATAL_ERROR "the last line is not a JSON object\n  last line: ${last}\n${report}")
  endif()
  string(REPLACE "|" ";" keys "${SUMMARY_KEYS}")
  foreach(key IN LISTS keys)
    summary_value("${key}" value)
  endforeach()
endif()

foreach(kind EQUAL MIN MAX)
  if(NOT DEFINED SUMMARY_${kind} OR SUMMARY_${kind} STREQUAL "")
    continue()
  endif()
  string(REPLACE "|" ";" checks "${SUMMARY_${kind}}")
  foreach(check IN LISTS checks)
    if(NOT check MATCHES "^([^=]+)=(.*)$")
      message(FATAL_ERROR "expect_ok.cmake: bad SUMMARY_${kind} entry '${check}' (key=value)")
    endif()
    set(key "${CMAKE_MATCH_1}")
    set(want "${CMAKE_MATCH_2}")
    summary_value("${key}" value)
    if(kind STREQUAL "EQUAL" AND NOT value STREQUAL want)
      message(FATAL_ERROR "\"${key}\" is ${value}; expected ${want}\n  last line: ${last}\n${report}")
    endif()
    if(kind STREQUAL "MIN" AND NOT value GREATER_EQUAL want)
      message(FATAL_ERROR "\"${key}\" is ${value}; expected >= ${want}\n  last line: ${last}\n${report}")
    endif()
    if(kind STREQUAL "MAX" AND NOT value LESS_EQUAL want)
      message(FATAL_ERROR "\"${key}\" is ${value}; expected <= ${want}\n  last line: ${last}\n${report}")
    endif()
  endforeach()
endforeach()

if(DEFINED FILES_EXIST AND NOT FILES_EXIST STREQUAL "")
  string(REPLACE "|" ";" files "${FILES_EXIST}")
  foreach(f IN LISTS files)
    if(NOT EXISTS "${f}")
      message(FATAL_ERROR "'${f}' does not exist after the run\n${report}")
    endif()
    file(SIZE "${f}" size)
    if(size EQUAL 0)
      message(FATAL_ERROR "'${f}' is empty after the run\n${report}")
    endif()
  endforeach()
endif()

message(STATUS "ok: ${last}")
