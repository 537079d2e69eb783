// The extension's CUDA kernel (built only with CUDAExtension).
__global__ void extension_cpp_scale(float* x, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

extern "C" int extension_cpp_cuda_kernels(void) { return 1; }
