// Streams, events, the device guard, and the per-device compute and copy streams.
#include "tandem/device/cuda/stream.h"

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "tandem/device/cuda/check.h"
#include "tandem/device/cuda/discovery.h"

namespace tandem::cuda {

DeviceGuard::DeviceGuard(int device) {
  TANDEM_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) {
    TANDEM_CUDA_CHECK(cudaSetDevice(device));
    changed_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  // Cannot throw here; setting back a device that was current before does not fail in practice.
  if (changed_) (void)cudaSetDevice(previous_);
}

Event::Event(int device) : device_(device) {
  const DeviceGuard guard(device);
  TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
}

Event::~Event() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);  // a destructor cannot report it
}

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)), device_(other.device_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void Event::record(cudaStream_t stream) {
  const DeviceGuard guard(device_);
  TANDEM_CUDA_CHECK(cudaEventRecord(event_, stream));
}

bool Event::query() const {
  const cudaError_t rc = cudaEventQuery(event_);
  if (rc == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is an answer, not an error to leave behind
    return false;
  }
  TANDEM_CUDA_CHECK(rc);
  return true;
}

void Event::synchronize() const { TANDEM_CUDA_CHECK(cudaEventSynchronize(event_)); }

Stream::Stream(int device, int priority) : device_(device) {
  check_index(device);
  const DeviceGuard guard(device);
  TANDEM_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority));
}

Stream::~Stream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);  // a destructor cannot report it
}

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void Stream::synchronize() const { TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

bool Stream::query() const {
  const cudaError_t rc = cudaStreamQuery(stream_);
  if (rc == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  TANDEM_CUDA_CHECK(rc);
  return true;
}

void Stream::wait(const Event& event) const {
  TANDEM_CUDA_CHECK(cudaStreamWaitEvent(stream_, event.get(), 0));
}

namespace {

struct DeviceStreams {
  std::once_flag once;
  cudaStream_t compute = nullptr;
  cudaStream_t copy = nullptr;
};

DeviceStreams& streams_of(int device) {
  check_index(device);
  // One entry per visible GPU; never destroyed, so work queued at exit still has its streams.
  static DeviceStreams* all = new DeviceStreams[static_cast<std::size_t>(device_count())];
  DeviceStreams& s = all[device];
  std::call_once(s.once, [&] {
    const DeviceGuard guard(device);
    cudaStream_t compute = nullptr;
    cudaStream_t copy = nullptr;
    TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    s.compute = compute;
    s.copy = copy;
  });
  return s;
}

std::vector<cudaStream_t>& thread_overrides() {
  thread_local std::vector<cudaStream_t> overrides;
  return overrides;
}

}  // namespace

cudaStream_t compute_stream(int device) { return streams_of(device).compute; }

cudaStream_t copy_stream(int device) { return streams_of(device).copy; }

cudaStream_t current_stream(int device) {
  const std::vector<cudaStream_t>& overrides = thread_overrides();
  if (device >= 0 && static_cast<std::size_t>(device) < overrides.size() &&
      overrides[device] != nullptr) {
    return overrides[device];
  }
  return compute_stream(device);
}

StreamGuard::StreamGuard(int device, cudaStream_t stream) : device_(device) {
  check_index(device);
  std::vector<cudaStream_t>& overrides = thread_overrides();
  if (overrides.size() <= static_cast<std::size_t>(device)) overrides.resize(device + 1, nullptr);
  previous_ = std::exchange(overrides[device], stream);
}

StreamGuard::~StreamGuard() { thread_overrides()[device_] = previous_; }

}  // namespace tandem::cuda
