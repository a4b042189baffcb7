// CUDA streams and events as small RAII types, the device guard, and the streams tandem works on:
// per device a compute stream (each thread's current stream unless a StreamGuard says otherwise)
// and a copy stream for host<->device transfers. All are non-blocking: nothing in tandem uses the
// legacy default stream, so work is ordered only by these streams and by events.
#pragma once

#include <cuda_runtime.h>

namespace tandem::cuda {

// Makes `device` current for the scope; restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

// A CUDA event without timing, created on `device`.
class Event {
 public:
  explicit Event(int device);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(cudaStream_t stream);  // marks the work queued on stream so far
  bool query() const;                // whether that work has completed
  void synchronize() const;          // waits on the host until it has
  cudaEvent_t get() const { return event_; }
  int device() const { return device_; }

 private:
  cudaEvent_t event_ = nullptr;
  int device_ = 0;
};

// An owned non-blocking stream on `device`.
class Stream {
 public:
  explicit Stream(int device, int priority = 0);
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }
  void synchronize() const;
  bool query() const;                   // whether all its work has completed
  void wait(const Event& event) const;  // later work on this stream waits for event

 private:
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
};

// The device's compute and copy streams: made on first use, alive until the process ends.
cudaStream_t compute_stream(int device);
cudaStream_t copy_stream(int device);
// The calling thread's current stream on `device`: the compute stream unless a StreamGuard is set.
cudaStream_t current_stream(int device);

// Makes `stream` the calling thread's current stream on `device` for the scope (nullptr: the
// compute stream; the legacy default stream cannot be chosen).
class StreamGuard {
 public:
  StreamGuard(int device, cudaStream_t stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  cudaStream_t previous_;
};

}  // namespace tandem::cuda
