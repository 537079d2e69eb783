// One CPU operator of the extension: each unit includes torch/extension.h, as an extension's operator files do.
#include "torch/extension.h"

long extension_cpp_shift(long n) { return n << 1; }
