# Shared by expect_ok.cmake and expect_fail.cmake: runs -DCMD (arguments separated by '|') in
# WORKING_DIRECTORY with TIMEOUT and sets rc, out, err and report (all of it, for messages).
macro(sg_run_command default_timeout)
  if(NOT DEFINED TIMEOUT)
    set(TIMEOUT ${default_timeout})
  endif()
  if(NOT DEFINED WORKING_DIRECTORY OR WORKING_DIRECTORY STREQUAL "")
    set(WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
  string(REPLACE "|" ";" command "${CMD}")
  execute_process(
    COMMAND ${command}
    WORKING_DIRECTORY "${WORKING_DIRECTORY}"
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err
    TIMEOUT ${TIMEOUT})
  string(REPLACE ";" " " shown "${command}")
  set(report "command: ${shown}\nexit: ${rc}\n--- stdout ---\n${out}\n--- stderr ---\n${err}")
endmacro()
