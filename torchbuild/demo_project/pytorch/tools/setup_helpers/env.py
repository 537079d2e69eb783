"""As PyTorch's tools/setup_helpers/env.py: the fixed build folder and the build type
(CMAKE_BUILD_TYPE from the environment beats DEBUG / REL_WITH_DEB_INFO)."""

import os

BUILD_DIR = "build"


def check_env_flag(name, default=""):
    return os.getenv(name, default).upper() in ["ON", "1", "YES", "TRUE", "Y"]


def check_negative_env_flag(name, default=""):
    return os.getenv(name, default).upper() in ["OFF", "0", "NO", "FALSE", "N"]


class BuildType:
    def __init__(self, cmake_build_type_env=None):
        if cmake_build_type_env is not None:
            self.build_type_string = cmake_build_type_env
        elif os.getenv("CMAKE_BUILD_TYPE"):
            self.build_type_string = os.environ["CMAKE_BUILD_TYPE"]
        elif check_env_flag("DEBUG"):
            self.build_type_string = "Debug"
        elif check_env_flag("REL_WITH_DEB_INFO"):
            self.build_type_string = "RelWithDebInfo"
        else:
            self.build_type_string = "Release"

    def is_debug(self):
        return self.build_type_string == "Debug"

    def is_rel_with_deb_info(self):
        return self.build_type_string == "RelWithDebInfo"


build_type = BuildType()
