// The backend table and the CPU backend (64-byte aligned host memory, memcpy).
#include "tandem/device/allocator.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <new>

#include "tandem/base/check.h"

namespace tandem {
namespace {

class CpuBackend final : public DeviceBackend {
 public:
  void* allocate(std::size_t nbytes, int /*index*/) override {
    if (nbytes == 0) return nullptr;
    const std::size_t rounded = (nbytes + 63) / 64 * 64;
    void* ptr = std::aligned_alloc(64, rounded);
    TANDEM_CHECK(ptr != nullptr, "cpu: out of memory allocating ", nbytes, " bytes");
    return ptr;
  }
  void deallocate(void* ptr, std::size_t /*nbytes*/, int /*index*/) override { std::free(ptr); }
  void copy(void* dst, Device, const void* src, Device, std::size_t nbytes) override {
    if (nbytes) std::memcpy(dst, src, nbytes);
  }
  void synchronize(int) override {}
  int device_count() const override { return 1 << 16; }  // cpu:N are replicas, not hardware
};

std::array<DeviceBackend*, 2>& table() {
  static CpuBackend cpu;
  static std::array<DeviceBackend*, 2> backends{&cpu, nullptr};
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

}  // namespace tandem
