// libtorch_python: the bindings behind minitorch._C (as torch/csrc/Module.cpp), over libtorch
// (and libc10_cuda when built with CUDA).
#include <Python.h>

#include <string>
#include <vector>

#include "c10/core.h"
#include "pybind11/pybind11.h"

namespace torch {
long checksum(long n);
}

#ifdef MINITORCH_CUDA
extern "C" int minitorch_cuda_scale(int n, float factor, float* out, char* err, int errlen);
// Defined only once native-AOT stage 2 relinked libc10_cuda with its kernels (PyTorch main's torch_cuda).
extern "C" int minitorch_aot_kernels(void) __attribute__((weak));
#endif

static PyObject* checksum(PyObject*, PyObject* args) {
  long n = 0;
  if (!PyArg_ParseTuple(args, "l", &n)) return nullptr;
  return PyLong_FromLong(torch::checksum(n) + MINITORCH_PYBIND11_STUB);
}

static PyObject* cuda_compiled(PyObject*, PyObject*) {
#ifdef MINITORCH_CUDA
  Py_RETURN_TRUE;
#else
  Py_RETURN_FALSE;
#endif
}

static PyObject* run_kernel(PyObject*, PyObject* args) {
  int n = 0;
  float factor = 1.f;
  if (!PyArg_ParseTuple(args, "if", &n, &factor)) return nullptr;
#ifdef MINITORCH_CUDA
  std::vector<float> out(n);
  char err[256] = {0};
  if (minitorch_cuda_scale(n, factor, out.data(), err, sizeof(err)) != 0) {
    PyErr_SetString(PyExc_RuntimeError, err);
    return nullptr;
  }
  PyObject* list = PyList_New(n);
  for (int i = 0; i < n; ++i) PyList_SET_ITEM(list, i, PyFloat_FromDouble(out[i]));
  return list;
#else
  PyErr_SetString(PyExc_RuntimeError, "minitorch was built without CUDA (USE_CUDA=0)");
  return nullptr;
#endif
}

// A planted bug for the sanitizer configurations to catch: nothing checks the index against the table.
static long table[4] = {1, 2, 3, 4};

static PyObject* peek(PyObject*, PyObject* args) {
  long i = 0;
  if (!PyArg_ParseTuple(args, "l", &i)) return nullptr;
  return PyLong_FromLong(table[i]);
}

static PyObject* aot_kernels(PyObject*, PyObject*) {
#ifdef MINITORCH_CUDA
  return PyLong_FromLong(minitorch_aot_kernels ? minitorch_aot_kernels() : 0);
#else
  return PyLong_FromLong(0);
#endif
}

static PyMethodDef methods[] = {
    {"aot_kernels", aot_kernels, METH_NOARGS, "kernels native-AOT stage 2 embedded in libc10_cuda"},
    {"checksum", checksum, METH_VARARGS, "sum over every core translation unit"},
    {"cuda_compiled", cuda_compiled, METH_NOARGS, "whether the CUDA kernel was built"},
    {"peek", peek, METH_VARARGS, "an entry of a table of four, its index unchecked (a planted bug)"},
    {"run_kernel", run_kernel, METH_VARARGS, "scale 0..n-1 by a factor on the GPU"},
    {nullptr, nullptr, 0, nullptr},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "minitorch._C", nullptr, -1, methods};

// The C++ ABI extensions must be built with (torch._C._GLIBCXX_USE_CXX11_ABI, read by cpp_extension).
extern "C" __attribute__((visibility("default"))) PyObject* initModule(void) {
  PyObject* m = PyModule_Create(&module);
  if (m != nullptr) PyModule_AddIntConstant(m, "_GLIBCXX_USE_CXX11_ABI", _GLIBCXX_USE_CXX11_ABI);
  return m;
}
