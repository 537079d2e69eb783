"""extension_cpp: ops over minitorch's core (loaded first, as `import torch` loads libc10 for an extension)."""

import minitorch  # noqa: F401

from . import _C

__all__ = ["checksum_twice", "cuda_built"]


def checksum_twice(n=50):
    """Twice minitorch's checksum, computed by the extension through libc10."""
    return _C.checksum_twice(n)


def cuda_built():
    """Whether the extension holds its CUDA kernel."""
    return _C.cuda_built()
