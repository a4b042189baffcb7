// `tandem devices`: what can run work — the GPUs the CUDA runtime sees (name, memory, compute
// capability, multiprocessors, peer access; CUDA_VISIBLE_DEVICES applies; how busy each is now,
// from NVML where the driver has it) or why there are none, and the CPU (model, cores, ISA
// extensions, memory) — as a table or, with --json, one JSON object.
#include "tandem/train/devices.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "tandem/base/check.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/device/cuda/nvml.h"
#include "tandem/dist/nccl/nccl_clique.h"

namespace tandem::app {
namespace {

std::string gib(std::uint64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buffer;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += " ";
    out += w;
  }
  return out.empty() ? "-" : out;
}

// 13000 -> "13.0"; 0 -> "" (absent).
std::string cuda_version(int v) {
  return v > 0 ? std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10) : "";
}

// One GPU's figures, or why they could not be read; NVML's reading of it, or why there is none.
struct GpuEntry {
  int index = 0;
  std::optional<cuda::GpuInfo> info;
  std::string error;
  std::optional<cuda::NvmlReading> now;
  std::string no_reading;
};

std::vector<GpuEntry> read_gpus() {
  std::vector<GpuEntry> gpus;
  std::optional<cuda::Nvml> nvml;  // loaded only when there is a GPU to read
  for (int i = 0; i < cuda::device_count(); ++i) {
    GpuEntry entry;
    entry.index = i;
    try {
      entry.info = cuda::gpu_info(i);
      if (!nvml) nvml.emplace();
      entry.now = nvml->read(entry.info->pci_bus_id, &entry.no_reading);
    } catch (const Error& e) {
      entry.error = e.what();
    }
    gpus.push_back(std::move(entry));
  }
  return gpus;
}

std::string peer_list(const std::vector<int>& peers) {
  std::string out;
  for (const int p : peers) out += (out.empty() ? "cuda:" : ", cuda:") + std::to_string(p);
  return out;
}

nlohmann::ordered_json gpu_json(const GpuEntry& g) {
  nlohmann::ordered_json j;
  j["device"] = "cuda:" + std::to_string(g.index);
  if (!g.info) {
    j["error"] = g.error;
    return j;
  }
  const cuda::GpuInfo& i = *g.info;
  j["name"] = i.name;
  j["pci_bus_id"] = i.pci_bus_id;
  j["memory_total_bytes"] = i.total_memory;
  j["memory_free_bytes"] = i.free_memory;
  j["compute_capability"] = std::to_string(i.major) + "." + std::to_string(i.minor);
  j["multiprocessors"] = i.multiprocessors;
  j["peers"] = nlohmann::ordered_json::array();
  for (const int p : i.peers) j["peers"].push_back("cuda:" + std::to_string(p));
  if (g.now) {
    j["nvml"] = {{"gpu_percent", g.now->gpu_percent},
                 {"memory_percent", g.now->memory_percent},
                 {"memory_used_bytes", g.now->memory_used}};
    if (g.now->power_watts) j["nvml"]["power_w"] = *g.now->power_watts;
  } else {
    j["nvml_unavailable"] = g.no_reading;
  }
  return j;
}

void print_gpus(const std::vector<GpuEntry>& gpus, const std::string& reason) {
  std::printf("GPU\n");
  if (cuda::built()) {
    const std::string runtime = cuda_version(cuda::runtime_version());
    const std::string driver = cuda_version(cuda::driver_version());
    std::printf("  CUDA     runtime %s, driver %s\n", runtime.c_str(),
                driver.empty() ? "none" : driver.c_str());
    const std::optional<std::string> visible = cuda::visible_devices_variable();
    if (visible) {
      std::printf("  visible  CUDA_VISIBLE_DEVICES=\"%s\": only those GPUs, numbered from cuda:0\n",
                  visible->c_str());
    } else {
      std::printf("  visible  all GPUs (CUDA_VISIBLE_DEVICES is not set)\n");
    }
    const std::string nccl = dist::nccl_version();
    if (nccl.empty()) {
      std::printf("  NCCL     not built in: GPUs of one process are summed through the host\n");
    } else {
      std::printf("  NCCL     %s: sums the gradients of GPUs of one process (--devices "
                  "cuda:0,cuda:1) and of processes, one GPU each\n",
                  nccl.c_str());
    }
  }
  if (gpus.empty()) {
    std::printf("  no GPU: %s; training will use the CPU\n", reason.c_str());
    return;
  }
  for (const GpuEntry& g : gpus) {
    if (!g.info) {
      std::printf("  cuda:%d   could not be read: %s\n", g.index, g.error.c_str());
      continue;
    }
    const cuda::GpuInfo& i = *g.info;
    std::printf("  cuda:%d   %s (PCI %s)\n", g.index, i.name.c_str(), i.pci_bus_id.c_str());
    std::printf(
        "           memory %s total, %s free; compute capability %d.%d; %d multiprocessors\n",
        gib(i.total_memory).c_str(), gib(i.free_memory).c_str(), i.major, i.minor,
        i.multiprocessors);
    std::printf("           peer access: %s\n",
                gpus.size() == 1 ? "no other GPU"
                                 : (i.peers.empty() ? "none" : peer_list(i.peers).c_str()));
    if (g.now) {
      std::printf("           now (NVML): kernels busy %u%%, memory busy %u%%, %s used by all "
                  "processes\n",
                  g.now->gpu_percent, g.now->memory_percent, gib(g.now->memory_used).c_str());
    } else {
      std::printf("           now: not known (%s)\n", g.no_reading.c_str());
    }
  }
}

}  // namespace

Command add_devices_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("devices", "List the devices tandem can train on");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print one JSON object instead of a table");
  return [json]() {
    const train::CpuInfo cpu = train::read_cpu_info();
    const std::vector<GpuEntry> gpus = read_gpus();
    const std::string gpu_reason = cuda::unavailable_reason();
    if (*json) {
      nlohmann::ordered_json j;
      j["cpu"] = {{"model", cpu.model},
                  {"logical_cores", cpu.logical_cores},
                  {"physical_cores", cpu.physical_cores},
                  {"isa", cpu.isa},
                  {"memory_total_bytes", cpu.memory_total_bytes},
                  {"memory_available_bytes", cpu.memory_available_bytes}};
      j["cuda_built"] = cuda::built();
      if (cuda::built()) {
        j["cuda_runtime_version"] = cuda_version(cuda::runtime_version());
        const std::string driver = cuda_version(cuda::driver_version());
        j["cuda_driver_version"] =
            driver.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(driver);
        const std::string nccl = dist::nccl_version();
        j["nccl_version"] = nccl.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(nccl);
      }
      const std::optional<std::string> visible = cuda::visible_devices_variable();
      j["cuda_visible_devices"] =
          visible ? nlohmann::ordered_json(*visible) : nlohmann::ordered_json();
      j["gpus"] = nlohmann::ordered_json::array();
      for (const GpuEntry& g : gpus) j["gpus"].push_back(gpu_json(g));
      if (gpus.empty()) j["no_gpu_reason"] = gpu_reason;
      j["training_device"] = train::auto_uses_gpus() ? "cuda" : "cpu";
      std::printf("%s\n", j.dump().c_str());
      return 0;
    }
    std::printf("CPU\n");
    std::printf("  model    %s\n", cpu.model.empty() ? "unknown" : cpu.model.c_str());
    std::printf("  cores    %d logical", cpu.logical_cores);
    if (cpu.physical_cores > 0) std::printf(", %d physical", cpu.physical_cores);
    std::printf("\n  ISA      %s\n", joined(cpu.isa).c_str());
    std::printf("  memory   %s total, %s available\n", gib(cpu.memory_total_bytes).c_str(),
                gib(cpu.memory_available_bytes).c_str());
    print_gpus(gpus, gpu_reason);
    if (!gpus.empty() && !train::auto_uses_gpus()) {
      std::printf("  --devices auto trains on the CPU: this tandem was built without its CUDA "
                  "kernels (nvcc, cuBLAS or cuDNN missing, or TANDEM_CUDA_KERNELS=OFF)\n");
    }
    return 0;
  };
}

}  // namespace tandem::app
