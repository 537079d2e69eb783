// The extension's ops: calls into minitorch's libc10 through its installed headers (include/torch/extension.h,
// which includes c10/core.h).
#include <Python.h>

#include "torch/extension.h"

long extension_cpp_add(long n);
long extension_cpp_mul(long n);
long extension_cpp_sub(long n);
long extension_cpp_shift(long n);

#ifdef WITH_CUDA
extern "C" int extension_cpp_cuda_kernels(void);
#endif

static PyObject* checksum_twice(PyObject*, PyObject* args) {
  long n = 0;
  if (!PyArg_ParseTuple(args, "l", &n)) return nullptr;
  long c = c10::checksum(n);  // twice the checksum, through the operator units: ((c << 1) + 1 - 1) * 2 / 2
  return PyLong_FromLong(extension_cpp_mul(extension_cpp_sub(extension_cpp_add(extension_cpp_shift(c)))) / 2);
}

static PyObject* cuda_built(PyObject*, PyObject*) {
#ifdef WITH_CUDA
  return PyBool_FromLong(extension_cpp_cuda_kernels() > 0);
#else
  Py_RETURN_FALSE;
#endif
}

static PyMethodDef methods[] = {
    {"checksum_twice", checksum_twice, METH_VARARGS, "twice minitorch's checksum"},
    {"cuda_built", cuda_built, METH_NOARGS, "whether the CUDA kernel was built"},
    {nullptr, nullptr, 0, nullptr},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "extension_cpp._C", nullptr, -1, methods};

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }
