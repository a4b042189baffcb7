// Storage: one block of device memory, shared by every tensor that views it. Owns its memory
// (allocated through the device backend) or wraps memory owned elsewhere, with a deleter.
// It may also hold a layout twin: a kernel's copy of its elements in another layout (see below).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "tandem/device/device.h"

namespace tandem {

// A copy of a storage's elements in a kernel's own memory layout (oneDNN's blocked nChw16c and
// friends), kept so that the next kernel reading the same elements need not convert them again.
// The tensor layer does not look inside; ops/cpu derives from this. A twin is dropped the moment
// anyone takes a raw pointer to the storage's data (Storage::data, hence Tensor::raw_data and
// data<T>), because that pointer may be written through: a twin can never go stale. A pending
// twin holds the only copy of the values (the plain data was never written); taking a raw pointer
// first writes them back in plain layout through materialize().
class LayoutTwin {
 public:
  virtual ~LayoutTwin() = default;
  // Writes the twin's values, in the storage's plain layout, into the storage at `base`.
  virtual void materialize(void* base) const = 0;
};

class Storage {
 public:
  Storage(std::size_t nbytes, Device device);
  // Wraps external memory; `deleter` (may be empty) runs when the storage dies.
  Storage(void* data, std::size_t nbytes, Device device, std::function<void(void*)> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // The data, for reading or writing: materialises a pending twin, then drops any twin.
  void* data() const;
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool owns_memory() const { return owned_; }

  // ---- layout twins, for kernels (ops/cpu) only ----
  // The data without touching the twin: for a kernel that reads through the twin when it matches,
  // or writes a fresh output and then sets a pending twin.
  void* data_keeping_twin() const { return data_; }
  // The current twin, or null.
  std::shared_ptr<const LayoutTwin> twin() const;
  // Sets (replaces) the twin. `pending`: the plain data does not hold the values yet. Memory owned
  // elsewhere may be written without asking this storage, so it never gets a twin (ignored).
  void set_twin(std::shared_ptr<const LayoutTwin> twin, bool pending) const;

 private:
  void drop_twin() const;

  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_;
  std::function<void(void*)> deleter_;
  bool owned_ = true;
  mutable std::atomic<bool> has_twin_{false};  // fast check on every data()
  mutable std::mutex twin_mutex_;              // guards twin_ and pending_
  mutable std::shared_ptr<const LayoutTwin> twin_;
  mutable bool pending_ = false;
};

}  // namespace tandem
