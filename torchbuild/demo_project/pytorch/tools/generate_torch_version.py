"""As PyTorch's tools/generate_torch_version.py: the version rule, and minitorch/version.py,
written on every build by the always-run CMake target gen_torch_version."""

import argparse
import os
import subprocess
from pathlib import Path

from packaging.version import Version

UNKNOWN = "Unknown"


def get_sha(pytorch_root):
    try:
        if (Path(pytorch_root) / ".git").exists():
            return subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=str(pytorch_root)).decode().strip()
    except Exception:
        pass
    return UNKNOWN


def get_torch_version(sha=None):
    pytorch_root = Path(__file__).absolute().parent.parent
    version = open(str(pytorch_root / "version.txt")).read().strip()
    if os.getenv("PYTORCH_BUILD_VERSION"):
        assert os.getenv("PYTORCH_BUILD_NUMBER") is not None
        build_number = int(os.getenv("PYTORCH_BUILD_NUMBER", ""))
        version = os.getenv("PYTORCH_BUILD_VERSION", "")
        if build_number > 1:
            version += ".post" + str(build_number)
    elif sha != UNKNOWN:
        if sha is None:
            sha = get_sha(pytorch_root)
        version += "+git" + sha[:7]
    Version(version)  # a version packaging cannot read stops the build here
    return version


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Generate minitorch/version.py")
    parser.add_argument("--is-debug", "--is_debug", type=int)
    parser.add_argument("--cuda-version", "--cuda_version", type=str)
    args = parser.parse_args()
    assert args.is_debug is not None
    cuda = None if not args.cuda_version else args.cuda_version
    pytorch_root = Path(__file__).absolute().parent.parent
    sha = get_sha(pytorch_root)
    with open(str(pytorch_root / "minitorch" / "version.py"), "w") as f:
        f.write("from typing import Optional\n\n")
        f.write("__all__ = ['__version__', 'debug', 'cuda', 'git_version']\n")
        f.write("__version__ = '{}'\n".format(get_torch_version(sha)))
        f.write("debug = {}\n".format(repr(bool(args.is_debug))))
        f.write("cuda: Optional[str] = {}\n".format(repr(cuda)))
        f.write("git_version = {}\n".format(repr(sha)))
