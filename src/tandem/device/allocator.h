// The narrow device interface: allocate, free, and copy bytes between devices. The CPU backend is
// built in; a CUDA backend registers itself when tandem is built with CUDA.
#pragma once

#include <cstddef>

#include "tandem/device/device.h"

namespace tandem {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual void* allocate(std::size_t nbytes, int index) = 0;
  virtual void deallocate(void* ptr, std::size_t nbytes, int index) = 0;
  // Copies nbytes from src (on src_device) to dst (on dst_device); one of them is this backend's.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    std::size_t nbytes) = 0;
  // Sets nbytes at ptr (this backend's memory) to zero bits, in order with the work queued on the
  // device (a GPU: on the current stream, without waiting for it).
  virtual void zero(void* ptr, std::size_t nbytes, int index) = 0;
  virtual void synchronize(int index) = 0;
  virtual int device_count() const = 0;
};

// The backend of a device type; throws a clear error when that type is not available.
DeviceBackend& backend(DeviceType type);
void register_backend(DeviceType type, DeviceBackend* backend);
bool backend_available(DeviceType type);

// Checks that `device` exists (for example, that cuda:3 is a real GPU); throws naming it.
void check_device(const Device& device);

void* device_allocate(const Device& device, std::size_t nbytes);
void device_free(const Device& device, void* ptr, std::size_t nbytes);
void device_copy(void* dst, Device dst_device, const void* src, Device src_device,
                 std::size_t nbytes);
void device_zero(const Device& device, void* ptr, std::size_t nbytes);

}  // namespace tandem
