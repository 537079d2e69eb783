/* As torch/csrc/stub.c: the extension module is a stub; everything lives in libtorch_python. */
#include <Python.h>

extern PyObject* initModule(void);

PyMODINIT_FUNC PyInit__C(void) { return initModule(); }
