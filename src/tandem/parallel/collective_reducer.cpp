// CollectiveReducer: flat bucket buffers per replica, filled by ops on the replica's device and
// summed by the collective, in bucket order on every replica.
#include "tandem/parallel/collective_reducer.h"

#include <chrono>
#include <utility>

#include "tandem/base/check.h"
#include "tandem/ops/ops.h"
#include "tandem/tensor/factories.h"

namespace tandem::parallel {

CollectiveReducer::CollectiveReducer(const std::vector<std::vector<Tensor>>& params,
                                     const std::vector<std::vector<std::vector<Tensor>>>& stored,
                                     std::size_t bucket_bytes, std::vector<Device> devices,
                                     RankCollectiveFactory make_collective)
    : GradientReducer(params, stored, bucket_bytes),
      devices_(std::move(devices)),
      make_collective_(std::move(make_collective)) {
  TANDEM_CHECK(devices_.size() == replicas(), "DataParallel: internal error, ", devices_.size(),
               " devices for ", replicas(), " replicas");
  TANDEM_CHECK(make_collective_ != nullptr, "DataParallel: no collective to reduce with");
  for (std::size_t r = 0; r < replicas(); ++r) {
    for (const Tensor& p : params_[r]) {
      TANDEM_CHECK(p.device() == devices_[r], "DataParallel: replica ", r, " has a parameter on ",
                   p.device(), ", its device is ", devices_[r]);
      TANDEM_CHECK(p.dtype() == DType::Float32 || p.dtype() == DType::Float64,
                   "DataParallel: cannot reduce gradients of dtype ", p.dtype());
    }
  }
  collective_ = make_collective_(devices_);
  TANDEM_CHECK(collective_ != nullptr, "DataParallel: the collective factory made nothing");
  name_ = collective_->name();
  completed_.assign(replicas(), {});
  next_.assign(replicas(), 0);
}

CollectiveReducer::~CollectiveReducer() = default;

void CollectiveReducer::lay_out() {
  layout_.clear();
  for (const std::vector<std::size_t>& bucket : buckets()) {
    std::vector<Flat> flats;
    for (DType dtype : {DType::Float32, DType::Float64}) {
      Flat flat;
      flat.dtype = dtype;
      for (std::size_t i : bucket) {
        if (params_[0][i].dtype() != dtype) continue;
        flat.params.push_back(i);
        flat.offsets.push_back(flat.numel);
        flat.numel += params_[0][i].numel();
      }
      if (flat.params.empty()) continue;
      for (std::size_t r = 0; r < replicas(); ++r) {
        flat.buffers.push_back(empty({flat.numel}, {.dtype = dtype, .device = devices_[r]}));
      }
      flats.push_back(std::move(flat));
    }
    layout_.push_back(std::move(flats));
  }
  laid_out_for_ = buckets();
}

void CollectiveReducer::prepare() {
  if (!collective_) collective_ = make_collective_(devices_);  // after an abandon()
  if (laid_out_for_ != buckets()) lay_out();
  for (std::size_t r = 0; r < replicas(); ++r) {
    completed_[r].assign(buckets().size(), false);
    next_[r] = 0;
  }
  queued_.store(0, std::memory_order_relaxed);
}

Tensor CollectiveReducer::slot(const Flat& flat, std::size_t replica, std::size_t k) const {
  const Tensor& param = params_[replica][flat.params[k]];
  const Tensor& buffer = flat.buffers[replica];
  return make_view(buffer, param.shape(), contiguous_strides(param.shape()),
                   buffer.offset() + flat.offsets[k]);
}

void CollectiveReducer::bucket_ready(std::size_t replica, std::size_t bucket) {
  std::vector<bool>& completed = completed_[replica];
  completed[bucket] = true;
  std::size_t& next = next_[replica];
  while (next < completed.size() && completed[next]) queue(replica, next++);
}

void CollectiveReducer::queue(std::size_t replica, std::size_t bucket) {
  const auto start = std::chrono::steady_clock::now();
  const ReductionPlan& p = plan();
  for (const Flat& flat : layout_[bucket]) {
    ops::fill_(flat.buffers[replica], 0.0);
    for (std::size_t k = 0; k < flat.params.size(); ++k) {
      const std::size_t i = flat.params[k];
      const Tensor out = slot(flat, replica, k);
      const auto add = [&](const Tensor& g, double coeff, const char* what) {
        TANDEM_CHECK(g.shape() == out.shape() && g.dtype() == out.dtype() &&
                         g.device() == out.device(),
                     "DataParallel: ", what, " gradient of shape ", show(g.shape()), " (",
                     g.dtype(), ", on ", g.device(), ") for a parameter of shape ",
                     show(out.shape()), " (", out.dtype(), ", on ", out.device(), ")");
        ops::add_(out, g, coeff);
      };
      if (replica == 0 && p.base[i].defined()) add(p.base[i], 1.0, "the accumulated");
      for (const Contribution& c : p.contributions) {
        if (c.replica != replica || c.coeff == 0.0) continue;
        if (const Tensor g = contribution_grad(c, i); g.defined()) add(g, c.coeff, "a replica's");
      }
    }
    collective_->reduce_sum(replica, flat.buffers[replica], 0);
  }
  if (replica == 0) {
    // The master's .grad: made here (on the compute stream), written behind the sum (its old
    // contents were read by the fill above, which the sum follows).
    std::vector<std::pair<Tensor, Tensor>> copies;  // (grad, summed slot)
    for (const Flat& flat : layout_[bucket]) {
      for (std::size_t k = 0; k < flat.params.size(); ++k) {
        const Tensor& master = params_[0][flat.params[k]];
        Tensor grad = master.grad();
        if (!grad.defined() || !grad.is_contiguous() || grad.device() != master.device()) {
          grad = empty(master.shape(), {.dtype = master.dtype(), .device = master.device()});
          master.set_grad(grad);
        }
        copies.emplace_back(grad, slot(flat, 0, k));
      }
    }
    collective_->after_sums(0, [copies = std::move(copies)] {
      for (const auto& [grad, sum] : copies) copy_into(grad, sum);
    });
  }
  queued_.fetch_add(1, std::memory_order_acq_rel);
  reduce_s_[replica] +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void CollectiveReducer::join(std::size_t replica) {
  if (collective_) collective_->join(replica);
}

void CollectiveReducer::abandon() {
  if (!collective_) return;
  collective_->abort();
  collective_.reset();
}

bool CollectiveReducer::all_reduced() const {
  return queued_.load(std::memory_order_acquire) == replicas() * buckets().size();
}

}  // namespace tandem::parallel
