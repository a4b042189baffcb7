// The NVML loader: dlopen, the handful of entry points tandem reads (looked up by name, their
// signatures as NVML's public API documents them), and readings by PCI bus id. Built in every
// configuration: it needs no CUDA header, and a machine without the library only loses figures.
#include "tandem/device/cuda/nvml.h"

#include <dlfcn.h>

#include <memory>
#include <utility>

namespace tandem::cuda {
namespace {

// NVML's C types, as its API reference defines them (nvmlReturn_t 0 is NVML_SUCCESS).
using NvmlReturn = int;
using NvmlDevice = void*;
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr NvmlReturn kSuccess = 0;

}  // namespace

struct Nvml::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*power_milliwatts)(NvmlDevice, unsigned int*) = nullptr;  // optional

  std::string error(const char* call, NvmlReturn code) const {
    const char* text = error_string ? error_string(code) : nullptr;
    return std::string(call) + ": " + (text ? text : "error " + std::to_string(code));
  }
};

namespace {

template <typename F>
bool find(void* library, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(library, name));
  return out != nullptr;
}

}  // namespace

Nvml::Nvml(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    reason_ = error ? error : library + ": cannot be loaded";
    return;
  }
  auto api = std::make_unique<Api>();
  for (const auto& [name, found] :
       {std::pair{"nvmlInit_v2", find(handle, "nvmlInit_v2", api->init)},
        std::pair{"nvmlShutdown", find(handle, "nvmlShutdown", api->shutdown)},
        std::pair{"nvmlErrorString", find(handle, "nvmlErrorString", api->error_string)},
        std::pair{"nvmlDeviceGetHandleByPciBusId_v2",
                  find(handle, "nvmlDeviceGetHandleByPciBusId_v2", api->handle_by_pci_bus_id)},
        std::pair{"nvmlDeviceGetUtilizationRates",
                  find(handle, "nvmlDeviceGetUtilizationRates", api->utilization)},
        std::pair{"nvmlDeviceGetMemoryInfo", find(handle, "nvmlDeviceGetMemoryInfo", api->memory)}}) {
    if (!found) {
      reason_ = std::string(name) + " is not in " + library;
      dlclose(handle);
      return;
    }
  }
  find(handle, "nvmlDeviceGetPowerUsage", api->power_milliwatts);
  if (const NvmlReturn code = api->init(); code != kSuccess) {
    reason_ = api->error("nvmlInit_v2", code);
    dlclose(handle);
    return;
  }
  library_ = handle;
  api_ = api.release();
}

Nvml::~Nvml() {
  if (library_ == nullptr) return;
  api_->shutdown();
  delete api_;
  dlclose(library_);
}

std::optional<NvmlReading> Nvml::read(const std::string& pci_bus_id, std::string* why) {
  const auto fail = [why](std::string message) -> std::optional<NvmlReading> {
    if (why) *why = std::move(message);
    return std::nullopt;
  };
  if (!available()) return fail("NVML is not available: " + reason_);
  auto it = handles_.find(pci_bus_id);
  if (it == handles_.end()) {
    NvmlDevice device = nullptr;
    if (const NvmlReturn code = api_->handle_by_pci_bus_id(pci_bus_id.c_str(), &device);
        code != kSuccess) {
      return fail(api_->error("nvmlDeviceGetHandleByPciBusId_v2", code) + " (" + pci_bus_id + ")");
    }
    it = handles_.emplace(pci_bus_id, device).first;
  }
  NvmlUtilization utilization{};
  if (const NvmlReturn code = api_->utilization(it->second, &utilization); code != kSuccess) {
    return fail(api_->error("nvmlDeviceGetUtilizationRates", code));
  }
  NvmlMemory memory{};
  if (const NvmlReturn code = api_->memory(it->second, &memory); code != kSuccess) {
    return fail(api_->error("nvmlDeviceGetMemoryInfo", code));
  }
  NvmlReading reading{.gpu_percent = utilization.gpu,
                      .memory_percent = utilization.memory,
                      .memory_used = memory.used,
                      .memory_total = memory.total};
  unsigned int milliwatts = 0;
  if (api_->power_milliwatts && api_->power_milliwatts(it->second, &milliwatts) == kSuccess) {
    reading.power_watts = milliwatts / 1000.0;
  }
  return reading;
}

}  // namespace tandem::cuda
