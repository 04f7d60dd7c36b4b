# The Python package mla (runtime/python/mla; included by Install.cmake):
# pure Python, installed into the purelib directory of the posix_prefix
# scheme under the prefix (lib/python3.11/site-packages for Debian 12's
# python3), with a generated _location.py saying where the shared library
# lies relative to the package. MLA_PYTHON_EXECUTABLE (internal) is the
# interpreter the whole project's Python tests run.
set(MLA_PYTHON "" CACHE FILEPATH
    "python3 for the Python package's install dir and tests (default: /usr/bin/python3, else python3)")
set(MLA_PYTHON_EXE "${MLA_PYTHON}")
if(NOT MLA_PYTHON_EXE)
  if(EXISTS /usr/bin/python3)
    set(MLA_PYTHON_EXE /usr/bin/python3)
  else()
    find_program(MLA_PYTHON_FOUND python3)
    if(MLA_PYTHON_FOUND)
      set(MLA_PYTHON_EXE "${MLA_PYTHON_FOUND}")
    endif()
  endif()
endif()
set(MLA_PYTHON_EXECUTABLE "${MLA_PYTHON_EXE}" CACHE INTERNAL "")
if(MLA_PYTHON_EXE AND NOT DEFINED MLA_PYTHON_INSTALL_DIR)
  execute_process(
    COMMAND "${MLA_PYTHON_EXE}" -c
      "import sysconfig; print(sysconfig.get_path('purelib', 'posix_prefix', {'base': '', 'platbase': ''}).lstrip('/'))"
    OUTPUT_VARIABLE _mla_purelib OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _mla_purelib_status)
  if(_mla_purelib_status EQUAL 0 AND _mla_purelib)
    set(MLA_PYTHON_INSTALL_DIR "${_mla_purelib}" CACHE STRING
        "Where the Python package mla is installed, relative to the prefix")
  endif()
endif()
if(MLA_PYTHON_INSTALL_DIR)
  set(MLA_RUNTIME_SONAME
      "${CMAKE_SHARED_LIBRARY_PREFIX}mla_runtime${CMAKE_SHARED_LIBRARY_SUFFIX}.${MLA_RUNTIME_VERSION_MAJOR}")
  file(RELATIVE_PATH MLA_PYTHON_LIBRARY "/prefix/${MLA_PYTHON_INSTALL_DIR}/mla"
       "/prefix/${CMAKE_INSTALL_LIBDIR}/${MLA_RUNTIME_SONAME}")
  configure_file("${CMAKE_CURRENT_SOURCE_DIR}/cmake/_location.py.in"
                 "${CMAKE_CURRENT_BINARY_DIR}/python/mla/_location.py" @ONLY)
  install(DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}/python/mla"
    DESTINATION ${MLA_PYTHON_INSTALL_DIR}
    FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
  install(FILES "${CMAKE_CURRENT_BINARY_DIR}/python/mla/_location.py"
    DESTINATION ${MLA_PYTHON_INSTALL_DIR}/mla)
else()
  message(STATUS "mla: no python3 found: the Python package is not installed")
endif()
