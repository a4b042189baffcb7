// Deferred GPU checks: a per-thread list, resolved after the thread's waits for a GPU.
#include "tandem/device/cuda/deferred_checks.h"

#include <cuda_runtime.h>

#include <utility>
#include <vector>

#include "tandem/base/check.h"
#include "tandem/device/cuda/check.h"
#include "tandem/device/cuda/stream.h"

namespace tandem::cuda {
namespace {

thread_local std::vector<DeferredCheck> pending;
thread_local bool resolving = false;  // a message's own reads from the device resolve nothing

}  // namespace

void defer_check(DeferredCheck check) {
  const int device = check.device;
  pending.push_back(std::move(check));
  if (pending.size() > kMaxPendingChecks && !resolving) {
    const DeviceGuard guard(device);
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(current_stream(device)));
    resolve_deferred_checks(device);
  }
}

std::vector<DeferredCheck> take_deferred_checks(int device) {
  std::vector<DeferredCheck> mine;
  std::vector<DeferredCheck> others;
  for (DeferredCheck& c : pending) (c.device == device ? mine : others).push_back(std::move(c));
  pending = std::move(others);
  return mine;
}

void resolve_deferred_checks(int device) {
  if (resolving || pending.empty()) return;
  const std::vector<DeferredCheck> mine = take_deferred_checks(device);
  if (mine.empty()) return;
  resolving = true;
  struct Reset {
    ~Reset() { resolving = false; }
  } reset;
  const DeviceGuard guard(device);
  const cudaStream_t stream = current_stream(device);
  // One flag after the other: the stream is idle (the caller has just waited for it).
  for (const DeferredCheck& c : mine) {
    std::uint64_t value = 0;
    TANDEM_CUDA_CHECK(
        cudaMemcpyAsync(&value, c.flag, sizeof value, cudaMemcpyDeviceToHost, stream));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (value != ~std::uint64_t{0}) TANDEM_FAIL(c.message(value));
  }
}

std::size_t pending_checks() { return pending.size(); }

}  // namespace tandem::cuda
