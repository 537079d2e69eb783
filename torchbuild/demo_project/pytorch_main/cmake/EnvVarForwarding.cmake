# As PyTorch's cmake/EnvVarForwarding.cmake (2.14 and main): the environment reaches CMake here, at every
# configure, not through setup.py's -D flags.
#   - BUILD_*, USE_*, CMAKE_* (and *EXITCODE) OVERRIDE the cache when set; unsetting one KEEPS the cached
#     value (export USE_X=0 to turn it off);
#   - the passthrough list only FILLS values not cached yet;
#   - DEBUG / REL_WITH_DEB_INFO / MAX_JOBS are pyproject.toml's ([[tool.scikit-build.overrides]], env);
#   - CMAKE_FRESH, CMAKE_ONLY and USE_NINJA are gone; USE_NIGHTLY is an error.

set(_ENV_PASSTHROUGH BLAS WERROR TORCH_CUDA_ARCH_LIST CUDA_NVCC_EXECUTABLE CUDA_HOST_COMPILER)
set(_LOW_PRIORITY_ALIASES "CUDAHOSTCXX=CUDA_HOST_COMPILER" "CUDACXX=CUDA_NVCC_EXECUTABLE")

foreach(_var IN LISTS _ENV_PASSTHROUGH)
  if(DEFINED ENV{${_var}} AND NOT DEFINED ${_var})
    set(${_var} "$ENV{${_var}}" CACHE STRING "From env ${_var}" FORCE)
  endif()
endforeach()

function(_envfwd_apply _name _value)
  if(NOT DEFINED ${_name} OR NOT "${${_name}}" STREQUAL "${_value}")
    set(${_name} "${_value}" CACHE STRING "From environment" FORCE)
  endif()
endfunction()

# CMake cannot list the environment: Python prints one escaped _envfwd_apply() per selected variable.
set(_envfwd_script [==[
import os, re, sys
select = re.compile(r"^(BUILD_|USE_|CMAKE_)|(EXITCODE|EXITCODE__TRYRUN_OUTPUT)$")
def q(s):
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
sys.stdout.write("\n".join('_envfwd_apply("%s" "%s")' % (q(k), q(v)) for k, v in os.environ.items() if select.search(k)))
]==])
execute_process(COMMAND "${Python_EXECUTABLE}" -c "${_envfwd_script}"
                OUTPUT_VARIABLE _envfwd_code RESULT_VARIABLE _envfwd_rc)
if(NOT _envfwd_rc EQUAL 0)
  message(FATAL_ERROR "EnvVarForwarding: failed to read the environment via Python (exit ${_envfwd_rc}).")
endif()
cmake_language(EVAL CODE "${_envfwd_code}")

foreach(_alias IN LISTS _LOW_PRIORITY_ALIASES)
  string(REPLACE "=" ";" _parts "${_alias}")
  list(GET _parts 0 _env_name)
  list(GET _parts 1 _cmake_name)
  if(DEFINED ENV{${_env_name}} AND NOT DEFINED ${_cmake_name})
    set(${_cmake_name} "$ENV{${_env_name}}" CACHE STRING "From env alias ${_env_name}" FORCE)
  endif()
endforeach()

if(BUILD_PYTHON_ONLY)
  set(BUILD_LIBTORCHLESS ON CACHE BOOL "Build without libtorch" FORCE)
endif()
if(USE_NIGHTLY)
  message(FATAL_ERROR "USE_NIGHTLY is not supported with the scikit-build-core build system. "
                      "Use 'python tools/nightly.py checkout' instead.")
endif()
if(BUILD_LIBTORCH_WHL AND BUILD_PYTHON_ONLY)
  message(FATAL_ERROR "Conflict: 'BUILD_LIBTORCH_WHL' and 'BUILD_PYTHON_ONLY' can't both be 1. Set one to 0 and rerun.")
endif()
