// cuBLAS, cuBLASLt and cuDNN handles: one per (thread, GPU), made on first use, bound to the
// calling thread's current stream of that GPU on every call (a StreamGuard may have changed it),
// with a workspace for cuBLASLt and cuDNN from the GPU's caching allocator. Library errors become
// tandem::Error naming the call and the library's own status text. CUDA code only.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include <cstddef>

#include "tandem/base/check.h"

namespace tandem::ops::cuda {

cublasHandle_t cublas_handle(int device);
cublasLtHandle_t cublaslt_handle(int device);
cudnnHandle_t cudnn_handle(int device);

// Scratch memory on `device` for the current stream, at least `bytes` long, valid until the next
// call on this thread for this device (work queued before then is ordered on the same stream).
void* workspace(int device, std::size_t bytes);

namespace detail {
[[noreturn]] void throw_cublas_error(int status, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn_error(int status, const char* call, const char* file, int line);
}  // namespace detail

}  // namespace tandem::ops::cuda

#define TANDEM_CUBLAS_CHECK(call)                                                              \
  do {                                                                                         \
    const cublasStatus_t tandem_status_ = (call);                                              \
    if (tandem_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                  \
      ::tandem::ops::cuda::detail::throw_cublas_error(static_cast<int>(tandem_status_), #call, \
                                                       __FILE__, __LINE__);                    \
  } while (0)

#define TANDEM_CUDNN_CHECK(call)                                                              \
  do {                                                                                        \
    const cudnnStatus_t tandem_status_ = (call);                                              \
    if (tandem_status_ != CUDNN_STATUS_SUCCESS) [[unlikely]]                                  \
      ::tandem::ops::cuda::detail::throw_cudnn_error(static_cast<int>(tandem_status_), #call, \
                                                      __FILE__, __LINE__);                    \
  } while (0)
