// GPU discovery through the CUDA runtime. The count is read once per process (the runtime fixes
// it, CUDA_VISIBLE_DEVICES included, at its first call); a failure there means "no GPUs", with the
// runtime's words kept as the reason.
#include "tandem/device/cuda/discovery.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

#include "tandem/device/cuda/check.h"
#include "tandem/device/cuda/stream.h"

namespace tandem::cuda {

namespace {

struct Discovery {
  int count = 0;
  std::string reason;  // empty when count > 0
};

std::string visible_note() {
  const std::optional<std::string> visible = visible_devices_variable();
  return visible ? " (CUDA_VISIBLE_DEVICES=\"" + *visible + "\")" : std::string();
}

const Discovery& discovery() {
  static const Discovery d = [] {
    Discovery out;
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();  // leave no error behind: "no GPU" is an answer here
      out.reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(rc) + " (" +
                   cudaGetErrorName(rc) + ")";
      int driver = 0;
      if (cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0) {
        out.reason += "; no NVIDIA driver is loaded";
      }
      out.reason += visible_note();
      return out;
    }
    if (count <= 0) {
      out.reason = "the CUDA runtime sees no GPU" + visible_note();
      return out;
    }
    out.count = count;
    return out;
  }();
  return d;
}

std::string list_of_gpus(int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out += (i ? ", cuda:" : "cuda:") + std::to_string(i);
  return out;
}

}  // namespace

bool built() { return true; }

bool is_available() { return discovery().count > 0; }

int device_count() { return discovery().count; }

std::vector<Device> devices() {
  std::vector<Device> out;
  out.reserve(static_cast<std::size_t>(device_count()));
  for (int i = 0; i < device_count(); ++i) out.emplace_back(DeviceType::CUDA, i);
  return out;
}

std::string unavailable_reason() { return discovery().reason; }

std::optional<std::string> visible_devices_variable() {
  const char* value = std::getenv("CUDA_VISIBLE_DEVICES");
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

int runtime_version() {
  int version = 0;
  return cudaRuntimeGetVersion(&version) == cudaSuccess ? version : 0;
}

int driver_version() {
  int version = 0;
  return cudaDriverGetVersion(&version) == cudaSuccess ? version : 0;
}

std::string missing_gpu_message(int index) {
  const int count = device_count();
  if (index >= 0 && index < count) return "";
  const std::string name = "cuda:" + std::to_string(index);
  if (count == 0) {
    return name + " does not exist: no CUDA GPU is visible (" + unavailable_reason() + ")";
  }
  return name + " does not exist: " + std::to_string(count) +
         (count == 1 ? " GPU is" : " GPUs are") + " visible (" + list_of_gpus(count) + ")" +
         visible_note();
}

void check_index(int index) {
  if (index >= 0 && index < device_count()) [[likely]]
    return;
  TANDEM_FAIL(missing_gpu_message(index));
}

GpuInfo gpu_info(int index) {
  check_index(index);
  cudaDeviceProp prop;
  std::memset(&prop, 0, sizeof prop);
  TANDEM_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  GpuInfo info;
  info.index = index;
  info.name = prop.name;
  char bus_id[32] = {};
  TANDEM_CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, index));
  info.pci_bus_id = bus_id;
  info.major = prop.major;
  info.minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  {
    const DeviceGuard guard(index);
    TANDEM_CUDA_CHECK(cudaMemGetInfo(&info.free_memory, &info.total_memory));
  }
  for (int other = 0; other < device_count(); ++other) {
    if (other != index && can_access_peer(index, other)) info.peers.push_back(other);
  }
  return info;
}

bool can_access_peer(int from, int to) {
  check_index(from);
  check_index(to);
  if (from == to) return false;
  int can = 0;
  TANDEM_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from, to));
  return can != 0;
}

}  // namespace tandem::cuda
