// NcclClique: NCCL communicators between several distinct GPUs of this process (ncclCommInitAll),
// one rank per GPU, each rank driven by its own thread, for DataParallel's gradient reduction.
// Every rank has a communication stream: a collective is queued there after the work the calling
// thread queued so far on its current stream, so compute goes on while it runs, and join() orders
// later compute after it. This header includes neither CUDA nor NCCL. Where tandem is built
// without NCCL (or without CUDA), nccl_clique_built() is false and constructing one fails.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/tensor/tensor.h"

namespace tandem::dist {

// Whether this build has the in-process NCCL communicators.
bool nccl_clique_built();
// The NCCL library's version ("2.28.3"); empty when not built or NCCL cannot say.
std::string nccl_version();

class NcclClique {
 public:
  // One rank per GPU in `cuda_devices` (rank r on cuda:cuda_devices[r]); the GPUs must be
  // distinct (NCCL refuses a GPU twice) and at least two.
  explicit NcclClique(const std::vector<int>& cuda_devices);
  ~NcclClique();  // aborts the communicators (never waits for a rank that did not come)
  NcclClique(const NcclClique&) = delete;
  NcclClique& operator=(const NcclClique&) = delete;

  std::size_t size() const;
  int device(std::size_t rank) const;

  // On rank's thread: queues on rank's communication stream, after the work queued so far on the
  // thread's current stream of that GPU, the sum over all ranks of `t` into rank `root`'s `t`
  // (ncclReduce). `t` is contiguous, float32 or float64, on rank's GPU, the same numel on every
  // rank; every rank must queue the same collectives in the same order. Returns at once.
  void reduce_sum(std::size_t rank, const Tensor& t, std::size_t root);
  // Runs `work` with rank's communication stream as the calling thread's current stream on its
  // GPU: the ops it queues follow the collectives queued so far.
  void on_communication_stream(std::size_t rank, const std::function<void()>& work);
  // The calling thread's current stream on rank's GPU waits (on the GPU) for everything queued so
  // far on rank's communication stream.
  void join(std::size_t rank);
  // Aborts every communicator: collectives waiting for a rank that never queued its part end, and
  // the communication streams are then waited for. The clique cannot be used afterwards.
  void abort();
  bool aborted() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::dist
