// The cross-process bucket reducer: bucket bookkeeping under one mutex, and a communication
// thread that flattens each bucket into its buffer (on the host, or on the GPU for the GPU group),
// sums it over the ranks (a repeated all-reduce bound to the buffer) and writes the mean back.
#include "tandem/parallel/process_reducer.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <utility>

#include "tandem/base/check.h"
#include "tandem/dist/process_group.h"
#include "tandem/ops/ops.h"
#include "tandem/parallel/reducer.h"
#include "tandem/tensor/factories.h"

namespace tandem::parallel {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// out[i] = in[i] * scale for n elements, converted through double.
template <typename To, typename From>
void scaled_copy(const From* in, To* out, std::int64_t n, double scale) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<To>(static_cast<double>(in[i]) * scale);
}

// Copies a gradient into the bucket buffer at `offset` (to_flat) or back out of it, times
// `scale`; gradient and buffer are float32 or float64 each.
void transfer(const Tensor& grad, const Tensor& flat, std::int64_t offset, bool to_flat,
              double scale) {
  const std::int64_t n = grad.numel();
  const bool g32 = grad.dtype() == DType::Float32, f32 = flat.dtype() == DType::Float32;
  if (g32 && f32) {
    to_flat ? scaled_copy(grad.data<float>(), flat.data<float>() + offset, n, scale)
            : scaled_copy(flat.data<float>() + offset, grad.data<float>(), n, scale);
  } else if (g32) {
    to_flat ? scaled_copy(grad.data<float>(), flat.data<double>() + offset, n, scale)
            : scaled_copy(flat.data<double>() + offset, grad.data<float>(), n, scale);
  } else if (f32) {
    to_flat ? scaled_copy(grad.data<double>(), flat.data<float>() + offset, n, scale)
            : scaled_copy(flat.data<float>() + offset, grad.data<double>(), n, scale);
  } else {
    to_flat ? scaled_copy(grad.data<double>(), flat.data<double>() + offset, n, scale)
            : scaled_copy(flat.data<double>() + offset, grad.data<double>(), n, scale);
  }
}

// x in `dtype` (x itself when it is already), on x's device.
Tensor as_dtype(const Tensor& x, DType dtype) {
  return x.dtype() == dtype ? x : ops::cast(x, dtype);
}

}  // namespace

struct ProcessReducer::Shared {
  ProcessReducer* self = nullptr;  // cleared by the destructor; hooks then do nothing
};

ProcessReducer::ProcessReducer(dist::ProcessGroup& group, std::vector<Tensor> params,
                               std::size_t bucket_bytes, std::size_t extras,
                               dist::ProcessGroup* gpu_group)
    : group_(group),
      params_(std::move(params)),
      shared_(std::make_shared<Shared>()),
      extras_(extras),
      summed_extras_(extras) {
  std::vector<std::size_t> order(params_.size()), nbytes(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const DType dt = params_[i].dtype();
    TANDEM_CHECK(dt == DType::Float32 || dt == DType::Float64, "ProcessReducer: parameter ", i,
                 " is ", dtype_name(dt), "; only float32 and float64 parameters are reduced");
    TANDEM_CHECK(params_[i].device().is_cpu() || params_[i].device().is_cuda(),
                 "ProcessReducer: parameter ", i, " is on ", params_[i].device(),
                 "; the cross-process reducer takes host and GPU gradients");
    order[i] = params_.size() - 1 - i;
    nbytes[i] = params_[i].nbytes();
    index_of_[params_[i].impl()] = i;
  }
  buckets_ = make_buckets(order, nbytes, bucket_bytes);
  if (extras_ > 0 && buckets_.empty()) buckets_.emplace_back();  // the extras' own bucket
  bucket_of_.resize(params_.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    std::int64_t n = 0;
    DType dtype = DType::Float32;  // float64 when any of its parameters is
    for (std::size_t i : buckets_[b]) {
      bucket_of_[i] = b;
      n += params_[i].numel();
      if (params_[i].dtype() == DType::Float64) dtype = DType::Float64;
    }
    if (b + 1 == buckets_.size()) n += static_cast<std::int64_t>(extras_);
    flat_.push_back(empty({n}, {.dtype = dtype}));
  }
  all_reduces_.resize(buckets_.size());
  if (gpu_group) {
    TANDEM_CHECK(gpu_group->size() == group.size() && gpu_group->rank() == group.rank(),
                 "ProcessReducer: the GPU group is rank ", gpu_group->rank(), " of ",
                 gpu_group->size(), ", the group rank ", group.rank(), " of ", group.size());
    gpu_group_ = gpu_group;
    gpu_flat_.resize(buckets_.size());
    gpu_all_reduces_.resize(buckets_.size());
  }
  pending_.resize(buckets_.size());
  handed_.assign(buckets_.size(), false);
  for (std::size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].size();
  shared_->self = this;
  thread_ = std::thread([this] { loop(); });
}

ProcessReducer::~ProcessReducer() {
  shared_->self = nullptr;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void ProcessReducer::attach_hooks() {
  const std::weak_ptr<Shared> weak = shared_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    params_[i].register_grad_ready_hook([weak, i](const Tensor&) {
      if (const auto shared = weak.lock(); shared && shared->self) shared->self->param_ready(i);
    });
  }
}

void ProcessReducer::arm() {
  std::lock_guard lock(mutex_);
  armed_ = true;
}

void ProcessReducer::weigh(double weight) {
  std::lock_guard lock(mutex_);
  weight_ = weight;
}

void ProcessReducer::params_ready(const std::vector<Tensor>& params) {
  for (const Tensor& p : params) {
    if (const auto it = index_of_.find(p.impl()); it != index_of_.end()) param_ready(it->second);
  }
}

void ProcessReducer::param_ready(std::size_t param) {
  std::lock_guard lock(mutex_);
  if (!armed_) return;
  const std::size_t b = bucket_of_[param];
  const bool waits_for_extras = extras_ > 0 && b + 1 == buckets_.size();
  if (pending_[b] > 0 && --pending_[b] == 0 && !waits_for_extras) {
    handed_[b] = true;
    changed_.notify_all();
  }
}

void ProcessReducer::finish(std::span<const double> extras, std::span<double> summed) {
  TANDEM_CHECK(extras.size() == extras_ && summed.size() == extras_, "ProcessReducer::finish: ",
               extras.size(), " extras in, room for ", summed.size(), ", expected ", extras_);
  const auto start = Clock::now();
  std::unique_lock lock(mutex_);
  if (extras_ > 0) {  // the last bucket's tail; its thread has not touched it yet this step
    const Tensor& flat = flat_.back();
    const std::int64_t tail = flat.numel() - static_cast<std::int64_t>(extras_);
    for (std::size_t i = 0; i < extras_; ++i) {
      const auto at = tail + static_cast<std::int64_t>(i);
      if (flat.dtype() == DType::Float32) {
        flat.data<float>()[at] = static_cast<float>(extras[i]);
      } else {
        flat.data<double>()[at] = extras[i];
      }
    }
  }
  armed_ = false;
  std::fill(handed_.begin(), handed_.end(), true);
  changed_.notify_all();
  changed_.wait(lock, [&] { return done_ == buckets_.size(); });
  stats_.wait_s += seconds_since(start);
  if (error_) std::rethrow_exception(error_);  // every later step fails the same way
  std::copy(summed_extras_.begin(), summed_extras_.end(), summed.begin());
  next_ = 0;
  done_ = 0;
  std::fill(handed_.begin(), handed_.end(), false);
  for (std::size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].size();
}

void ProcessReducer::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || (next_ < buckets_.size() && handed_[next_]); });
    if (stopping_) return;
    const std::size_t b = next_;
    if (!error_) {
      const double weight = weight_;
      lock.unlock();
      std::exception_ptr failed;
      const auto start = Clock::now();
      try {
        reduce(b, weight);
      } catch (...) {
        failed = std::current_exception();
      }
      lock.lock();
      stats_.communication_s += seconds_since(start);
      ++stats_.buckets;
      if (failed) error_ = failed;
    }
    ++next_;
    ++done_;
    changed_.notify_all();
  }
}

std::optional<Device> ProcessReducer::gpu_of(std::size_t bucket) const {
  if (!gpu_group_ || buckets_[bucket].empty()) return std::nullopt;
  const Device first = params_[buckets_[bucket].front()].device();
  for (std::size_t i : buckets_[bucket]) {
    TANDEM_CHECK(params_[i].device() == first, "ProcessReducer: bucket ", bucket,
                 " holds gradients on ", first, " and on ", params_[i].device(),
                 "; with a GPU group every gradient is on this process's one GPU");
  }
  if (!first.is_cuda()) return std::nullopt;
  return first;
}

void ProcessReducer::reduce(std::size_t bucket, double weight) {
  for (std::size_t i : buckets_[bucket]) {
    const Tensor& p = params_[i];
    if (!p.grad().defined()) {
      p.set_grad(zeros(p.shape(), {.dtype = p.dtype(), .device = p.device()}));
    }
    TANDEM_CHECK(p.grad().is_contiguous(), "ProcessReducer: a non-contiguous gradient");
  }
  if (const std::optional<Device> gpu = gpu_of(bucket)) {
    reduce_on_gpu(bucket, weight, *gpu);
    return;
  }
  const Tensor& flat = flat_[bucket];
  std::int64_t offset = 0;
  for (std::size_t i : buckets_[bucket]) {
    const Tensor& p = params_[i];
    // A GPU gradient is read through a host copy (which waits for the GPU work queued before it,
    // the backward's that produced it included).
    const Tensor grad = p.device().is_cpu() ? p.grad() : copy_to(p.grad(), kCPU);
    transfer(grad, flat, offset, /*to_flat=*/true, weight >= 0 ? weight : 1.0);
    offset += p.numel();
  }
  if (!all_reduces_[bucket]) all_reduces_[bucket] = group_.repeated_all_reduce(flat);
  all_reduces_[bucket]->run();
  const double mean = weight >= 0 ? 1.0 : 1.0 / static_cast<double>(group_.size());
  offset = 0;
  for (std::size_t i : buckets_[bucket]) {
    const Tensor& p = params_[i];
    if (p.device().is_cpu()) {
      transfer(p.grad(), flat, offset, /*to_flat=*/false, mean);
    } else {  // into a host tensor, then queued to the GPU ahead of the optimizer's work
      const Tensor result = empty(p.shape(), {.dtype = p.dtype()});
      transfer(result, flat, offset, /*to_flat=*/false, mean);
      copy_into(p.grad(), result);
    }
    offset += p.numel();
  }
  if (bucket + 1 == buckets_.size()) {  // the extras, summed (not averaged)
    for (std::size_t i = 0; i < extras_; ++i) {
      const std::int64_t at = offset + static_cast<std::int64_t>(i);
      summed_extras_[i] = flat.dtype() == DType::Float32 ? flat.data<float>()[at]
                                                         : flat.data<double>()[at];
    }
  }
}

// Everything here is queued on the thread's current stream of `gpu` (its compute stream, behind
// the backward's work that produced the gradients); the group orders its collective after it and
// returns once the sums are in place. The host waits only for the extras, read back at the end.
void ProcessReducer::reduce_on_gpu(std::size_t bucket, double weight, Device gpu) {
  const Tensor& host = flat_[bucket];  // its tail carries this rank's extras in
  Tensor& flat = gpu_flat_[bucket];
  if (!flat.defined()) flat = empty({host.numel()}, {.dtype = host.dtype(), .device = gpu});
  std::int64_t offset = 0;
  for (std::size_t i : buckets_[bucket]) {
    const Tensor grad = params_[i].grad().view({params_[i].numel()});
    copy_into(flat.narrow(0, offset, grad.numel()), as_dtype(grad, flat.dtype()));
    offset += grad.numel();
  }
  const Tensor grads = flat.narrow(0, 0, offset);
  if (weight >= 0) ops::scale_(grads, weight);
  const auto extras = static_cast<std::int64_t>(extras_);
  const bool last = bucket + 1 == buckets_.size();
  if (last && extras > 0) copy_into(flat.narrow(0, offset, extras), host.narrow(0, offset, extras));
  if (!gpu_all_reduces_[bucket]) gpu_all_reduces_[bucket] = gpu_group_->repeated_all_reduce(flat);
  gpu_all_reduces_[bucket]->run();
  if (weight < 0) ops::scale_(grads, 1.0 / static_cast<double>(group_.size()));
  offset = 0;
  for (std::size_t i : buckets_[bucket]) {
    const Tensor& grad = params_[i].grad();
    const Tensor sum = flat.narrow(0, offset, grad.numel()).view(grad.shape());
    copy_into(grad, as_dtype(sum, grad.dtype()));
    offset += grad.numel();
  }
  if (last && extras > 0) {  // the extras, summed (not averaged)
    const Tensor sums =
        convert_dtype(copy_to(flat.narrow(0, offset, extras), kCPU), DType::Float64);
    for (std::int64_t i = 0; i < extras; ++i) {
      summed_extras_[static_cast<std::size_t>(i)] = sums.data<double>()[i];
    }
  }
}

std::string ProcessReducer::layout() const {
  std::ostringstream out;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    out << "bucket " << b << ":";
    for (std::size_t i : buckets_[b]) out << " " << i;
    out << "\n";
  }
  return out.str();
}

CommStats ProcessReducer::take_stats() {
  std::lock_guard lock(mutex_);
  return std::exchange(stats_, CommStats{});
}

}  // namespace tandem::parallel
