// Bucket bookkeeping driven by the gradient-ready hooks, and the host reduction: a blocked,
// double-accumulated weighted sum in the plan's order (so 1 * g reproduces g exactly).
#include "tandem/parallel/reducer.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "tandem/base/check.h"
#include "tandem/tensor/factories.h"

namespace tandem::parallel {

std::vector<std::vector<std::size_t>> make_buckets(const std::vector<std::size_t>& order,
                                                   const std::vector<std::size_t>& nbytes,
                                                   std::size_t bucket_bytes) {
  std::vector<std::vector<std::size_t>> buckets;
  std::size_t filled = 0;
  for (std::size_t i : order) {
    if (buckets.empty() || filled >= bucket_bytes) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(i);
    filled += nbytes.at(i);
  }
  return buckets;
}

template <typename T>
void weighted_sum(T* out, const T* base, const std::vector<const T*>& srcs,
                  const std::vector<double>& coeffs, std::int64_t n) {
  constexpr std::int64_t kBlock = 1024;
  double acc[kBlock];
  for (std::int64_t start = 0; start < n; start += kBlock) {
    const std::int64_t len = std::min(kBlock, n - start);
    std::size_t k = 0;
    if (base) {
      for (std::int64_t j = 0; j < len; ++j) acc[j] = static_cast<double>(base[start + j]);
    } else {
      // The first term initialises the sum, so that a single 1 * g is g, sign of zero included.
      const T* s = srcs[0] + start;
      const double c = coeffs[0];
      for (std::int64_t j = 0; j < len; ++j) acc[j] = c * static_cast<double>(s[j]);
      k = 1;
    }
    for (; k < srcs.size(); ++k) {
      const T* s = srcs[k] + start;
      const double c = coeffs[k];
      for (std::int64_t j = 0; j < len; ++j) acc[j] += c * static_cast<double>(s[j]);
    }
    for (std::int64_t j = 0; j < len; ++j) out[start + j] = static_cast<T>(acc[j]);
  }
}

template void weighted_sum<float>(float*, const float*, const std::vector<const float*>&,
                                  const std::vector<double>&, std::int64_t);
template void weighted_sum<double>(double*, const double*, const std::vector<const double*>&,
                                   const std::vector<double>&, std::int64_t);

// ---- GradientReducer ----------------------------------------------------------------------------

namespace {

std::vector<std::size_t> reverse_order(std::size_t n) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = n - 1 - i;
  return order;
}

std::vector<std::size_t> param_bytes(const std::vector<Tensor>& params) {
  std::vector<std::size_t> nbytes;
  nbytes.reserve(params.size());
  for (const Tensor& p : params) nbytes.push_back(p.nbytes());
  return nbytes;
}

}  // namespace

GradientReducer::GradientReducer(const std::vector<std::vector<Tensor>>& params,
                                 const std::vector<std::vector<std::vector<Tensor>>>& stored,
                                 std::size_t bucket_bytes)
    : params_(params), stored_(stored), reduce_s_(params.size(), 0.0), bucket_bytes_(bucket_bytes) {
  TANDEM_CHECK(!params_.empty(), "DataParallel: no replicas to reduce over");
  TANDEM_CHECK(stored_.size() == params_.size(),
               "DataParallel: internal error, stored gradients "
               "for ",
               stored_.size(), " replicas, parameters for ", params_.size());
  // Parameters are used roughly in registration order, so their gradients arrive in reverse.
  buckets_ = make_buckets(reverse_order(params_[0].size()), param_bytes(params_[0]), bucket_bytes_);
  bucket_of_.assign(params_[0].size(), 0);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    for (std::size_t i : buckets_[b]) bucket_of_[i] = b;
  }
  for (std::size_t r = 0; r < params_.size(); ++r) state_.push_back(std::make_unique<PerReplica>());
}

void GradientReducer::begin(ReductionPlan plan) {
  TANDEM_CHECK(plan.base.size() == params_[0].size(), "DataParallel: internal error, plan for ",
               plan.base.size(), " parameters, model has ", params_[0].size());
  plan_ = std::move(plan);
  const std::size_t nparams = params_[0].size();
  for (std::size_t r = 0; r < state_.size(); ++r) {
    PerReplica& s = *state_[r];
    s.armed.store(false, std::memory_order_relaxed);
    s.pending.resize(buckets_.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b) s.pending[b] = buckets_[b].size();
    s.param_done.assign(nparams, false);
    s.bucket_done.assign(buckets_.size(), false);
    reduce_s_[r] = 0.0;
  }
  prepare();
}

void GradientReducer::arm(std::size_t replica) {
  state_.at(replica)->armed.store(true, std::memory_order_relaxed);
}

void GradientReducer::disarm(std::size_t replica) {
  state_.at(replica)->armed.store(false, std::memory_order_relaxed);
}

void GradientReducer::grad_ready(std::size_t replica, std::size_t param) {
  PerReplica& s = *state_[replica];
  if (!s.armed.load(std::memory_order_relaxed) || s.param_done[param]) return;
  s.param_done[param] = true;
  if (replica == 0 && !rebuilt_) observed_.push_back(param);
  const std::size_t b = bucket_of_[param];
  if (--s.pending[b] == 0) complete(replica, b);
}

void GradientReducer::finish(std::size_t replica) {
  PerReplica& s = *state_.at(replica);
  s.armed.store(false, std::memory_order_relaxed);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    if (!s.bucket_done[b]) complete(replica, b);
  }
}

void GradientReducer::complete(std::size_t replica, std::size_t bucket) {
  PerReplica& s = *state_[replica];
  s.bucket_done[bucket] = true;
  bucket_ready(replica, bucket);
}

void GradientReducer::rebuild_buckets() {
  if (rebuilt_) return;
  rebuilt_ = true;
  std::vector<std::size_t> order = observed_;
  std::vector<bool> seen(params_[0].size(), false);
  for (std::size_t i : order) seen[i] = true;
  for (std::size_t i : reverse_order(params_[0].size())) {
    if (!seen[i]) order.push_back(i);
  }
  observed_.clear();
  buckets_ = make_buckets(order, param_bytes(params_[0]), bucket_bytes_);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    for (std::size_t i : buckets_[b]) bucket_of_[i] = b;
  }
}

Tensor GradientReducer::contribution_grad(const Contribution& c, std::size_t param) const {
  if (c.stored < 0) return params_[c.replica][param].grad();
  return stored_[c.replica].at(static_cast<std::size_t>(c.stored))[param];
}

// ---- HostReducer --------------------------------------------------------------------------------

namespace {

// A contiguous copy of g in host memory (a copy even when g already is one: a staged gradient
// must not change when its replica's backward goes on).
Tensor host_copy(const Tensor& g) {
  Tensor host = g.device().is_cpu() ? contiguous_copy(g) : copy_to(g, kCPU);
  return host.is_contiguous() ? host : contiguous_copy(host);
}

void check_operand(const Tensor& g, const Tensor& master, const char* what) {
  TANDEM_CHECK(g.shape() == master.shape() && g.dtype() == master.dtype(), "DataParallel: ", what,
               " gradient of shape ", show(g.shape()), " (", g.dtype(),
               ") for a parameter of shape ", show(master.shape()), " (", master.dtype(), ")");
  TANDEM_CHECK(g.device().is_cpu(), "DataParallel: the host reducer got a gradient on ",
               g.device());
}

// Elements per chunk: large enough that a chunk's bookkeeping is noise, small enough that two
// replicas share a 1 MB bucket (a multiple of 16: no 64-byte line is written by two threads).
constexpr std::int64_t kChunkElements = 1 << 16;

}  // namespace

// One bucket's sum, set up by the replica that completed it last: every parameter's operands as
// raw pointers (the tensors kept alive here), the bucket's elements taken end to end and cut
// into chunks.
struct HostReducer::Job {
  struct Item {
    std::int64_t first = 0;  // the item's first element in the bucket's end-to-end numbering
    std::int64_t numel = 0;
    DType dtype = DType::Float32;
    void* out = nullptr;
    const void* base = nullptr;
    std::vector<const void*> srcs;
    std::vector<double> coeffs;
  };
  std::vector<Item> items;
  std::vector<Tensor> keep;  // outputs and contiguous copies the pointers refer to
  // A staged master: (parameter, host sum) pairs, copied into the master's .grad at the end.
  std::vector<std::pair<std::size_t, Tensor>> to_master;
  std::int64_t total = 0;
  int chunks = 0;
  std::atomic<std::size_t> arrivals{0};
  std::atomic<bool> ready{false};  // release: items, keep and the operands are published
  std::atomic<int> next{0};        // the next chunk to hand out
  std::atomic<int> done{0};        // chunks finished

  void reset() {
    items.clear();
    keep.clear();
    to_master.clear();
    total = 0;
    chunks = 0;
    arrivals.store(0, std::memory_order_relaxed);
    ready.store(false, std::memory_order_relaxed);
    next.store(0, std::memory_order_relaxed);
    done.store(0, std::memory_order_relaxed);
  }
};

HostReducer::HostReducer(const std::vector<std::vector<Tensor>>& params,
                         const std::vector<std::vector<std::vector<Tensor>>>& stored,
                         std::size_t bucket_bytes, BucketReduced on_reduced,
                         std::vector<bool> staged)
    : GradientReducer(params, stored, bucket_bytes),
      staged_(std::move(staged)),
      on_reduced_(std::move(on_reduced)) {
  if (staged_.empty()) staged_.assign(replicas(), false);
  TANDEM_CHECK(staged_.size() == replicas(), "DataParallel: internal error, staging flags for ",
               staged_.size(), " replicas, parameters for ", replicas());
  prepare();
}

HostReducer::~HostReducer() = default;

void HostReducer::prepare() {
  while (jobs_.size() < buckets().size()) jobs_.push_back(std::make_unique<Job>());
  for (auto& job : jobs_) job->reset();
  // Buckets beyond the current count (none after a rebuild, which keeps the count or lowers it)
  // count as reduced.
  set_up_.store(jobs_.size() - buckets().size(), std::memory_order_relaxed);
  reduced_.store(jobs_.size() - buckets().size(), std::memory_order_relaxed);
  // Staging slots, one per contribution and parameter, each written by its replica's thread only;
  // the plan's base (the master's gradient from before the cycle) is staged here, replicas idle.
  const std::size_t nparams = params_[0].size();
  host_grads_.assign(plan().contributions.size(), std::vector<Tensor>(nparams));
  host_base_.assign(nparams, Tensor());
  if (staged(0)) {
    for (std::size_t i = 0; i < plan().base.size(); ++i) {
      if (plan().base[i].defined()) host_base_[i] = host_copy(plan().base[i]);
    }
  }
}

void HostReducer::stage(std::size_t replica, std::size_t bucket) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Contribution>& contributions = plan().contributions;
  for (std::size_t k = 0; k < contributions.size(); ++k) {
    const Contribution& c = contributions[k];
    if (c.replica != replica || c.coeff == 0.0) continue;
    for (std::size_t i : buckets()[bucket]) {
      const Tensor g = contribution_grad(c, i);
      if (g.defined()) host_grads_[k][i] = host_copy(g);
    }
  }
  reduce_s_[replica] +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void HostReducer::bucket_ready(std::size_t replica, std::size_t bucket) {
  if (staged(replica)) stage(replica, bucket);
  Job& job = *jobs_[bucket];
  // acq_rel: this replica's gradients are published to, and the others' seen by, the last one.
  if (job.arrivals.fetch_add(1, std::memory_order_acq_rel) + 1 < replicas()) return;
  set_up(bucket);
  if (eager()) {
    for (int c = job.next.fetch_add(1); c < job.chunks; c = job.next.fetch_add(1)) {
      run_chunk(replica, bucket, c);
    }
  }
}

bool HostReducer::help(std::size_t replica) {
  for (std::size_t b = 0; b < buckets().size(); ++b) {
    Job& job = *jobs_[b];
    if (!job.ready.load(std::memory_order_acquire)) continue;
    if (job.next.load(std::memory_order_relaxed) >= job.chunks) continue;
    const int c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.chunks) continue;
    run_chunk(replica, b, c);
    return true;
  }
  return false;
}

bool HostReducer::all_set_up() const {
  return set_up_.load(std::memory_order_acquire) == jobs_.size();
}

bool HostReducer::all_reduced() const {
  return reduced_.load(std::memory_order_acquire) == jobs_.size();
}

void HostReducer::set_up(std::size_t bucket) {
  Job& job = *jobs_[bucket];
  const ReductionPlan& p = plan();
  for (std::size_t i : buckets()[bucket]) {
    const Tensor& master = params_[0][i];
    Job::Item item;
    for (std::size_t k = 0; k < p.contributions.size(); ++k) {
      const Contribution& c = p.contributions[k];
      if (c.coeff == 0.0) continue;
      Tensor g = staged(c.replica) ? host_grads_[k][i] : contribution_grad(c, i);
      if (!g.defined()) continue;
      check_operand(g, master, "a replica's");
      if (!g.is_contiguous()) {
        g = contiguous_copy(g);
        job.keep.push_back(g);
      }
      item.srcs.push_back(g.raw_data());
      item.coeffs.push_back(c.coeff);
    }
    Tensor base = staged(0) ? host_base_[i] : p.base[i];
    if (base.defined()) {
      check_operand(base, master, "the accumulated");
      if (!base.is_contiguous()) {
        base = contiguous_copy(base);
        job.keep.push_back(base);
      }
      item.base = base.raw_data();
    }
    if (item.srcs.empty() && !base.defined()) continue;  // no gradient anywhere: stays undefined
    TANDEM_CHECK(master.dtype() == DType::Float32 || master.dtype() == DType::Float64,
                 "DataParallel: cannot reduce gradients of dtype ", master.dtype());
    Tensor out;
    if (staged(0)) {  // summed on the host, copied into the master's .grad by the last chunk
      out = empty(master.shape(), {.dtype = master.dtype()});
      job.keep.push_back(out);
      job.to_master.emplace_back(i, out);
    } else {
      out = master.grad();
      if (!out.defined() || !out.is_contiguous()) {
        out = empty(master.shape(), {.dtype = master.dtype(), .device = master.device()});
        master.set_grad(out);
      }
    }
    item.out = out.raw_data();
    item.dtype = master.dtype();
    item.numel = master.numel();
    item.first = job.total;
    job.total += item.numel;
    job.items.push_back(std::move(item));
  }
  job.chunks = static_cast<int>(std::max<std::int64_t>(1, (job.total + kChunkElements - 1) /
                                                              kChunkElements));
  job.ready.store(true, std::memory_order_release);
  set_up_.fetch_add(1, std::memory_order_acq_rel);
}

namespace {

template <typename T>
void sum_range(void* out, const void* base, const std::vector<const void*>& srcs,
               const std::vector<double>& coeffs, std::int64_t b, std::int64_t e) {
  std::vector<const T*> from;
  from.reserve(srcs.size());
  for (const void* s : srcs) from.push_back(static_cast<const T*>(s) + b);
  weighted_sum<T>(static_cast<T*>(out) + b, base ? static_cast<const T*>(base) + b : nullptr,
                  from, coeffs, e - b);
}

}  // namespace

void HostReducer::run_chunk(std::size_t replica, std::size_t bucket, int chunk) {
  const auto start = std::chrono::steady_clock::now();
  Job& job = *jobs_[bucket];
  const std::int64_t lo = static_cast<std::int64_t>(chunk) * kChunkElements;
  const std::int64_t hi = std::min(job.total, lo + kChunkElements);
  for (const Job::Item& item : job.items) {
    const std::int64_t b = std::max<std::int64_t>(lo - item.first, 0);
    const std::int64_t e = std::min<std::int64_t>(hi - item.first, item.numel);
    if (b >= e) continue;
    if (item.dtype == DType::Float32) {
      sum_range<float>(item.out, item.base, item.srcs, item.coeffs, b, e);
    } else {
      sum_range<double>(item.out, item.base, item.srcs, item.coeffs, b, e);
    }
  }
  reduce_s_[replica] +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // acq_rel: the last chunk's runner sees every other chunk's sums before handing the bucket on.
  if (job.done.fetch_add(1, std::memory_order_acq_rel) + 1 < job.chunks) return;
  if (!job.to_master.empty()) {
    const auto copy_start = std::chrono::steady_clock::now();
    for (const auto& [i, sum] : job.to_master) {
      const Tensor& master = params_[0][i];
      Tensor grad = master.grad();
      if (!grad.defined() || !grad.is_contiguous()) {
        grad = empty(master.shape(), {.dtype = master.dtype(), .device = master.device()});
        master.set_grad(grad);
      }
      copy_into(grad, sum);
    }
    reduce_s_[replica] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count();
  }
  if (on_reduced_) {
    std::vector<Tensor> masters;
    for (std::size_t i : buckets()[bucket]) masters.push_back(params_[0][i]);
    on_reduced_(masters);
  }
  reduced_.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace tandem::parallel
