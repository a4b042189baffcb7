// --devices parsing and the CPU report of `tandem devices`.
#include "tandem/train/devices.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include <unistd.h>

#include "tandem/base/check.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/ops/cuda/cuda_ops.h"

namespace tandem::train {
namespace {

constexpr const char* kSpellings = "auto, cpu, cpu:N, cuda, or a list of cuda:I and cpu such as "
                                   "cuda:0,cuda:1 or cuda:0,cuda:0,cpu";

// The ISA extensions reported, in this order, with /proc/cpuinfo's flag names.
constexpr const char* kIsaFlags[] = {"sse4_2",      "avx",         "avx2",     "fma",
                                     "avx512f",     "avx512bw",    "avx512vl", "avx512_vnni",
                                     "avx512_bf16", "avx_vnni",    "amx_tile", "amx_bf16",
                                     "amx_int8"};

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return "";
  const auto last = s.find_last_not_of(" \t\r");
  return std::string(s.substr(first, last - first + 1));
}

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void require_cuda(std::string_view spec, std::string_view device) {
  TANDEM_CHECK(cuda_built(), "--devices ", spec, ": device '", device,
               "' does not exist: this tandem was built without CUDA (use --devices cpu or cpu:N)");
  TANDEM_CHECK(cuda_device_count() > 0, "--devices ", spec, ": device '", device,
               "' does not exist: no CUDA GPU is visible (", cuda::unavailable_reason(),
               "; use --devices cpu or cpu:N)");
}

}  // namespace

std::string DeviceLayout::describe() const {
  const bool all_cpu = std::all_of(devices.begin(), devices.end(),
                                   [](const Device& d) { return d.is_cpu(); });
  std::string out;
  for (const Device& d : devices) {
    if (!out.empty()) out += ",";
    if (d.is_cpu()) {  // among GPUs a CPU replica is "cpu", as --devices spells it
      out += devices.size() == 1 || !all_cpu ? std::string("cpu") : "cpu:" + std::to_string(d.index);
    } else {
      out += d.str();
    }
  }
  return out;
}

bool cuda_built() { return cuda::built(); }

// Auto takes the GPUs where this build has the CUDA kernels (ops/cuda: every op of the engine);
// a build with the device layer alone could list GPUs but not train on them.
bool auto_uses_gpus() { return ops::cuda::built() && cuda_device_count() > 0; }

int cuda_device_count() { return cuda::device_count(); }

std::string cuda_unavailable_reason() { return cuda::unavailable_reason(); }

DeviceLayout parse_devices(std::string_view spec) {
  DeviceLayout layout;
  if (spec == "auto") {
    const int gpus = auto_uses_gpus() ? cuda_device_count() : 0;
    for (int i = 0; i < gpus; ++i) layout.devices.emplace_back(DeviceType::CUDA, i);
    if (layout.devices.empty()) layout.devices.push_back(kCPU);
    return layout;
  }
  if (spec == "cpu") {
    layout.devices.push_back(kCPU);
    return layout;
  }
  if (spec.starts_with("cpu:")) {
    const std::string_view digits = spec.substr(4);
    int count = 0;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
    TANDEM_CHECK(!digits.empty() && ec == std::errc() && ptr == digits.data() + digits.size() &&
                     count >= 1 && count <= 1024,
                 "--devices ", spec, ": cpu:N needs a replica count N from 1 to 1024");
    for (int i = 0; i < count; ++i) layout.devices.emplace_back(DeviceType::CPU, i);
    return layout;
  }
  if (spec == "cuda") {
    require_cuda(spec, "cuda");
    for (int i = 0; i < cuda_device_count(); ++i) layout.devices.emplace_back(DeviceType::CUDA, i);
    return layout;
  }
  // A list: one replica per item; a GPU listed twice carries two replicas, and each "cpu" is one
  // more CPU replica (numbered in order).
  int cpu_replicas = 0;
  bool any_gpu = false;
  std::size_t start = 0;
  while (start <= spec.size()) {
    const std::size_t comma = spec.find(',', start);
    const std::string_view item =
        spec.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item == "cpu") {
      layout.devices.emplace_back(DeviceType::CPU, cpu_replicas++);
    } else {
      TANDEM_CHECK(item.starts_with("cuda:"), "--devices ", spec, ": '", item,
                   "' is not a device (expected ", kSpellings, ")");
      const Device device(item);
      require_cuda(spec, item);
      const std::string missing = cuda::missing_gpu_message(device.index);
      TANDEM_CHECK(missing.empty(), "--devices ", spec, ": ", missing);
      layout.devices.push_back(device);
      any_gpu = true;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  TANDEM_CHECK(any_gpu, "--devices ", spec, ": a list needs a GPU (cuda:I); ", cpu_replicas,
               " CPU replicas are spelled cpu:", cpu_replicas);
  return layout;
}

CpuInfo parse_cpu_info(std::string_view cpuinfo, std::string_view meminfo, int online_cores) {
  CpuInfo info;
  info.logical_cores = online_cores;
  std::set<std::string> flags;
  std::set<std::pair<std::string, std::string>> cores;
  std::string physical_id;
  std::istringstream lines{std::string(cpuinfo)};
  for (std::string line; std::getline(lines, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(std::string_view(line).substr(0, colon));
    const std::string value = trim(std::string_view(line).substr(colon + 1));
    if (key == "model name" && info.model.empty()) {
      info.model = value;
    } else if (key == "flags" && flags.empty()) {
      std::istringstream words(value);
      for (std::string w; words >> w;) flags.insert(w);
    } else if (key == "physical id") {
      physical_id = value;
    } else if (key == "core id") {
      cores.emplace(physical_id, value);
    }
  }
  info.physical_cores = static_cast<int>(cores.size());
  for (const char* flag : kIsaFlags) {
    if (flags.count(flag)) info.isa.emplace_back(flag);
  }
  std::istringstream mem{std::string(meminfo)};
  for (std::string line; std::getline(mem, line);) {
    std::istringstream words(line);
    std::string key;
    std::uint64_t kib = 0;
    if (!(words >> key >> kib)) continue;
    if (key == "MemTotal:") info.memory_total_bytes = kib * 1024;
    if (key == "MemAvailable:") info.memory_available_bytes = kib * 1024;
  }
  return info;
}

CpuInfo read_cpu_info() {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return parse_cpu_info(read_text("/proc/cpuinfo"), read_text("/proc/meminfo"),
                        online > 0 ? static_cast<int>(online)
                                   : static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace tandem::train
