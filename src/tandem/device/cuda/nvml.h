// NVML, the driver's management library, loaded at run time (dlopen of libnvidia-ml.so.1): what
// the hardware itself says of a GPU while tandem trains on it — how busy its kernels and memory
// were over the last sample period, the memory used by every process, the power drawn. Nothing
// links against NVML: where it is absent (no driver, a container without it, a CPU machine) the
// loader says why and those figures are simply missing. CUDA-free: GPUs are named by PCI bus id
// (GpuInfo::pci_bus_id), which is how NVML and the CUDA runtime agree on a device.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace tandem::cuda {

// One reading of one GPU.
struct NvmlReading {
  unsigned gpu_percent = 0;     // of the last sample period with a kernel running (0-100)
  unsigned memory_percent = 0;  // of the last sample period with device memory read or written
  std::uint64_t memory_used = 0;   // bytes, every process's
  std::uint64_t memory_total = 0;  // bytes
  std::optional<double> power_watts;  // absent where the GPU does not report it
};

class Nvml {
 public:
  static constexpr const char* kLibrary = "libnvidia-ml.so.1";

  // Loads `library` and initialises NVML; when either fails the object is unavailable and
  // reason() says why ("libnvidia-ml.so.1: cannot open shared object file ...", "nvmlInit_v2:
  // Driver Not Loaded", "nvmlInit_v2 is not in libz.so.1").
  explicit Nvml(const std::string& library = kLibrary);
  ~Nvml();  // nvmlShutdown and dlclose when it was loaded
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool available() const { return library_ != nullptr; }
  const std::string& reason() const { return reason_; }

  // The GPU at `pci_bus_id` ("0000:19:00.0") now; nullopt when NVML is unavailable or the query
  // fails, with the reason in *why when given. Not thread-safe: one sampler calls it.
  std::optional<NvmlReading> read(const std::string& pci_bus_id, std::string* why = nullptr);

 private:
  struct Api;
  void* library_ = nullptr;  // dlopen handle, null when unavailable
  Api* api_ = nullptr;
  std::string reason_;
  std::map<std::string, void*> handles_;  // PCI bus id -> nvmlDevice_t
};

}  // namespace tandem::cuda
