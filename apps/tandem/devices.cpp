// `tandem devices`: what can run work — GPUs through the CUDA backend when built with it, and the
// CPU (model, cores, ISA extensions, memory) — as a table or, with --json, one JSON object.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "tandem/train/devices.h"

namespace tandem::app {
namespace {

std::string gib(std::uint64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
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

}  // namespace

Command add_devices_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("devices", "List the devices tandem can train on");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print one JSON object instead of a table");
  return [json]() {
    const train::CpuInfo cpu = train::read_cpu_info();
    const bool cuda = train::cuda_built();
    const int gpus = train::cuda_device_count();
    const std::string gpu_reason = !cuda ? "built without CUDA" : (gpus == 0 ? "no CUDA GPU visible" : "");
    if (*json) {
      nlohmann::ordered_json j;
      j["cpu"] = {{"model", cpu.model},
                  {"logical_cores", cpu.logical_cores},
                  {"physical_cores", cpu.physical_cores},
                  {"isa", cpu.isa},
                  {"memory_total_bytes", cpu.memory_total_bytes},
                  {"memory_available_bytes", cpu.memory_available_bytes}};
      j["cuda_built"] = cuda;
      j["gpus"] = nlohmann::ordered_json::array();
      if (!gpu_reason.empty()) j["no_gpu_reason"] = gpu_reason;
      j["training_device"] = gpus > 0 ? "cuda" : "cpu";
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
    std::printf("GPU\n");
    if (gpus == 0) {
      std::printf("  no GPU: %s; training will use the CPU\n", gpu_reason.c_str());
    } else {
      for (int i = 0; i < gpus; ++i) std::printf("  cuda:%d\n", i);
    }
    return 0;
  };
}

}  // namespace tandem::app
