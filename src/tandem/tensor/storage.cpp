// Storage lifetime.
#include "tandem/tensor/storage.h"

#include "tandem/device/allocator.h"

namespace tandem {

Storage::Storage(std::size_t nbytes, Device device)
    : data_(device_allocate(device, nbytes)), nbytes_(nbytes), device_(device) {}

Storage::Storage(void* data, std::size_t nbytes, Device device,
                 std::function<void(void*)> deleter)
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)), owned_(false) {}

Storage::~Storage() {
  if (owned_) {
    device_free(device_, data_, nbytes_);
  } else if (deleter_) {
    deleter_(data_);
  }
}

}  // namespace tandem
