# CUTLASS's C++ headers for the 3xTF32 dense products (src/backend/cuda/kernels/tf32x3_gemm.cu, used at
# `precision: tf32x3`), included from CMakeLists.txt when the CUDA backend is built. Headers only:
# PyPI nvidia-cutlass ships them (scripts/setup.sh unpacks them into .deps/cutlass/include), or
# -DCUTLASS_INCLUDE_DIR=DIR. Without them tf32x3 builds as plain fp32 and explain says why.
option(STEPGRAPH_CUTLASS "3xTF32 dense products through CUTLASS (when its headers are found)" ON)
if(NOT STEPGRAPH_CUTLASS)
  message(STATUS "stepgraph: CUTLASS off (STEPGRAPH_CUTLASS=OFF): tf32x3 computes as fp32")
  return()
endif()
find_path(CUTLASS_INCLUDE_DIR cutlass/cutlass.h
  HINTS ENV CUTLASS_INCLUDE_DIR "${PROJECT_SOURCE_DIR}/.deps/cutlass/include")
if(NOT CUTLASS_INCLUDE_DIR)
  message(STATUS "stepgraph: no CUTLASS headers (scripts/setup.sh installs them, or -DCUTLASS_INCLUDE_DIR=): tf32x3 computes as fp32")
  return()
endif()
message(STATUS "stepgraph: CUTLASS headers in ${CUTLASS_INCLUDE_DIR} (3xTF32 dense products)")
# Only the one file that instantiates CUTLASS sees its headers (as system headers: no warnings).
set_source_files_properties(src/backend/cuda/kernels/tf32x3_gemm.cu PROPERTIES
  COMPILE_DEFINITIONS STEPGRAPH_HAVE_CUTLASS
  COMPILE_OPTIONS "-isystem;${CUTLASS_INCLUDE_DIR}")
