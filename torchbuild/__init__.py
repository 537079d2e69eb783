"""torchbuild: build PyTorch from source, safely and fast."""

__version__ = "0.1.0"
