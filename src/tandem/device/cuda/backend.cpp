// The CUDA backend of the device table (allocator.h): memory from each GPU's caching allocator on
// the calling thread's current stream; copies ordered on the current streams. A copy from the host
// goes through a pinned staging block and is not waited for (the host memory is free on return;
// later work on the stream sees the data); a copy to the host, or from another GPU, is finished
// before returning. Registered at start-up (see CMakeLists).
#include <cuda_runtime.h>

#include <cstring>

#include "tandem/device/allocator.h"
#include "tandem/device/cuda/caching_allocator.h"
#include "tandem/device/cuda/check.h"
#include "tandem/device/cuda/deferred_checks.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/device/cuda/pinned_staging.h"
#include "tandem/device/cuda/stream.h"

namespace tandem::cuda {
namespace {

class CudaBackend final : public DeviceBackend {
 public:
  void* allocate(std::size_t nbytes, int index) override {
    check_index(index);
    return cuda::allocate(index, nbytes, current_stream(index));
  }

  void deallocate(void* ptr, std::size_t /*nbytes*/, int index) override { cuda::free(index, ptr); }

  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            std::size_t nbytes) override {
    if (nbytes == 0) return;
    if (dst_device.is_cuda()) check_index(dst_device.index);
    if (src_device.is_cuda()) check_index(src_device.index);
    if (dst_device.is_cuda() && src_device.is_cuda()) {
      copy_between_gpus(dst, dst_device.index, src, src_device.index, nbytes);
      return;
    }
    // Host <-> GPU: on the GPU's current stream, after the work queued there (which may produce
    // or still read the GPU memory).
    const int gpu = dst_device.is_cuda() ? dst_device.index : src_device.index;
    const cudaMemcpyKind kind =
        dst_device.is_cuda() ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    const DeviceGuard guard(gpu);
    const cudaStream_t stream = current_stream(gpu);
    // A CUDA graph would replay the copy from whatever the host memory holds by then (the staging
    // block is reused at once), and a copy to the host must wait: neither belongs in a capture.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    TANDEM_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
    TANDEM_CHECK(capturing == cudaStreamCaptureStatusNone, "a copy of ", nbytes, " bytes ",
                 kind == cudaMemcpyHostToDevice ? "from the host to " : "to the host from ", "cuda:",
                 gpu, " while a CUDA graph is being captured: a graph replays GPU work only");
    // To the GPU: staged, so that the CPU need not wait for the GPU to catch up (a batch's upload
    // would otherwise wait for the previous step's kernels).
    if (kind == cudaMemcpyHostToDevice) {
      PinnedStaging& staging = pinned_staging();
      if (PinnedStaging::Block* block = staging.acquire(gpu, nbytes)) {
        void* pinned = PinnedStaging::data(block);
        std::memcpy(pinned, src, nbytes);
        const cudaError_t queued = cudaMemcpyAsync(dst, pinned, nbytes, kind, stream);
        staging.release_after(block, stream);  // after a failed queueing too: the block is free
        detail::check_cuda(queued, "cudaMemcpyAsync(dst, pinned, nbytes, HostToDevice, stream)",
                           __FILE__, __LINE__);
        return;
      }
    }
    // Otherwise finished before returning: the host memory may be pageable, or read as soon as
    // we return. The wait also settles this thread's deferred checks on the GPU.
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, kind, stream));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
    resolve_deferred_checks(gpu);
  }

  void zero(void* ptr, std::size_t nbytes, int index) override {
    check_index(index);
    const DeviceGuard guard(index);
    TANDEM_CUDA_CHECK(cudaMemsetAsync(ptr, 0, nbytes, current_stream(index)));
  }

  void synchronize(int index) override {
    check_index(index);
    const DeviceGuard guard(index);
    TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
    resolve_deferred_checks(index);
  }

  int device_count() const override { return cuda::device_count(); }

 private:
  static void copy_between_gpus(void* dst, int dst_gpu, const void* src, int src_gpu,
                                std::size_t nbytes) {
    if (dst_gpu == src_gpu) {  // stream order on the current stream is enough
      const DeviceGuard guard(dst_gpu);
      TANDEM_CUDA_CHECK(
          cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, current_stream(dst_gpu)));
      return;
    }
    // Another GPU: its producer's work first, then the copy on the destination's stream,
    // finished before returning (the source may be freed and reused on its own stream).
    {
      const DeviceGuard guard(src_gpu);
      TANDEM_CUDA_CHECK(cudaStreamSynchronize(current_stream(src_gpu)));
      resolve_deferred_checks(src_gpu);
    }
    const DeviceGuard guard(dst_gpu);
    const cudaStream_t stream = current_stream(dst_gpu);
    TANDEM_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_gpu, src, src_gpu, nbytes, stream));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
};

// Registered during static initialisation; it touches no CUDA until first used.
[[maybe_unused]] const bool registered = [] {
  static CudaBackend* backend = new CudaBackend;  // never destroyed: tensors may outlive main
  register_backend(DeviceType::CUDA, backend);
  return true;
}();

}  // namespace
}  // namespace tandem::cuda

// Named by the device layer's link options (--undefined), so static links keep this file.
extern "C" {
extern const int tandem_cuda_backend_anchor;
const int tandem_cuda_backend_anchor = 1;
}
