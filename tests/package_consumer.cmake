# ctest script: `cmake --install` this build into a fresh prefix, then build and run
# examples/cpp_consumer against it twice, through find_package(stepgraph) and through pkg-config
# (skipped, and said, without pkg-config), and a third time from the sources through FetchContent
# (a CPU-only build of the library inside the consumer's); then the README's C++ example through
# pkg-config; and examples/custom_op, a user-defined op with its CUDA kernel, through find_package.
# Also checks the installed `stepgraph --version`.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DCXX=... -DGENERATOR=... [-DCUDA_ROOT=...] [-DCUDA_ARCHITECTURES=...]
#         -P package_consumer.cmake
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok\n${out}")
  set(last_out "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
run("cmake --install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(f include/stepgraph/trainer.h lib/libstepgraph.a bin/stepgraph lib/cmake/stepgraph/stepgraphConfig.cmake
          lib/cmake/stepgraph/stepgraphConfigVersion.cmake lib/cmake/stepgraph/stepgraphTargets.cmake
          lib/pkgconfig/stepgraph.pc)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "cmake --install did not install ${f}")
  endif()
endforeach()
run("installed stepgraph --version" "${prefix}/bin/stepgraph" --version)
if(NOT last_out MATCHES "^stepgraph [0-9]+\\.[0-9]+\\.[0-9]+ ")
  message(FATAL_ERROR "installed stepgraph --version printed: ${last_out}")
endif()

set(cuda_args "")
if(CUDA_ROOT)
  set(cuda_args "-DCUDAToolkit_ROOT=${CUDA_ROOT}")
endif()
run("configure examples/cpp_consumer (find_package)" "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/examples/cpp_consumer"
    -B "${WORK_DIR}/consumer" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_COMPILER=${CXX}"
    "-DCMAKE_PREFIX_PATH=${prefix}" ${cuda_args})
run("build examples/cpp_consumer" "${CMAKE_COMMAND}" --build "${WORK_DIR}/consumer")
run("run train_digits (find_package)" "${WORK_DIR}/consumer/train_digits")

# A user-defined op (a CUDA kernel with a CUDA build) built against the installed package.
set(arch_args "")
if(CUDA_ARCHITECTURES)
  set(arch_args "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}")
endif()
run("configure examples/custom_op (find_package)" "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/examples/custom_op"
    -B "${WORK_DIR}/custom_op" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_COMPILER=${CXX}"
    "-DCMAKE_PREFIX_PATH=${prefix}" ${cuda_args} ${arch_args})
run("build examples/custom_op" "${CMAKE_COMMAND}" --build "${WORK_DIR}/custom_op")
run("run snake_op (a user-defined op)" "${WORK_DIR}/custom_op/snake_op")

run("configure examples/cpp_consumer (FetchContent, CPU only)" "${CMAKE_COMMAND}"
    -S "${SOURCE_DIR}/examples/cpp_consumer" -B "${WORK_DIR}/fetched" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_CXX_COMPILER=${CXX}" "-DSTEPGRAPH_SOURCE_DIR=${SOURCE_DIR}" -DSTEPGRAPH_CUDA=OFF)
run("build examples/cpp_consumer (FetchContent)" "${CMAKE_COMMAND}" --build "${WORK_DIR}/fetched" --target train_digits)
run("run train_digits (FetchContent)" "${WORK_DIR}/fetched/train_digits")

find_program(PKG_CONFIG pkg-config)
if(NOT PKG_CONFIG)
  message(STATUS "SKIPPED the pkg-config build: no pkg-config on this machine")
  return()
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -E env "PKG_CONFIG_PATH=${prefix}/lib/pkgconfig"
                        "${PKG_CONFIG}" --cflags --libs stepgraph
                RESULT_VARIABLE rc OUTPUT_VARIABLE flags ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs stepgraph failed:\n${err}")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
run("build with pkg-config's flags" "${CXX}" -O1 "${SOURCE_DIR}/examples/cpp_consumer/main.cpp" ${flags}
    -o "${WORK_DIR}/train_digits_pc")
run("run train_digits (pkg-config)" "${WORK_DIR}/train_digits_pc")

# The README's C++ example, as written there, built the same way and run.
file(READ "${SOURCE_DIR}/README.md" readme)
string(REGEX MATCH "```cpp\n(.*)\n```\n\n## How fast" block "${readme}")
if(NOT CMAKE_MATCH_1)
  message(FATAL_ERROR "README.md: no C++ example (a ```cpp block before \"## How fast\")")
endif()
file(WRITE "${WORK_DIR}/readme_example.cpp" "${CMAKE_MATCH_1}\n")
run("build the README's C++ example" "${CXX}" -O1 "${WORK_DIR}/readme_example.cpp" ${flags} -o "${WORK_DIR}/readme_example")
run("run the README's C++ example" "${WORK_DIR}/readme_example")
