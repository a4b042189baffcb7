// Per-thread, per-GPU library handles bound to the current stream, the workspace, and the
// libraries' errors as tandem::Error (see handles.h).
#include "tandem/ops/cuda/handles.h"

#include <cuda_runtime.h>

#include <map>
#include <utility>

#include "tandem/device/cuda/check.h"
#include "tandem/device/cuda/stream.h"
#include "tandem/tensor/factories.h"
#include "tandem/tensor/tensor.h"

namespace tandem::ops::cuda {
namespace {

// Handles live as long as their thread: destroyed at thread exit, never while in use.
struct ThreadHandles {
  std::map<int, cublasHandle_t> cublas;
  std::map<int, cublasLtHandle_t> cublaslt;
  std::map<int, cudnnHandle_t> cudnn;
  std::map<std::pair<int, cudaStream_t>, Tensor> workspaces;
  ~ThreadHandles() {
    for (auto& [device, h] : cublas) (void)cublasDestroy(h);
    for (auto& [device, h] : cublaslt) (void)cublasLtDestroy(h);
    for (auto& [device, h] : cudnn) (void)cudnnDestroy(h);
  }
};

ThreadHandles& handles() {
  thread_local ThreadHandles h;
  return h;
}

}  // namespace

cublasHandle_t cublas_handle(int device) {
  const ::tandem::cuda::DeviceGuard guard(device);
  auto& map = handles().cublas;
  auto it = map.find(device);
  if (it == map.end()) {
    cublasHandle_t h = nullptr;
    TANDEM_CUBLAS_CHECK(cublasCreate(&h));
    // Results must not depend on the run: no atomics-based reductions inside cuBLAS.
    TANDEM_CUBLAS_CHECK(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED));
    it = map.emplace(device, h).first;
  }
  TANDEM_CUBLAS_CHECK(cublasSetStream(it->second, ::tandem::cuda::current_stream(device)));
  return it->second;
}

cublasLtHandle_t cublaslt_handle(int device) {
  const ::tandem::cuda::DeviceGuard guard(device);
  auto& map = handles().cublaslt;
  auto it = map.find(device);
  if (it == map.end()) {
    cublasLtHandle_t h = nullptr;
    TANDEM_CUBLAS_CHECK(cublasLtCreate(&h));
    it = map.emplace(device, h).first;
  }
  return it->second;  // cuBLASLt takes the stream per call
}

cudnnHandle_t cudnn_handle(int device) {
  const ::tandem::cuda::DeviceGuard guard(device);
  auto& map = handles().cudnn;
  auto it = map.find(device);
  if (it == map.end()) {
    cudnnHandle_t h = nullptr;
    TANDEM_CUDNN_CHECK(cudnnCreate(&h));
    it = map.emplace(device, h).first;
  }
  TANDEM_CUDNN_CHECK(cudnnSetStream(it->second, ::tandem::cuda::current_stream(device)));
  return it->second;
}

void* workspace(int device, std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const cudaStream_t stream = ::tandem::cuda::current_stream(device);
  Tensor& w = handles().workspaces[{device, stream}];
  if (!w.defined() || w.storage()->nbytes() < bytes) {
    // Freed blocks go back to the stream's cache, reused only by work queued after this point.
    w = empty({static_cast<std::int64_t>(bytes)},
              {.dtype = DType::UInt8, .device = Device(DeviceType::CUDA, device)});
  }
  return w.raw_data();
}

namespace detail {

void throw_cublas_error(int status, const char* call, const char* file, int line) {
  TANDEM_FAIL("cuBLAS: ", call, " failed: ",
              cublasGetStatusName(static_cast<cublasStatus_t>(status)), " (",
              cublasGetStatusString(static_cast<cublasStatus_t>(status)), ") at ", file, ":",
              line);
}

void throw_cudnn_error(int status, const char* call, const char* file, int line) {
  char message[1024] = {};
  cudnnGetLastErrorString(message, sizeof message);
  TANDEM_FAIL("cuDNN: ", call, " failed: ", cudnnGetErrorString(static_cast<cudnnStatus_t>(status)),
              message[0] ? std::string(" (") + message + ")" : std::string(), " at ", file, ":",
              line);
}

}  // namespace detail
}  // namespace tandem::ops::cuda
