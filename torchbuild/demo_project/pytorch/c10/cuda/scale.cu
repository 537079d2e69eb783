// The demo's CUDA kernel: out[i] = i * factor.
#include <cuda_runtime.h>

#include "nccl.h"  // third_party/nccl: cloned by the build at its pinned tag, as PyTorch's NCCL

#include <cstdio>
#include <vector>

__global__ void scale_kernel(float* x, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

static int fail(cudaError_t e, const char* what, char* err, int errlen) {
  std::snprintf(err, errlen, "%s: %s", what, cudaGetErrorString(e));
  return 1;
}

extern "C" int minitorch_cuda_scale(int n, float factor, float* out, char* err, int errlen) {
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i);
  float* dev = nullptr;
  cudaError_t e = cudaMalloc(&dev, n * sizeof(float));
  if (e != cudaSuccess) return fail(e, "cudaMalloc", err, errlen);
  cudaMemcpy(dev, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  scale_kernel<<<(n + 255) / 256, 256>>>(dev, factor, n);
  e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess) {
    cudaFree(dev);
    return fail(e, "kernel", err, errlen);
  }
  cudaMemcpy(out, dev, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dev);
  return 0;
}
