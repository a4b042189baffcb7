// Device: where a tensor's memory lives and its kernels run ({type, index}); parsing of the
// user's spelling ("cpu", "cuda", "cuda:1") and listing of what exists.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace tandem {

enum class DeviceType : std::uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  Device() = default;
  Device(DeviceType t, int i = 0) : type(t), index(i) {}  // NOLINT: implicit from a type is handy
  explicit Device(std::string_view spelling);             // "cpu", "cpu:0", "cuda", "cuda:1"

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;  // "cpu", "cuda:1"
  bool operator==(const Device&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Device& device);

inline const Device kCPU{DeviceType::CPU, 0};

}  // namespace tandem
