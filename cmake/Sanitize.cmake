# Sanitizer and fuzzer builds of the host code (C++ only; nvcc's device code is left as it is).
#
#   -DSTEPGRAPH_SANITIZE=ON  ASan + UBSan on everything (compile and link), any compiler that has them.
#   -DSTEPGRAPH_FUZZ=ON      clang only: the library is also compiled with -fsanitize=fuzzer-no-link
#                            (coverage for libFuzzer) and the targets in tests/fuzz/ are built. It
#                            implies STEPGRAPH_SANITIZE: a fuzzer without ASan misses most bugs.
#                            The tests still link normally, so one build folder serves both.
#
# Both are OFF by default; the normal gcc (+ nvcc) build is not touched.
option(STEPGRAPH_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(STEPGRAPH_FUZZ "Build the libFuzzer targets in tests/fuzz (clang only; implies STEPGRAPH_SANITIZE)" OFF)

if(STEPGRAPH_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "stepgraph: STEPGRAPH_FUZZ=ON needs clang (libFuzzer), but the C++ compiler is "
                        "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER}; configure with "
                        "-DCMAKE_CXX_COMPILER=clang++ (see scripts/fuzz.sh)")
  endif()
  set(STEPGRAPH_SANITIZE ON CACHE BOOL "Build with AddressSanitizer and UndefinedBehaviorSanitizer" FORCE)
endif()

if(STEPGRAPH_SANITIZE)
  # no-recover: a UBSan report fails the test or the fuzz run instead of scrolling by.
  set(sg_sanitize_flags -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${sg_sanitize_flags}>")
  add_link_options(${sg_sanitize_flags})
  message(STATUS "stepgraph: ASan + UBSan build")
endif()
if(STEPGRAPH_FUZZ)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>")
  # The CPU compute kernels go without coverage (ASan and UBSan stay): no fuzz target reaches
  # them, and a counter and compare hook in every inner loop made the tests 2.4x slower.
  set_source_files_properties(
    src/backend/cpu/cpu_kernels.cpp
    src/backend/cpu/conv_kernels.cpp
    src/backend/cpu/sequence_kernels.cpp
    src/backend/cpu/pinn_kernels.cpp
    PROPERTIES COMPILE_OPTIONS -fno-sanitize=fuzzer-no-link)
  message(STATUS "stepgraph: libFuzzer targets in tests/fuzz")
endif()
