# cuDNN for the CUDA backend's convolutions (src/backend/cuda/libs/cudnn_conv.cpp), included from
# CMakeLists.txt when the CUDA backend is built. It needs headers only:
#   - the cuDNN frontend's C++ headers: PyPI `nvidia-cudnn-frontend` installs them under
#     <site-packages>/include (scripts/setup.sh puts them in .deps/cudnn-frontend/include);
#   - cudnn.h (cuDNN 9): the CUDA toolkit's, or PyPI `nvidia-cudnn-cu13`'s (nvidia/cudnn/include).
# libcudnn.so.9 is loaded at run time (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING), so the build links
# no cuDNN library, and a machine without one says so when a program with a convolution is
# compiled for the GPU. Hints: -DCUDNN_FRONTEND_INCLUDE_DIR=DIR, -DCUDNN_INCLUDE_DIR=DIR.
if(NOT STEPGRAPH_CUDNN)
  message(STATUS "stepgraph: cuDNN off (STEPGRAPH_CUDNN=OFF): convolutions run on the CPU backend only")
  return()
endif()

include(cmake/PythonSiteDirs.cmake)
set(sg_deps "${PROJECT_SOURCE_DIR}/.deps/cudnn-frontend" "${PROJECT_SOURCE_DIR}/.deps/cudnn")

find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
  HINTS ENV CUDNN_FRONTEND_INCLUDE_DIR ${sg_deps} ${sg_py_dirs}
  PATH_SUFFIXES include)
find_path(CUDNN_INCLUDE_DIR cudnn.h
  HINTS ENV CUDNN_INCLUDE_DIR ${CUDAToolkit_INCLUDE_DIRS} ${sg_deps} ${sg_py_dirs}
  PATH_SUFFIXES include nvidia/cudnn/include nvidia/cu13/include)
# Only a hint for the run-time loader (tried after the normal search): a configure on the GPU
# machine records where that machine's libcudnn.so.9 is.
find_library(CUDNN_LIBRARY NAMES libcudnn.so.9 cudnn
  HINTS ${CUDAToolkit_LIBRARY_DIR} ${sg_deps} ${sg_py_dirs}
  PATH_SUFFIXES lib lib64 nvidia/cudnn/lib nvidia/cu13/lib)

set(sg_cudnn_major "")
if(CUDNN_INCLUDE_DIR)
  foreach(f cudnn_version.h cudnn.h)
    if(EXISTS "${CUDNN_INCLUDE_DIR}/${f}" AND NOT sg_cudnn_major)
      file(STRINGS "${CUDNN_INCLUDE_DIR}/${f}" sg_line REGEX "^#define CUDNN_MAJOR [0-9]+")
      string(REGEX REPLACE "^#define CUDNN_MAJOR ([0-9]+).*" "\\1" sg_cudnn_major "${sg_line}")
    endif()
  endforeach()
endif()

if(NOT CUDNN_FRONTEND_INCLUDE_DIR OR NOT CUDNN_INCLUDE_DIR OR NOT sg_cudnn_major STREQUAL "9")
  set(sg_why "")
  if(NOT CUDNN_FRONTEND_INCLUDE_DIR)
    list(APPEND sg_why "no cudnn_frontend.h (pip install nvidia-cudnn-frontend, or -DCUDNN_FRONTEND_INCLUDE_DIR=)")
  endif()
  if(NOT CUDNN_INCLUDE_DIR)
    list(APPEND sg_why "no cudnn.h (pip install nvidia-cudnn-cu13, or -DCUDNN_INCLUDE_DIR=)")
  elseif(NOT sg_cudnn_major STREQUAL "9")
    list(APPEND sg_why "cudnn.h in ${CUDNN_INCLUDE_DIR} is not cuDNN 9 (major '${sg_cudnn_major}')")
  endif()
  list(JOIN sg_why "; " sg_why)
  message(STATUS "stepgraph: building WITHOUT cuDNN: ${sg_why}. Convolutions are refused on the CUDA "
                 "backend (they run with --device cpu); scripts/setup.sh installs the headers")
  return()
endif()

set(sg_fe_version "")
if(EXISTS "${CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend_version.h")
  file(STRINGS "${CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend_version.h" sg_lines
       REGEX "^#define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION [0-9]+")
  foreach(l ${sg_lines})
    string(REGEX REPLACE "^#define CUDNN_FRONTEND_[A-Z]+_VERSION ([0-9]+).*" "\\1" v "${l}")
    list(APPEND sg_fe_version "${v}")
  endforeach()
  list(JOIN sg_fe_version "." sg_fe_version)
endif()
set(sg_lib_dir "")
if(CUDNN_LIBRARY)
  get_filename_component(sg_lib_dir "${CUDNN_LIBRARY}" DIRECTORY)
endif()
message(STATUS "stepgraph: cuDNN frontend ${sg_fe_version} (${CUDNN_FRONTEND_INCLUDE_DIR}), cudnn.h 9 "
               "(${CUDNN_INCLUDE_DIR}); libcudnn.so.9 is loaded at run time (search path, then "
               "'${sg_lib_dir}')")

# The frontend is heavy: only its own translation units see it, through -isystem (its
# headers are not ours to warn about). Its JSON library (graph serialization, for the plan cache)
# is its bundled nlohmann-json, kept in a namespace of its own (cudnn_graphs.h) apart from the
# project's.
set(sg_cudnn_sources src/backend/cuda/libs/cudnn_conv.cpp src/backend/cuda/libs/cudnn_plans.cpp src/backend/cuda/libs/cudnn_sdpa.cpp
                      src/backend/cuda/libs/cudnn_dense.cpp)
target_sources(stepgraph_lib PRIVATE ${sg_cudnn_sources})
set_source_files_properties(${sg_cudnn_sources} PROPERTIES
  COMPILE_OPTIONS "-isystem;${CUDNN_FRONTEND_INCLUDE_DIR};-isystem;${CUDNN_INCLUDE_DIR}"
  COMPILE_DEFINITIONS "NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING;STEPGRAPH_CUDNN_LIB_DIR=\"${sg_lib_dir}\";STEPGRAPH_CUDART_LIB_DIR=\"${CUDAToolkit_LIBRARY_DIR}\"")
target_compile_definitions(stepgraph_lib PUBLIC STEPGRAPH_HAVE_CUDNN)
target_link_libraries(stepgraph_lib PRIVATE ${CMAKE_DL_LIBS})
