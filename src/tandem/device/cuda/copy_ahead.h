// Host-to-GPU copies made ahead of their use, on the GPU's copy stream, so that they overlap the
// compute stream's work (the DataLoader's workers copy each batch as they make it). CUDA-free
// header: layers above the device layer use it without CUDA; a build without CUDA has no GPU, and
// every call here throws the reason.
//   CopyAhead copy(gpu);                     // on a worker thread
//   { auto scope = copy.scope(); gpu_x = copy_to(x, cuda:gpu); }
//   copy.done();                             // marks the copies queued so far
//   ...                                      // on the training thread, before using gpu_x:
//   copy.order_current_stream_after(); copy.used_on_current_stream(gpu_x's storage);
#pragma once

#include <memory>

namespace tandem::cuda {

class StreamGuard;

class CopyAhead {
 public:
  explicit CopyAhead(int device);
  ~CopyAhead();
  CopyAhead(CopyAhead&&) noexcept;
  CopyAhead& operator=(CopyAhead&&) noexcept;
  CopyAhead(const CopyAhead&) = delete;
  CopyAhead& operator=(const CopyAhead&) = delete;

  // While the returned object lives, the calling thread's work on the device (copies, and the
  // memory they allocate) goes to its copy stream.
  class Scope {
   public:
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    friend class CopyAhead;
    explicit Scope(int device);
    std::unique_ptr<StreamGuard> guard_;
  };
  [[nodiscard]] Scope scope() const;

  // Marks what the copy stream has queued so far (call after the copies, outside the scope).
  void done();
  // The calling thread's current stream on the device waits, on the GPU, for the marked copies.
  void order_current_stream_after() const;
  // Memory the copies allocated (a storage's base pointer) is also used by the calling thread's
  // current stream: when it is freed, its reuse waits for the work queued there by then.
  void used_on_current_stream(void* ptr) const;

  int device() const { return device_; }

 private:
  struct Impl;
  int device_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::cuda
