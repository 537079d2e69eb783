"""minitorch: the demo's Python package (a compiled core, a Python extension, an optional CUDA kernel)."""

from . import _C
from .version import __version__, cuda as _cuda_version, debug as _debug

__all__ = ["__version__", "aot_kernels", "checksum", "cuda_compiled", "run_kernel"]


def checksum(n=50):
    """A number computed by every translation unit of the core library."""
    return _C.checksum(n)


def cuda_compiled():
    return _C.cuda_compiled()


def run_kernel(n=16, factor=2.0):
    """Scale [0, 1, ..., n-1] by `factor` on the GPU; raises RuntimeError without a device."""
    return _C.run_kernel(n, factor)


def aot_kernels():
    """How many kernels native-AOT stage 2 embedded (0: it did not run, or a CPU build)."""
    return _C.aot_kernels()
