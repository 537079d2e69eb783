"""As PyTorch's tools/build_pytorch_libs.py: NCCL is cloned at its pinned tag for a CUDA build,
then CMake configures (when needed), BUILD_CUSTOM_STEP runs (PyTorch's CI sets it to build FlashAttention
with fewer jobs first), and the install target builds."""

import os
import subprocess

from .optional_submodules import checkout_nccl
from .setup_helpers.env import check_env_flag, check_negative_env_flag


def build_pytorch(version, build_python, rerun_cmake, cmake_only, cmake):
    my_env = os.environ.copy()
    if not check_negative_env_flag("USE_CUDA") and not check_negative_env_flag("USE_NCCL") \
            and not check_env_flag("USE_SYSTEM_NCCL"):
        checkout_nccl()
    build_test = not check_negative_env_flag("BUILD_TEST")
    cmake.generate(version, build_python, build_test, my_env, rerun_cmake)
    if cmake_only:
        return
    build_custom_step = os.getenv("BUILD_CUSTOM_STEP")
    if build_custom_step:
        try:
            output = subprocess.check_output(build_custom_step, shell=True, stderr=subprocess.STDOUT, text=True)
            print("Command output:")
            print(output)
        except subprocess.CalledProcessError as e:
            print("Command failed with return code:", e.returncode)
            print("Output (stdout and stderr):")
            print(e.output)
            raise
    cmake.build(my_env)
