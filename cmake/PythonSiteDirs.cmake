# sg_py_dirs: every Python site directory (PYTHONPATH included), where pip put the wheels that
# carry headers and libraries (nvidia-cudnn-frontend, nvidia-cudnn-cu13, nvidia-nccl-cu13): a
# hint list for find_path/find_library in FindCudnnFrontend.cmake and FindNccl.cmake.
if(NOT DEFINED sg_py_dirs)
  set(sg_py_dirs "")
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    execute_process(
      COMMAND "${Python3_EXECUTABLE}" -c
        "import site, sys, sysconfig; d = [p for p in sys.path if p] + site.getsitepackages() + [site.getusersitepackages(), sysconfig.get_paths()['purelib']]; print(';'.join(dict.fromkeys(d)))"
      OUTPUT_VARIABLE sg_py_dirs OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
endif()
