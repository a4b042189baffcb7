// Errors a GPU kernel finds that the host learns of the next time it waits for that GPU. An op
// whose inputs can only be checked on the GPU (cross-entropy's class indices) queues a check
// kernel writing a flag in device memory and defers the verdict here, so the CPU need not wait
// for the GPU in the middle of a step; the calling thread's next wait for that GPU (a copy to the
// host such as loss.item(), a copy from it to another GPU, synchronize()) reads its flags and
// throws the first failed check's error. Per thread: a replica thread answers for its own ops.
// The op's kernels must stay memory-safe on the inputs the check refuses.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tandem::cuda {

struct DeferredCheck {
  int device = 0;
  // An unsigned 64-bit flag in device memory, kept alive by `keep`: all ones means passed, any
  // other value is handed to `message`.
  const void* flag = nullptr;
  std::shared_ptr<const void> keep;
  // The error for a failed flag value; may read more from the device (the GPU is idle then).
  std::function<std::string(std::uint64_t value)> message;
};

// Queues `check` for the calling thread. More than kMaxPending pending checks on a thread resolve
// at once (a thread that never reads from the GPU cannot pile them up).
inline constexpr std::size_t kMaxPendingChecks = 256;
void defer_check(DeferredCheck check);
// After the calling thread has waited for `device`'s current stream: reads the thread's pending
// checks on it (each leaves the list) and throws tandem::Error with the first failure's message.
void resolve_deferred_checks(int device);
// How many checks the calling thread has pending (on every device).
std::size_t pending_checks();
// Removes the calling thread's pending checks on `device` from its list and returns them, in the
// order they were deferred: a CUDA graph keeps the checks its capture queued and defers copies of
// them after each replay, since a capture runs no kernel and each replay rewrites their flags.
std::vector<DeferredCheck> take_deferred_checks(int device);

}  // namespace tandem::cuda
