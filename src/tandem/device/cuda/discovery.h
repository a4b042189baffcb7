// GPU discovery: how many GPUs the CUDA runtime sees (CUDA_VISIBLE_DEVICES applies), their names,
// memory, compute capability and peer access, or why there are none. CUDA-free header: the same
// API exists in a build without CUDA (cuda/no_cuda.cpp), reporting no GPUs. Never aborts.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "tandem/device/device.h"

namespace tandem::cuda {

struct GpuInfo {
  int index = 0;                 // cuda:<index>, counted among the visible GPUs
  std::string name;              // "NVIDIA H200"
  std::string pci_bus_id;        // "0000:19:00.0"
  std::size_t total_memory = 0;  // bytes
  std::size_t free_memory = 0;   // bytes, read now (all processes' use counted)
  int major = 0, minor = 0;      // compute capability, e.g. 9.0
  int multiprocessors = 0;
  std::vector<int> peers;  // the other GPUs this one can read and write directly
};

// Whether this tandem was built with the CUDA backend.
bool built();
// Whether at least one GPU is visible.
bool is_available();
// How many GPUs are visible (0 when none, the driver is missing, or built without CUDA).
int device_count();
// cuda:0 .. cuda:N-1.
std::vector<Device> devices();
// Why there is no GPU ("built without CUDA", the CUDA runtime's error, ...); empty when there is.
std::string unavailable_reason();
// CUDA_VISIBLE_DEVICES as set for this process, if it is set.
std::optional<std::string> visible_devices_variable();
// The CUDA runtime and driver versions as 1000 * major + 10 * minor (0 when absent).
int runtime_version();
int driver_version();

// Empty when cuda:<index> exists; else what to tell the user: "cuda:3 does not exist: 2 GPUs are
// visible (cuda:0, cuda:1)", or "cuda:0 does not exist: no CUDA GPU is visible (<reason>)".
std::string missing_gpu_message(int index);
// Throws missing_gpu_message(index) when cuda:<index> does not exist.
void check_index(int index);
// The figures of one GPU (check_index first); reads the free memory, creating the GPU's context.
GpuInfo gpu_info(int index);
// Whether GPU `from` can access GPU `to`'s memory directly (false for from == to).
bool can_access_peer(int from, int to);

}  // namespace tandem::cuda
