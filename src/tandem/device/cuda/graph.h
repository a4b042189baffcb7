// CUDA graphs: a sequence of GPU work captured once and replayed with one launch, which removes
// the per-kernel launch cost of small steps. CUDA-free header: a build without CUDA has no GPU, and
// capturing there throws.
//
// The capture runs `work` on the calling thread with a private capture stream as its current
// stream on the device. Every block the caching allocator hands out during the capture is cached
// for that stream, so the graph's memory is its own: eager work on the compute stream never gets
// those blocks, and a graph's temporaries (freed during its capture) are reused only within it.
// While the graph lives, that memory stays reserved (the allocator holds its stream: neither
// empty_cache() nor an out-of-memory retry gives it back, as replays write to it). Capture streams
// are never destroyed; a destroyed graph's stream (and so its cached memory) is taken by the next
// capture on that device. Nothing in `work` may wait for the GPU or copy between
// host and device (a read such as loss.item(), a host tensor moved to the GPU): CUDA refuses it,
// and the capture fails with CUDA's error. Checks deferred during the capture (cross-entropy's
// class indices) are kept and deferred again after each replay.
#pragma once

#include <functional>
#include <memory>

namespace tandem::cuda {

class CapturedGraph {
 public:
  // Captures `work` on `device` (it runs no kernel: replay() does). Throws tandem::Error naming
  // what failed when the capture or the graph's instantiation does; the device is then as before,
  // except for what `work` itself changed on the host.
  static std::unique_ptr<CapturedGraph> capture(int device, const std::function<void()>& work);

  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Queues the captured work on the calling thread's current stream of the device (after the work
  // queued there before), and defers the captured checks again.
  void replay();
  int device() const;
  std::size_t nodes() const;  // kernels, copies and memsets in the graph

  struct Impl;

 private:
  explicit CapturedGraph(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::cuda
