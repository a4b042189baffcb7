// Storage: one block of device memory, shared by every tensor that views it. Owns its memory
// (allocated through the device backend) or wraps memory owned elsewhere, with a deleter.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "tandem/device/device.h"

namespace tandem {

class Storage {
 public:
  Storage(std::size_t nbytes, Device device);
  // Wraps external memory; `deleter` (may be empty) runs when the storage dies.
  Storage(void* data, std::size_t nbytes, Device device, std::function<void(void*)> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_;
  std::function<void(void*)> deleter_;
  bool owned_ = true;
};

}  // namespace tandem
