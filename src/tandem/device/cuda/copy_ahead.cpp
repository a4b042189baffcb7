// CopyAhead: the copy stream as the current stream for a scope, an event marking the copies, and
// the caching allocator told that the compute stream uses what they allocated.
#include "tandem/device/cuda/copy_ahead.h"

#include <utility>

#include "tandem/device/cuda/caching_allocator.h"
#include "tandem/device/cuda/check.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/device/cuda/stream.h"

namespace tandem::cuda {

struct CopyAhead::Impl {
  explicit Impl(int device) : copied(device) {}
  Event copied;
  bool marked = false;
};

CopyAhead::CopyAhead(int device) : device_(device) {
  check_index(device);
  impl_ = std::make_unique<Impl>(device);
}

CopyAhead::~CopyAhead() = default;
CopyAhead::CopyAhead(CopyAhead&&) noexcept = default;
CopyAhead& CopyAhead::operator=(CopyAhead&&) noexcept = default;

CopyAhead::Scope::Scope(int device)
    : guard_(std::make_unique<StreamGuard>(device, copy_stream(device))) {}

CopyAhead::Scope::~Scope() = default;

CopyAhead::Scope CopyAhead::scope() const { return Scope(device_); }

void CopyAhead::done() {
  impl_->copied.record(copy_stream(device_));
  impl_->marked = true;
}

void CopyAhead::order_current_stream_after() const {
  if (!impl_->marked) return;
  const DeviceGuard guard(device_);
  TANDEM_CUDA_CHECK(cudaStreamWaitEvent(current_stream(device_), impl_->copied.get(), 0));
}

void CopyAhead::used_on_current_stream(void* ptr) const {
  if (ptr != nullptr) record_stream(device_, ptr, current_stream(device_));
}

}  // namespace tandem::cuda
