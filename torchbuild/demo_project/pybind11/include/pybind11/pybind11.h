// Stands in for pybind11 (a header-only submodule, as in PyTorch).
#pragma once
#define MINITORCH_PYBIND11_STUB 0
