# `cmake --install build [--prefix DIR]`: the public headers, libstepgraph.a, the stepgraph
# command, the exported stepgraph::stepgraph target (lib/cmake/stepgraph: stepgraphConfig.cmake
# and its version file) and lib/pkgconfig/stepgraph.pc. A program then builds against it with
#   find_package(stepgraph 0.1 REQUIRED)  target_link_libraries(app PRIVATE stepgraph::stepgraph)
# or `pkg-config --cflags --libs stepgraph` (examples/cpp_consumer/).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(sg_cmake_dir "${CMAKE_INSTALL_LIBDIR}/cmake/stepgraph")
set_target_properties(stepgraph_lib PROPERTIES EXPORT_NAME stepgraph)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/stepgraph" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS stepgraph_lib EXPORT stepgraphTargets ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")
install(TARGETS stepgraph_cli RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
install(EXPORT stepgraphTargets NAMESPACE stepgraph:: DESTINATION "${sg_cmake_dir}")

# What the static library's users link besides it: the config file finds the same packages.
set(SG_WITH_CUDA OFF)
if(STEPGRAPH_WITH_CUDA)
  set(SG_WITH_CUDA ON)
endif()
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/stepgraphConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/stepgraphConfig.cmake" INSTALL_DESTINATION "${sg_cmake_dir}")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/stepgraphConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/stepgraphConfig.cmake" "${PROJECT_BINARY_DIR}/stepgraphConfigVersion.cmake"
        DESTINATION "${sg_cmake_dir}")

# pkg-config: the same flags for builds without CMake.
set(SG_PC_CFLAGS "")
set(SG_PC_LIBS "-lz -lpthread")
if(CMAKE_DL_LIBS)
  string(APPEND SG_PC_LIBS " -l${CMAKE_DL_LIBS}")
endif()
if(SG_WITH_CUDA)
  get_target_property(sg_defs stepgraph_lib INTERFACE_COMPILE_DEFINITIONS)
  foreach(d IN LISTS sg_defs)
    string(APPEND SG_PC_CFLAGS " -D${d}")
  endforeach()
  foreach(d IN LISTS CUDAToolkit_INCLUDE_DIRS)  # CUDA 13: include/ and include/cccl
    string(APPEND SG_PC_CFLAGS " -I${d}")
  endforeach()
  set(SG_PC_LIBS "-L${CUDAToolkit_LIBRARY_DIR} -lcublasLt -lcudart_static -lrt ${SG_PC_LIBS}")
endif()
string(STRIP "${SG_PC_CFLAGS}" SG_PC_CFLAGS)
configure_file("${PROJECT_SOURCE_DIR}/cmake/stepgraph.pc.in" "${PROJECT_BINARY_DIR}/stepgraph.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/stepgraph.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
