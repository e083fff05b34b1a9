# NCCL for data-parallel training (src/dist/), included from CMakeLists.txt when the CUDA backend
# is built. It needs nccl.h only: the CUDA toolkit's (/usr/local/cuda/include when NCCL is
# installed there), the system's (Debian/Ubuntu libnccl-dev), PyPI nvidia-nccl-cu13's
# (nvidia/nccl/include; scripts/setup.sh unpacks its headers into .deps/nccl), or -DNCCL_INCLUDE_DIR=.
# libnccl.so.2 is loaded at run time (dlopen), so the build links no NCCL: a machine without one
# says so when data-parallel training starts. Without nccl.h the build goes on without NCCL.
option(STEPGRAPH_NCCL "Data-parallel training through NCCL (when nccl.h is found)" ON)
if(NOT STEPGRAPH_NCCL)
  message(STATUS "stepgraph: NCCL off (STEPGRAPH_NCCL=OFF): data-parallel training is unavailable")
  return()
endif()

include(cmake/PythonSiteDirs.cmake)
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ENV NCCL_INCLUDE_DIR ${CUDAToolkit_INCLUDE_DIRS} "${PROJECT_SOURCE_DIR}/.deps/nccl" ${sg_py_dirs}
  PATH_SUFFIXES include nvidia/nccl/include nvidia/cu13/include)
# Only a hint for the run-time loader (tried after the normal search).
find_library(NCCL_LIBRARY NAMES libnccl.so.2 nccl
  HINTS ${CUDAToolkit_LIBRARY_DIR} "${PROJECT_SOURCE_DIR}/.deps/nccl" ${sg_py_dirs}
  PATH_SUFFIXES lib lib64 nvidia/nccl/lib nvidia/cu13/lib)

set(sg_nccl_version "")
if(NCCL_INCLUDE_DIR)
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" sg_lines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) [0-9]+")
  foreach(l ${sg_lines})
    string(REGEX REPLACE "^#define NCCL_[A-Z]+ ([0-9]+).*" "\\1" v "${l}")
    list(APPEND sg_nccl_version "${v}")
  endforeach()
  list(JOIN sg_nccl_version "." sg_nccl_version)
endif()
if(NOT NCCL_INCLUDE_DIR OR sg_nccl_version VERSION_LESS 2.10)
  message(STATUS "stepgraph: building WITHOUT NCCL (no nccl.h >= 2.10: run scripts/setup.sh or pass "
                 "-DNCCL_INCLUDE_DIR=): data-parallel training says so when asked for")
  return()
endif()
set(sg_nccl_lib_dir "")
if(NCCL_LIBRARY)
  get_filename_component(sg_nccl_lib_dir "${NCCL_LIBRARY}" DIRECTORY)
endif()
message(STATUS "stepgraph: NCCL ${sg_nccl_version} headers (${NCCL_INCLUDE_DIR}); libnccl.so.2 is loaded at run "
               "time (search path, then '${sg_nccl_lib_dir}')")
target_sources(stepgraph_lib PRIVATE src/dist/nccl_api.cpp)
set_source_files_properties(src/dist/nccl_api.cpp src/dist/communicator.cpp PROPERTIES
  COMPILE_OPTIONS "-isystem;${NCCL_INCLUDE_DIR}")
set_source_files_properties(src/dist/nccl_api.cpp PROPERTIES
  COMPILE_DEFINITIONS "STEPGRAPH_NCCL_LIB_DIR=\"${sg_nccl_lib_dir}\"")
target_compile_definitions(stepgraph_lib PRIVATE STEPGRAPH_HAVE_NCCL)
target_link_libraries(stepgraph_lib PRIVATE ${CMAKE_DL_LIBS})
