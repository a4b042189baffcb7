// Helpers of the GPU tests: the skip without a GPU, long-lived test streams, and a gate that holds
// a stream busy (a host function waiting on a flag) so "work still queued" is deterministic.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gpu_skip.h"
#include "tandem/device/cuda/check.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/device/cuda/stream.h"

namespace tandem::cuda {

// A stream on cuda:0 kept for the whole process: the allocator caches blocks by stream, and a
// destroyed stream's handle could come back as a new stream's.
inline cudaStream_t test_stream(int which) {
  static std::vector<Stream*> streams;
  while (static_cast<int>(streams.size()) <= which) streams.push_back(new Stream(0));
  return streams[which]->get();
}

// Holds `stream` busy until opened; opens itself, and lets the stream finish, at scope end.
class Gate {
 public:
  explicit Gate(cudaStream_t stream) : stream_(stream) {
    TANDEM_CUDA_CHECK(cudaLaunchHostFunc(stream_, &Gate::wait, this));
  }
  ~Gate() {
    open();
    (void)cudaStreamSynchronize(stream_);
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  void open() { open_.store(true); }

 private:
  static void CUDART_CB wait(void* self) {
    while (!static_cast<Gate*>(self)->open_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  cudaStream_t stream_;
  std::atomic<bool> open_{false};
};

// Opens a gate from another thread after a delay (for calls that block until it is open).
class OpenLater {
 public:
  OpenLater(Gate& gate, std::chrono::milliseconds delay)
      : thread_([&gate, delay] {
          std::this_thread::sleep_for(delay);
          gate.open();
        }) {}
  ~OpenLater() { thread_.join(); }
  OpenLater(const OpenLater&) = delete;
  OpenLater& operator=(const OpenLater&) = delete;

 private:
  std::thread thread_;
};

}  // namespace tandem::cuda
