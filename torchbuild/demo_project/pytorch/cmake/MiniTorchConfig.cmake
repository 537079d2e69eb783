# As torch/share/cmake/Torch/TorchConfig.cmake: where an installed minitorch's headers and libraries are.
get_filename_component(MINITORCH_INSTALL_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../../" ABSOLUTE)
set(MINITORCH_INCLUDE_DIRS "${MINITORCH_INSTALL_PREFIX}/include")
find_library(MINITORCH_LIBRARY torch PATHS "${MINITORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)
