// The --devices spellings (auto, cpu, cpu:N, cuda, cuda:0,cuda:1) resolved against what this
// machine and build have, and what `tandem devices` reports about the CPU and GPUs.
// Not a device backend: device/ owns allocation and copies.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/device/device.h"

namespace tandem::train {

// The devices a run uses, one model replica each: cpu:N gives cpu:0 .. cpu:N-1 (N CPU replicas
// sharing the cores), cuda gives every GPU.
struct DeviceLayout {
  std::vector<Device> devices;
  std::string describe() const;  // "cpu", "cpu:0,cpu:1", "cuda:0,cuda:1"
  bool operator==(const DeviceLayout&) const = default;
};

// An error naming the device and why when one does not exist (any cuda in a build without CUDA,
// cuda:7 on a machine with two GPUs: "... 2 GPUs are visible (cuda:0, cuda:1)"; no GPU at all:
// the CUDA runtime's reason) — never a silent fallback.
DeviceLayout parse_devices(std::string_view spec);

// Whether this build of tandem has a CUDA backend, and how many GPUs it sees (tandem::cuda in
// device/cuda/discovery.h has the rest: names, memory, peers, the reason there are none).
bool cuda_built();
int cuda_device_count();
// Why no GPU is visible ("built without CUDA", the CUDA runtime's error); empty when one is.
std::string cuda_unavailable_reason();
// Whether --devices auto means the GPUs (there are some, and tandem has CUDA kernels for its ops).
bool auto_uses_gpus();

struct CpuInfo {
  std::string model;                 // /proc/cpuinfo "model name"
  int logical_cores = 0;             // online processors
  int physical_cores = 0;            // distinct (physical id, core id) pairs; 0 if unknown
  std::vector<std::string> isa;      // of interest, in a fixed order: sse4_2 avx avx2 fma ...
  std::uint64_t memory_total_bytes = 0;
  std::uint64_t memory_available_bytes = 0;
};

// From /proc/cpuinfo and /proc/meminfo (fields left empty / 0 when a file is unreadable).
CpuInfo read_cpu_info();
// The same parsing on given texts, for tests.
CpuInfo parse_cpu_info(std::string_view cpuinfo, std::string_view meminfo, int online_cores);

}  // namespace tandem::train
