// CapturedGraph: stream capture on a private stream of the device, instantiation, replay on the
// current stream, and the captured deferred checks.
#include "tandem/device/cuda/graph.h"

#include <cuda_runtime.h>

#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tandem/base/check.h"
#include "tandem/device/cuda/caching_allocator.h"
#include "tandem/device/cuda/check.h"
#include "tandem/device/cuda/deferred_checks.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/device/cuda/stream.h"

namespace tandem::cuda {
namespace {

// Capture streams per device: a graph takes one for its life and gives it back; the streams
// themselves live until the process ends, so the blocks cached for them stay unambiguous.
std::mutex streams_mutex;
std::map<int, std::vector<Stream*>>& free_capture_streams() {
  static auto* free = new std::map<int, std::vector<Stream*>>;  // never destroyed, as the streams
  return *free;
}

StreamId id_of(const Stream* stream) { return reinterpret_cast<StreamId>(stream->get()); }

// While a graph holds its stream, the allocator keeps the memory cached for it (the graph's
// temporaries, free in the pools between replays that write to them) from going back to the driver.
Stream* take_capture_stream(int device) {
  Stream* taken = nullptr;
  {
    const std::lock_guard lock(streams_mutex);
    auto& free = free_capture_streams()[device];
    if (!free.empty()) {
      taken = free.back();
      free.pop_back();
    }
  }
  if (taken == nullptr) taken = new Stream(device);  // never destroyed
  caching_allocator(device).hold_stream(id_of(taken));
  return taken;
}

void give_back_capture_stream(Stream* stream) {
  caching_allocator(stream->device()).let_go_stream(id_of(stream));
  const std::lock_guard lock(streams_mutex);
  free_capture_streams()[stream->device()].push_back(stream);
}

// Ends the capture on `stream` whatever state it is in, destroying any graph it returns.
void abandon_capture(cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(stream, &graph);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // the capture's failure has been reported already
}

}  // namespace

struct CapturedGraph::Impl {
  int device = 0;
  Stream* stream = nullptr;  // the capture stream, held while the graph lives
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::size_t nodes = 0;
  std::vector<DeferredCheck> checks;

  ~Impl() {
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    if (stream == nullptr) return;
    try {
      give_back_capture_stream(stream);
    } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw; the stream stays
    }                // out of the free list, its memory held
  }
};

CapturedGraph::CapturedGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CapturedGraph::~CapturedGraph() = default;

std::unique_ptr<CapturedGraph> CapturedGraph::capture(int device,
                                                      const std::function<void()>& work) {
  check_index(device);
  const DeviceGuard device_guard(device);
  // The checks already pending on this thread belong to earlier work: settle them first, so that
  // the capture's own are told apart (and none overflows into a wait during the capture).
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(current_stream(device)));
  resolve_deferred_checks(device);

  auto impl = std::make_unique<Impl>();
  impl->device = device;
  impl->stream = take_capture_stream(device);
  const cudaStream_t stream = impl->stream->get();
  {
    const StreamGuard stream_guard(device, stream);
    // Relaxed: the caching allocator may still cudaMalloc a new segment during the capture.
    TANDEM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
    try {
      work();
    } catch (const std::exception& e) {
      abandon_capture(stream);
      (void)take_deferred_checks(device);  // their flags were never written
      TANDEM_FAIL("CUDA graph capture on cuda:", device, " failed: ", e.what());
    }
    const cudaError_t ended = cudaStreamEndCapture(stream, &impl->graph);
    if (ended != cudaSuccess) {
      if (impl->graph != nullptr) {
        (void)cudaGraphDestroy(impl->graph);
        impl->graph = nullptr;
      }
      (void)cudaGetLastError();
      (void)take_deferred_checks(device);
      TANDEM_FAIL("CUDA graph capture on cuda:", device, " failed: cudaStreamEndCapture: ",
                  cudaGetErrorName(ended), " (", cudaGetErrorString(ended),
                  "): the captured work waited for the GPU or used another stream");
    }
  }
  impl->checks = take_deferred_checks(device);
  TANDEM_CUDA_CHECK(cudaGraphGetNodes(impl->graph, nullptr, &impl->nodes));
  TANDEM_CUDA_CHECK(cudaGraphInstantiate(&impl->exec, impl->graph, 0));
  return std::unique_ptr<CapturedGraph>(new CapturedGraph(std::move(impl)));
}

void CapturedGraph::replay() {
  const DeviceGuard guard(impl_->device);
  TANDEM_CUDA_CHECK(cudaGraphLaunch(impl_->exec, current_stream(impl_->device)));
  for (const DeferredCheck& c : impl_->checks) defer_check(c);
}

int CapturedGraph::device() const { return impl_->device; }
std::size_t CapturedGraph::nodes() const { return impl_->nodes; }

}  // namespace tandem::cuda
