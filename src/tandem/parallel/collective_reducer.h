// CollectiveReducer: DataParallel's gradient reduction through a RankCollective, one rank per
// replica: NCCL for replicas each on a GPU of their own, summing on the GPUs while the backward
// goes on. When replica r completes bucket b (its gradients final), r's thread writes its share
// of the plan into its flat buffer for b (the master's also adds the plan's base): buffer = sum
// over r's contributions of coeff * g, by ops on its device (its compute stream on a GPU); then it
// queues the sum of the buffers into the master's (replica 0) and its backward carries on. Every
// replica queues the buckets in bucket order (one completed early waits for those before it), as
// NCCL needs the same collectives in the same order on every rank. The master copies each summed
// bucket into its .grad behind the sum (after_sums); join() orders each replica's later work after
// its sums, before the optimizer reads .grad and the next backward reuses the buffers. A failed
// step abandon()s the collective (an abort ends sums still waiting for a replica that failed) and
// the next reduction makes a new one.
// Arithmetic: in the parameters' dtype, in the collective's order, not the host reducer's float64
// sums: results agree with the host path to rounding, not bit for bit. A parameter with no
// gradient on any replica receives a zero gradient (no rank knows that the others had none).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tandem/parallel/rank_collective.h"
#include "tandem/parallel/reducer.h"

namespace tandem::parallel {

class CollectiveReducer final : public GradientReducer {
 public:
  // Replica r's parameters are on devices[r]'s memory. Makes the collective at once (its errors,
  // e.g. NCCL refusing the GPUs, come out here).
  CollectiveReducer(const std::vector<std::vector<Tensor>>& params,
                    const std::vector<std::vector<std::vector<Tensor>>>& stored,
                    std::size_t bucket_bytes, std::vector<Device> devices,
                    RankCollectiveFactory make_collective);
  ~CollectiveReducer() override;

  void join(std::size_t replica) override;
  void abandon() override;
  bool all_reduced() const override;
  const char* kind() const override { return name_.c_str(); }

 protected:
  void bucket_ready(std::size_t replica, std::size_t bucket) override;
  void prepare() override;

 private:
  // One dtype's parameters of a bucket laid end to end in a flat buffer per replica.
  struct Flat {
    DType dtype = DType::Float32;
    std::vector<std::size_t> params;
    std::vector<std::int64_t> offsets;  // [k] the first element of params[k] in the buffer
    std::int64_t numel = 0;
    std::vector<Tensor> buffers;  // [replica] (numel) on its device
  };
  void lay_out();  // the flat buffers for the current buckets
  void queue(std::size_t replica, std::size_t bucket);
  Tensor slot(const Flat& flat, std::size_t replica, std::size_t k) const;

  std::vector<Device> devices_;
  RankCollectiveFactory make_collective_;
  std::unique_ptr<RankCollective> collective_;
  std::string name_;
  std::vector<std::vector<Flat>> layout_;               // [bucket][dtype]
  std::vector<std::vector<std::size_t>> laid_out_for_;  // the buckets layout_ was made for
  std::vector<std::vector<bool>> completed_;  // [replica][bucket], touched by r's thread only
  std::vector<std::size_t> next_;             // [replica] the next bucket r queues
  std::atomic<std::size_t> queued_{0};        // (replica, bucket) pairs queued this reduction
};

}  // namespace tandem::parallel
