// TANDEM_CUDA_CHECK(call): every CUDA runtime call goes through it; a failure throws tandem::Error
// naming the call, the error's name and its description. CUDA code only (includes cuda_runtime.h).
#pragma once

#include <cuda_runtime.h>

#include "tandem/base/check.h"

namespace tandem::cuda::detail {

[[noreturn]] void throw_cuda_error(cudaError_t rc, const char* call, const char* file, int line);

inline void check_cuda(cudaError_t rc, const char* call, const char* file, int line) {
  if (rc != cudaSuccess) [[unlikely]] {
    throw_cuda_error(rc, call, file, line);
  }
}

}  // namespace tandem::cuda::detail

// TANDEM_CUDA_CHECK(cudaMalloc(&p, n)) -> "CUDA: cudaMalloc(&p, n) failed: cudaErrorX (text)"
#define TANDEM_CUDA_CHECK(call) \
  ::tandem::cuda::detail::check_cuda((call), #call, __FILE__, __LINE__)
