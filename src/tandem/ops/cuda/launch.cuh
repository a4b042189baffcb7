// What every CUDA kernel file of ops/cuda shares: the checks on operands (all on one GPU, one
// dtype), the stream work goes on (the calling thread's current stream of the operands' GPU, with
// that GPU made current for the scope), grid sizes, typed pointers, and the launch check.
// For ops/cuda only: its kernels (nvcc) and its host files calling cuBLAS and cuDNN.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "tandem/base/check.h"
#include "tandem/device/cuda/check.h"
#include "tandem/device/cuda/stream.h"
#include "tandem/tensor/factories.h"
#include "tandem/tensor/tensor.h"

namespace tandem::ops::cuda {

// Every defined tensor must be on the GPU of the first one, and (unless mixed_dtypes) of its dtype.
void check_gpu_operands(const char* op, std::initializer_list<const Tensor*> tensors,
                        bool mixed_dtypes = false);

// A contiguous tensor with the values of t (t itself when it already is), on t's GPU.
Tensor contig(const Tensor& t);

inline Tensor new_like(const Shape& shape, const Tensor& like) {
  return empty(shape, {.dtype = like.dtype(), .device = like.device()});
}

// The GPU of t made current for the scope, and the stream to queue on.
class OnDevice {
 public:
  explicit OnDevice(const Tensor& t)
      : device_(t.device().index),
        guard_(device_),
        stream_(::tandem::cuda::current_stream(device_)) {}
  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }

 private:
  int device_;
  ::tandem::cuda::DeviceGuard guard_;
  cudaStream_t stream_;
};

template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

constexpr int kThreads = 256;

// Blocks for n elements with kThreads threads each, grid-stride loops covering the rest.
inline unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

// After every launch: a bad configuration is reported now, naming the kernel.
#define TANDEM_CUDA_LAUNCHED(name) TANDEM_CUDA_CHECK(cudaGetLastError())

// for (i = global thread index; i < n; i += grid size)
#define TANDEM_GRID_LOOP(i, n)                                                           \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       i < (n); i += static_cast<std::int64_t>(blockDim.x) * gridDim.x)

}  // namespace tandem::ops::cuda
