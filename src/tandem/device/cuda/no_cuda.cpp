// The CUDA API of a build without the CUDA toolkit: no GPUs, "built without CUDA" as the reason.
#include <cstdlib>
#include <memory>
#include <utility>

#include "tandem/base/check.h"
#include "tandem/device/cuda/copy_ahead.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/device/cuda/graph.h"
#include "tandem/device/cuda/memory.h"

namespace tandem::cuda {

namespace {
constexpr const char* kReason = "built without CUDA";
}  // namespace

bool built() { return false; }
bool is_available() { return false; }
int device_count() { return 0; }
std::vector<Device> devices() { return {}; }
std::string unavailable_reason() { return kReason; }

std::optional<std::string> visible_devices_variable() {
  const char* value = std::getenv("CUDA_VISIBLE_DEVICES");
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

int runtime_version() { return 0; }
int driver_version() { return 0; }

std::string missing_gpu_message(int index) {
  return "cuda:" + std::to_string(index) + " does not exist: no CUDA GPU is visible (" + kReason +
         ")";
}

void check_index(int index) { TANDEM_FAIL(missing_gpu_message(index)); }

GpuInfo gpu_info(int index) {
  check_index(index);
  return {};
}

bool can_access_peer(int from, int /*to*/) {
  check_index(from);
  return false;
}

AllocatorStats memory_stats(int device) {
  check_index(device);
  return {};
}

void reset_peak_memory(int device) { check_index(device); }

void empty_cache() {}

struct CapturedGraph::Impl {};
CapturedGraph::CapturedGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CapturedGraph::~CapturedGraph() = default;

std::unique_ptr<CapturedGraph> CapturedGraph::capture(int device,
                                                      const std::function<void()>& /*work*/) {
  check_index(device);
  return nullptr;  // not reached: check_index throws
}

class StreamGuard {};
struct CopyAhead::Impl {};
CopyAhead::CopyAhead(int device) : device_(device) { check_index(device); }
CopyAhead::~CopyAhead() = default;
CopyAhead::CopyAhead(CopyAhead&&) noexcept = default;
CopyAhead& CopyAhead::operator=(CopyAhead&&) noexcept = default;
CopyAhead::Scope::Scope(int device) { check_index(device); }
CopyAhead::Scope::~Scope() = default;
CopyAhead::Scope CopyAhead::scope() const { return Scope(device_); }
void CopyAhead::done() {}
void CopyAhead::order_current_stream_after() const {}
void CopyAhead::used_on_current_stream(void*) const {}

void CapturedGraph::replay() {}
int CapturedGraph::device() const { return 0; }
std::size_t CapturedGraph::nodes() const { return 0; }

}  // namespace tandem::cuda
