"""A companion of the demo: a C++/CUDA extension built against an installed minitorch the way
pytorch/extension-cpp and torchvision build against torch (minitorch.utils.cpp_extension: BuildExtension,
CppExtension / CUDAExtension). As torchvision's setup.py, CUDA code is built only where a device is
available or FORCE_CUDA=1: without a GPU it silently builds CPU-only."""

import os

from setuptools import setup

from minitorch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension, cuda_is_available

use_cuda = (cuda_is_available() and CUDA_HOME is not None) or os.getenv("FORCE_CUDA", "0") == "1"
sources = ["extension_cpp/csrc/ops.cpp", *(f"extension_cpp/csrc/cpu/{op}.cpp" for op in ("add", "mul", "sub", "shift"))]
sources += ["extension_cpp/csrc/cuda/scale.cu"] if use_cuda else []
extension = (CUDAExtension if use_cuda else CppExtension)(
    "extension_cpp._C", sources, define_macros=[("WITH_CUDA", None)] if use_cuda else [],
    extra_compile_args={"cxx": ["-O2"], "nvcc": ["-O2"]})

setup(
    name="extension_cpp",
    version="0.1.0",
    packages=["extension_cpp"],
    ext_modules=[extension],
    install_requires=["minitorch"],
    cmdclass={"build_ext": BuildExtension},
)
