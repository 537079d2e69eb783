"""As torch/_utils_internal.py: helpers the build's tools import too, through the copy setup.py makes of
this file in tools/shared/ (PyTorch's setup.py copies it there at every build, as Windows has no links)."""

LOG_LEVEL = "WARNING"
