// The backend table: which backend serves each device type (the CPU one is built in).
#include "tandem/device/allocator.h"

#include <array>

#include "tandem/base/check.h"
#include "tandem/device/cpu_allocator.h"

namespace tandem {
namespace {

std::array<DeviceBackend*, 2>& table() {
  static std::array<DeviceBackend*, 2> backends{&cpu_backend(), nullptr};
  return backends;
}

}  // namespace

DeviceBackend& backend(DeviceType type) {
  DeviceBackend* b = table()[static_cast<int>(type)];
  TANDEM_CHECK(b != nullptr, "device: ", (type == DeviceType::CUDA ? "cuda" : "cpu"),
               " is not available in this build of tandem");
  return *b;
}

void register_backend(DeviceType type, DeviceBackend* b) { table()[static_cast<int>(type)] = b; }

bool backend_available(DeviceType type) { return table()[static_cast<int>(type)] != nullptr; }

void check_device(const Device& device) {
  const int count = backend(device.type).device_count();
  TANDEM_CHECK(device.index >= 0 && device.index < count, "device: ", device.str(),
               " does not exist (", count, " device(s) of that type are visible)");
}

void* device_allocate(const Device& device, std::size_t nbytes) {
  return backend(device.type).allocate(nbytes, device.index);
}

void device_free(const Device& device, void* ptr, std::size_t nbytes) {
  if (ptr) backend(device.type).deallocate(ptr, nbytes, device.index);
}

void device_copy(void* dst, Device dst_device, const void* src, Device src_device,
                 std::size_t nbytes) {
  const Device& owner = dst_device.is_cuda() ? dst_device : src_device;
  backend(owner.type).copy(dst, dst_device, src, src_device, nbytes);
}

void device_zero(const Device& device, void* ptr, std::size_t nbytes) {
  if (nbytes > 0) backend(device.type).zero(ptr, nbytes, device.index);
}

}  // namespace tandem
