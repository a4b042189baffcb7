// The message of a failed TANDEM_CUDA_CHECK: the call as written, the error's name and text.
#include "tandem/device/cuda/check.h"

namespace tandem::cuda::detail {

void throw_cuda_error(cudaError_t rc, const char* call, const char* file, int line) {
  tandem::detail::throw_error(
      file, line,
      tandem::detail::concat("CUDA: ", call, " failed: ", cudaGetErrorName(rc), " (",
                             cudaGetErrorString(rc), ")"));
}

}  // namespace tandem::cuda::detail
