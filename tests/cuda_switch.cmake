# ctest script: STEPGRAPH_CUDA=OFF turns the CUDA backend off in a build folder an earlier configure
# set up with it (the compiler it found stays in CMake's cache), and ON brings it back. Configure
# only; nothing is compiled.
#   cmake -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -DCUDA_COMPILER=... -DCUDA_ARCHITECTURES=...
#         -P cuda_switch.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
function(configure want)
  execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${WORK_DIR}" -G "${GENERATOR}" ${ARGN}
                          -DSTEPGRAPH_TESTS=OFF -DSTEPGRAPH_INSTALL=OFF "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configure ${ARGN} failed (${rc}):\n${out}\n${err}")
  endif()
  set(flags "${WORK_DIR}/build.ninja")  # Ninja's, else Makefiles' compile flags of the library
  if(NOT EXISTS "${flags}")
    set(flags "${WORK_DIR}/CMakeFiles/stepgraph_lib.dir/flags.make")
  endif()
  file(READ "${flags}" text)
  string(FIND "${text}" "STEPGRAPH_HAVE_CUDA" at)
  if(want AND at EQUAL -1)
    message(FATAL_ERROR "configure ${ARGN}: the CUDA backend is not built\n${out}")
  elseif(NOT want AND NOT at EQUAL -1)
    message(FATAL_ERROR "configure ${ARGN}: the CUDA backend is still built\n${out}")
  endif()
  message(STATUS "configure ${ARGN}: CUDA backend ${want}")
endfunction()
configure(ON "-DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}")
configure(OFF -DSTEPGRAPH_CUDA=OFF)
configure(ON -DSTEPGRAPH_CUDA=ON)
