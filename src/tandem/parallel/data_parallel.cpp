// DataParallel: replica set-up (broadcast, aliasing, hooks), the split of each micro-step into
// per-replica work, the replica task (forward, loss, backward, reductions through the hooks), and
// the bookkeeping of accumulation cycles, errors and accounting on the calling thread.
#include "tandem/parallel/data_parallel.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "tandem/autograd/autocast.h"
#include "tandem/autograd/grad_mode.h"
#include "tandem/device/cpu_allocator.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/device/cuda/memory.h"
#include "tandem/nn/modules/batchnorm.h"
#include "tandem/ops/ops.h"
#include "tandem/parallel/collective_reducer.h"
#include "tandem/parallel/nccl_collective.h"
#include "tandem/parallel/reducer.h"
#include "tandem/parallel/replica_group.h"
#include "tandem/parallel/replica_threads.h"
#include "tandem/parallel/sync_batchnorm.h"

namespace tandem::nn {

using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Rows [offset, offset + count) of t (N, ...), on `memory`. A view on the host; a copy elsewhere.
Tensor rows(const Tensor& t, std::int64_t offset, std::int64_t count, Device memory) {
  Shape shape = t.shape();
  shape[0] = count;
  Tensor view = make_view(t, shape, t.strides(), t.offset() + offset * t.stride(0));
  return copy_to(view, memory);
}

// Where a replica's tensors live: CPU replicas (cpu:N) all use host memory, GPU replicas their
// GPU's (two replicas may share one GPU).
Device memory_of(const Device& device) { return device.is_cpu() ? kCPU : device; }

}  // namespace

namespace detail {

// One forward/backward of a replica: rows [offset, offset + count) of the global batch.
struct Shard {
  std::int64_t offset = 0;
  std::int64_t count = 0;
  double weight = 0.0;         // count / N
  std::int64_t store_as = -1;  // >= 0: put the gradients aside as this stored set afterwards
  bool live = false;           // its backward produces the final gradients (hooks armed)
};

// What one replica does in a micro-step, and what it reports back.
struct Work {
  std::vector<Shard> shards;
  double rescale = 1.0;    // multiply the live gradients by this first (accumulation)
  double bn_weight = 0.0;  // n_r / N, for BatchNormStats::Global
  bool cycle_start = false;
  bool communicate = false;
  // Per shard, its rows already on the replica's memory (copied by the calling thread: see
  // DataParallelState::parameters_sync_on_caller), or empty: the replica takes them itself.
  std::vector<std::pair<Tensor, Tensor>> inputs;
  std::vector<double> losses;  // per shard
  DeviceStats stats;
  Clock::time_point finished;
};

struct DataParallelState {
  DataParallelOptions options;
  std::vector<Device> devices;
  std::vector<std::shared_ptr<Module>> modules;
  std::vector<std::function<Tensor(const Tensor&)>> forwards;
  std::vector<std::vector<Tensor>> params;   // [replica][param], trainable, deduplicated
  std::vector<std::vector<Tensor>> buffers;  // [replica][buffer]
  std::vector<std::vector<std::vector<Tensor>>> stored;  // [replica][set][param] (micro-shards)
  int threads = 1;

  // The current accumulation cycle.
  std::int64_t micro = 0;
  std::vector<Tensor> stash;               // [param] the model's .grad from before the cycle
  std::vector<double> acc_coeff;           // [replica] the coefficient of its live gradients
  std::vector<std::int64_t> stored_count;  // [replica]
  std::vector<parallel::Contribution> contributions;  // micro-shards, in shard order
  bool buckets_rebuilt = false;

  // The micro-step in flight.
  const Tensor* data = nullptr;
  const Tensor* target = nullptr;
  const LossFn* loss = nullptr;
  Precision autocast = Precision::Float32;  // the caller's, set on every replica thread
  std::vector<Work> work;

  DataParallelStats stats;
  std::vector<std::shared_ptr<MemoryAccount>> accounts;  // [replica] what its thread allocated
  std::unique_ptr<parallel::GradientReducer> reducer;
  std::unique_ptr<parallel::ReplicaGroup> group;
  std::unique_ptr<parallel::AutoBalancer> balancer;
  // Last, so that it is destroyed first: the threads are joined before anything they use goes.
  std::unique_ptr<parallel::ReplicaThreads> threads_pool;

  std::size_t size() const { return devices.size(); }
  bool sharded() const { return options.micro_shard > 0; }

  std::vector<double> proportions() const;
  void sync_parameters(std::size_t r);
  // Whether replica r's parameters are made equal to the master's on the calling thread before
  // the replicas start (a GPU on either side), rather than by r's own thread. A replica thread must
  // not wait for another GPU's stream: once replica 0 has queued its share of an NCCL sum, that
  // stream waits for r's share, which r queues only after its copy: a deadlock.
  bool parameters_sync_on_caller(std::size_t r) const {
    return r > 0 && (!devices[0].is_cpu() || !devices[r].is_cpu());
  }
  void run_replica(std::size_t r);
  double help_reduce(std::size_t r);  // returns the seconds it waited
  void reset_cycle();
};

std::vector<double> DataParallelState::proportions() const {
  switch (options.split) {
    case SplitPolicy::Even:
      return std::vector<double>(size(), 1.0 / static_cast<double>(size()));
    case SplitPolicy::Weighted: {
      double sum = 0.0;
      for (double p : options.proportions) sum += p;
      std::vector<double> out;
      for (double p : options.proportions) out.push_back(p / sum);
      return out;
    }
    case SplitPolicy::Auto:
      return balancer->proportions();
  }
  TANDEM_FAIL("DataParallel: unknown split policy");
}

// Makes replica r's parameters equal to the master's: alias its storage (Shared, both in host
// memory) or copy (Broadcast, or a replica on a GPU).
void DataParallelState::sync_parameters(std::size_t r) {
  NoGradGuard no_grad;
  const bool alias = options.parameter_sync == ParameterSync::Shared && devices[0].is_cpu() &&
                     devices[r].is_cpu();
  for (std::size_t i = 0; i < params[0].size(); ++i) {
    const Tensor& master = params[0][i];
    const Tensor& mine = params[r][i];
    if (alias) {
      if (mine.storage() == master.storage() && mine.offset() == master.offset() &&
          mine.strides() == master.strides() && mine.dtype() == master.dtype()) {
        continue;
      }
      TensorImpl* impl = mine.impl();
      impl->storage = master.storage();
      impl->strides = master.strides();
      impl->offset = master.offset();
      impl->dtype = master.dtype();
    } else {
      copy_into(mine, copy_to(master, mine.device()));
    }
  }
}

void DataParallelState::run_replica(std::size_t r) {
  Work& w = work[r];
  DeviceStats& st = w.stats;
  if (w.cycle_start && r > 0 && !parameters_sync_on_caller(r)) {
    const auto start = Clock::now();
    for (const Tensor& p : params[r]) p.set_grad(Tensor());
    sync_parameters(r);
    st.optimizer_s += seconds_since(start);
  }
  if (w.rescale != 1.0) {
    const auto start = Clock::now();
    for (const Tensor& p : params[r]) {
      if (Tensor g = p.grad(); g.defined()) ops::scale_(g, w.rescale);
    }
    st.backward_s += seconds_since(start);
  }
  std::optional<BatchNormTrainOverride> sync_bn;
  if (options.batchnorm == BatchNormStats::Global && !w.shards.empty()) {
    const parallel::SyncBatchNormContext context{
        .group = group.get(), .replica = r, .grad_weight = w.bn_weight};
    sync_bn.emplace([context](const Tensor& x, const Tensor& rm, const Tensor& rv,
                              const Tensor& weight, const Tensor& bias, double momentum,
                              double eps) {
      return parallel::sync_batch_norm(x, rm, rv, weight, bias, momentum, eps, context);
    });
  }
  const Device memory = memory_of(devices[r]);
  const AutocastGuard autocast_here(autocast);
  bool went_live = false;
  for (std::size_t j = 0; j < w.shards.size(); ++j) {
    const Shard& shard = w.shards[j];
    group->check_not_aborted();
    const auto t0 = Clock::now();
    const double wait0 = group->wait_seconds(r);
    const bool given = j < w.inputs.size();
    const Tensor x = given ? w.inputs[j].first : rows(*data, shard.offset, shard.count, memory);
    const Tensor y = given ? w.inputs[j].second : rows(*target, shard.offset, shard.count, memory);
    const Tensor output = forwards[r](x);
    const Tensor loss_value = (*loss)(output, y);
    TANDEM_CHECK(loss_value.defined() && loss_value.numel() == 1,
                 "DataParallel: the loss function must return a scalar, got ",
                 loss_value.defined() ? to_string(loss_value.shape()) : std::string("nothing"));
    w.losses.push_back(loss_value.item());
    const auto t1 = Clock::now();
    const double wait1 = group->wait_seconds(r);
    st.forward_s += std::chrono::duration<double>(t1 - t0).count() - (wait1 - wait0);

    const double reduce0 = reducer->reduce_seconds(r);
    if (shard.live) reducer->arm(r);
    loss_value.backward();
    if (shard.live) {
      reducer->finish(r);
      went_live = true;
    }
    const double wait2 = group->wait_seconds(r);
    st.backward_s += seconds_since(t1) - (wait2 - wait1) - (reducer->reduce_seconds(r) - reduce0);
    if (shard.store_as >= 0) {
      std::vector<Tensor>& set = stored[r].at(static_cast<std::size_t>(shard.store_as));
      set.resize(params[r].size());
      for (std::size_t i = 0; i < params[r].size(); ++i) {
        set[i] = params[r][i].grad();
        params[r][i].set_grad(Tensor());
      }
    }
  }
  // A replica without a live backward this step still completes every bucket (with nothing).
  if (w.communicate && !went_live) reducer->finish(r);
  if (w.communicate) reducer->join(r);
  const double helped_wait = w.communicate && reducer->deferred() ? help_reduce(r) : 0.0;
  if (w.communicate) st.reduction_s = reducer->reduce_seconds(r);
  st.wait_s = group->wait_seconds(r) + helped_wait;
  w.finished = Clock::now();
}

// Replica r's backward has ended: it runs the buckets' waiting sum chunks. While other replicas
// are still in their backward (more buckets to come) it waits for their chunks, for up to
// kHelpWait; leaving earlier is always safe, as the last replica to finish finds every bucket set
// up and runs what is left.
double DataParallelState::help_reduce(std::size_t r) {
  constexpr auto kHelpWait = std::chrono::milliseconds(2);
  constexpr auto kBusy = std::chrono::microseconds(50);
  double waited = 0.0;
  std::optional<Clock::time_point> idle_since;
  for (;;) {
    if (reducer->help(r)) {
      if (idle_since) waited += seconds_since(*idle_since);
      idle_since.reset();
      continue;
    }
    if (reducer->all_set_up()) break;  // the rest is claimed by replicas still running it
    const auto now = Clock::now();
    if (!idle_since) idle_since = now;
    if (now - *idle_since >= kHelpWait) break;
    group->check_not_aborted();
    if (now - *idle_since >= kBusy) {
      sched_yield();
    } else {
      parallel::spin_pause();
    }
  }
  if (idle_since) waited += seconds_since(*idle_since);
  return waited;
}

void DataParallelState::reset_cycle() {
  for (std::size_t i = 0; i < stash.size(); ++i) params[0][i].set_grad(stash[i]);
  for (std::size_t r = 1; r < size(); ++r) {
    for (const Tensor& p : params[r]) p.set_grad(Tensor());
  }
  for (std::size_t r = 0; r < size(); ++r) reducer->disarm(r);
  reducer->abandon();
  for (auto& s : stored) s.clear();
  stash.clear();
  contributions.clear();
  std::fill(acc_coeff.begin(), acc_coeff.end(), 0.0);
  std::fill(stored_count.begin(), stored_count.end(), 0);
  micro = 0;
}

}  // namespace detail

// ---- construction -------------------------------------------------------------------------------

namespace {

void check_options(const DataParallelOptions& o, std::size_t devices) {
  TANDEM_CHECK(o.accumulate >= 1, "DataParallel: accumulate must be at least 1, got ",
               o.accumulate);
  TANDEM_CHECK(o.bucket_bytes > 0, "DataParallel: bucket_bytes must be positive");
  TANDEM_CHECK(!o.collective || !o.on_bucket_reduced,
               "DataParallel: a collective of your own sums the buckets across the replicas; "
               "on_bucket_reduced (handing each summed bucket on) needs the host reducer");
  TANDEM_CHECK(o.threads_per_replica >= 0, "DataParallel: threads_per_replica must be >= 0, got ",
               o.threads_per_replica);
  TANDEM_CHECK(o.micro_shard >= 0, "DataParallel: micro_shard must be >= 0, got ", o.micro_shard);
  TANDEM_CHECK(o.micro_shard == 0 || o.batchnorm == BatchNormStats::PerReplica,
               "DataParallel: micro_shard needs per-replica batch-norm statistics (global "
               "statistics would need every shard's forward before any backward)");
  if (o.split == SplitPolicy::Weighted) {
    TANDEM_CHECK(o.proportions.size() == devices,
                 "DataParallel: a weighted split needs one "
                 "proportion per device: ",
                 o.proportions.size(), " given for ", devices, " devices");
    double sum = 0.0;
    for (double p : o.proportions) {
      TANDEM_CHECK(std::isfinite(p) && p >= 0.0, "DataParallel: split proportion ", p,
                   " must be finite and non-negative");
      sum += p;
    }
    TANDEM_CHECK(sum > 0.0, "DataParallel: split proportions are all zero");
  } else {
    TANDEM_CHECK(o.proportions.empty(),
                 "DataParallel: proportions are only used by "
                 "SplitPolicy::Weighted");
  }
}

// CPU replicas are numbered (cpu:0, cpu:1, ...) and each listed once; a GPU may carry several
// replicas (cuda:0 twice), and GPUs and CPU replicas mix.
void check_devices(const std::vector<Device>& devices) {
  TANDEM_CHECK(!devices.empty(), "DataParallel: no devices given");
  std::set<int> cpus;
  for (const Device& d : devices) {
    if (d.is_cpu()) {
      TANDEM_CHECK(cpus.insert(d.index).second, "DataParallel: device ", d, " is listed twice");
      continue;
    }
    TANDEM_CHECK(d.is_cuda(), "DataParallel: ", d, " is not a device DataParallel can use");
    const std::string missing = cuda::missing_gpu_message(d.index);
    TANDEM_CHECK(missing.empty(), "DataParallel: ", missing);
  }
}

// Several replicas, each on a GPU of its own.
bool own_gpus(const std::vector<Device>& devices) {
  std::set<int> seen;
  for (const Device& d : devices) {
    if (!d.is_cuda() || !seen.insert(d.index).second) return false;
  }
  return devices.size() >= 2;
}

// The trainable parameters of a module, deduplicated (tied weights count once), with their names.
NamedTensors trainable_parameters(const Module& m) {
  NamedTensors out;
  std::set<const TensorImpl*> seen;
  for (auto& [name, p] : m.named_parameters()) {
    if (p.requires_grad() && seen.insert(p.impl()).second) out.emplace_back(name, p);
  }
  return out;
}

}  // namespace

void DataParallel::init(std::vector<ReplicaModel> replicas, std::vector<Device> devices,
                        DataParallelOptions options) {
  check_devices(devices);
  check_options(options, devices.size());
  auto state = std::make_shared<detail::DataParallelState>();
  detail::DataParallelState& s = *state;
  s.options = std::move(options);
  s.devices = std::move(devices);
  const std::size_t n = s.devices.size();

  const Module& master = *replicas[0].module;
  const NamedTensors master_params = trainable_parameters(master);
  for (const auto& [name, t] : master.state_dict()) {
    TANDEM_CHECK(t.device() == memory_of(s.devices[0]), "DataParallel: the model's ", name,
                 " is on ", t.device(), ", not on ", s.devices[0]);
  }
  const StateDict master_state = master.state_dict();
  for (std::size_t r = 0; r < n; ++r) {
    Module& m = *replicas[r].module;
    if (r > 0) {
      m.to(memory_of(s.devices[r]));
      m.load_state_dict(master_state);  // the broadcast; checks names and shapes
      for (auto& [name, p] : m.named_parameters()) {
        for (auto& [mname, mp] : master.named_parameters()) {
          if (mname == name && mp.requires_grad() != p.requires_grad()) {
            p.set_requires_grad(mp.requires_grad());
          }
        }
      }
    }
    const NamedTensors mine = trainable_parameters(m);
    TANDEM_CHECK(mine.size() == master_params.size(), "DataParallel: replica ", r, " has ",
                 mine.size(), " trainable parameters, the model ", master_params.size());
    std::vector<Tensor> params;
    for (std::size_t i = 0; i < mine.size(); ++i) {
      TANDEM_CHECK(mine[i].first == master_params[i].first &&
                       mine[i].second.shape() == master_params[i].second.shape(),
                   "DataParallel: replica ", r, " parameter ", i, " is ", mine[i].first, " ",
                   show(mine[i].second.shape()), ", the model's is ", master_params[i].first, " ",
                   show(master_params[i].second.shape()));
      params.push_back(mine[i].second);
    }
    s.params.push_back(std::move(params));
    std::vector<Tensor> buffers;
    for (auto& [name, b] : m.named_buffers()) buffers.push_back(b);
    s.buffers.push_back(std::move(buffers));
    s.modules.push_back(replicas[r].module);
    s.forwards.push_back(std::move(replicas[r].forward));
  }
  for (std::size_t r = 1; r < n; ++r) s.sync_parameters(r);

  // Gradient-ready hooks. They hold the state weakly: the model (replica 0) outlives us.
  std::weak_ptr<detail::DataParallelState> weak = state;
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < s.params[r].size(); ++i) {
      s.params[r][i].register_grad_ready_hook([weak, r, i](const Tensor&) {
        auto st = weak.lock();
        if (!st || !st->reducer->armed(r)) return;  // not a communicating backward of ours
        st->group->check_not_aborted();
        st->reducer->grad_ready(r, i);
      });
    }
  }

  s.stored.resize(n);
  s.acc_coeff.assign(n, 0.0);
  s.stored_count.assign(n, 0);
  s.work.resize(n);
  std::vector<Device> memories;
  for (const Device& d : s.devices) memories.push_back(memory_of(d));
  if (s.options.collective) {
    s.reducer = std::make_unique<parallel::CollectiveReducer>(
        s.params, s.stored, s.options.bucket_bytes, memories, s.options.collective);
  } else if (own_gpus(s.devices) && s.options.gpu_reduction == GpuReduction::Nccl &&
             s.options.on_bucket_reduced == nullptr && parallel::nccl_collective_built()) {
    s.reducer = std::make_unique<parallel::CollectiveReducer>(
        s.params, s.stored, s.options.bucket_bytes, memories, parallel::make_nccl_collective);
  } else {
    std::vector<bool> staged(n);
    for (std::size_t r = 0; r < n; ++r) staged[r] = !s.devices[r].is_cpu();
    s.reducer = std::make_unique<parallel::HostReducer>(
        s.params, s.stored, s.options.bucket_bytes, s.options.on_bucket_reduced, staged);
  }
  s.group = std::make_unique<parallel::ReplicaGroup>(n);
  if (s.options.split == SplitPolicy::Auto) {
    s.balancer = std::make_unique<parallel::AutoBalancer>(n, s.options.auto_split);
  }

  const std::vector<int> cpus = parallel::available_cpus();
  s.threads = s.options.threads_per_replica > 0 ? s.options.threads_per_replica
                                                : std::max(1, static_cast<int>(cpus.size() / n));
  if (s.options.pinning == Pinning::Cores) {
    TANDEM_CHECK(cpus.size() >= n, "DataParallel: pinning ", n, " replicas needs at least ", n,
                 " CPUs, this process may use ", cpus.size());
  }
  std::vector<parallel::ThreadSetup> setups(n);
  for (std::size_t r = 0; r < n; ++r) {
    setups[r].threads = s.threads;
    if (s.options.pinning == Pinning::Cores) {
      for (int j = 0; j < s.threads; ++j) {
        setups[r].cpus.push_back(
            cpus[(r * static_cast<std::size_t>(s.threads) + static_cast<std::size_t>(j)) %
                 cpus.size()]);
      }
    }
  }
  // Unpinned, replica 0 runs on the caller's thread: a step then wakes one thread fewer, twice.
  s.threads_pool = std::make_unique<parallel::ReplicaThreads>(
      std::move(setups), s.options.pinning == Pinning::None ? parallel::CallerRole::RunsFirst
                                                            : parallel::CallerRole::Waits);

  s.stats.devices.resize(n);
  for (std::size_t r = 0; r < n; ++r) {
    s.stats.devices[r].device = s.devices[r];
    s.accounts.push_back(std::make_shared<MemoryAccount>());
  }
  s.stats.threads_per_replica = s.threads;
  s.stats.proportions = s.proportions();
  state_ = std::move(state);
}

DataParallel::~DataParallel() {
  if (state_) state_->threads_pool.reset();
}

// ---- the step -----------------------------------------------------------------------------------

StepResult DataParallel::forward_backward(const Tensor& data, const Tensor& target,
                                          const LossFn& loss, double weight, bool end_cycle) {
  detail::DataParallelState& s = *state_;
  const std::size_t n = s.size();
  TANDEM_CHECK(loss != nullptr, "DataParallel: no loss function");
  TANDEM_CHECK(data.defined() && data.dim() >= 1 && data.size(0) > 0,
               "DataParallel: the batch must have at least one row, got ",
               data.defined() ? to_string(data.shape()) : std::string("an undefined tensor"));
  TANDEM_CHECK(target.defined() && target.dim() >= 1 && target.size(0) == data.size(0),
               "DataParallel: target ",
               target.defined() ? to_string(target.shape()) : std::string("(undefined)"),
               " does not have the batch's ", data.size(0), " rows");
  const std::int64_t batch = data.size(0);
  const std::int64_t k_total = s.options.accumulate;
  const bool cycle_start = s.micro == 0;
  const bool communicate = end_cycle || s.micro + 1 == k_total;
  const std::vector<double> props = s.proportions();
  const bool at_least_one = s.options.split == SplitPolicy::Auto;

  // Shards per replica, in global order.
  std::vector<std::vector<detail::Shard>> shards(n);
  if (s.sharded()) {
    const std::int64_t size = s.options.micro_shard;
    const std::int64_t count = (batch + size - 1) / size;
    const data::BatchShares shares =
        at_least_one ? parallel::split_at_least_one(count, props) : data::split_batch(count, props);
    for (std::size_t r = 0; r < n; ++r) {
      for (std::int64_t j = 0; j < shares.counts[r]; ++j) {
        const std::int64_t first = (shares.offsets[r] + j) * size;
        const std::int64_t rows_here = std::min(size, batch - first);
        shards[r].push_back(
            {.offset = first,
             .count = rows_here,
             .weight = static_cast<double>(rows_here) / static_cast<double>(batch)});
      }
    }
  } else {
    const data::BatchShares shares =
        at_least_one ? parallel::split_at_least_one(batch, props) : data::split_batch(batch, props);
    for (std::size_t r = 0; r < n; ++r) {
      if (shares.counts[r] == 0) continue;
      shards[r].push_back(
          {.offset = shares.offsets[r], .count = shares.counts[r], .weight = shares.weight(r)});
    }
  }

  if (cycle_start) {
    s.stash.assign(s.params[0].size(), Tensor());
    for (std::size_t i = 0; i < s.params[0].size(); ++i) {
      s.stash[i] = s.params[0][i].grad();
      s.params[0][i].set_grad(Tensor());
    }
  }
  TANDEM_CHECK(std::isfinite(weight) && weight >= 0.0 && weight <= 1.0,
               "DataParallel: micro-step weight ", weight, " is not in [0, 1]");
  const double micro_weight = weight > 0.0 ? weight : 1.0 / static_cast<double>(k_total);
  std::vector<bool> active(n, false);
  for (std::size_t r = 0; r < n; ++r) {
    detail::Work& w = s.work[r];
    w = detail::Work{};
    w.cycle_start = cycle_start;
    w.communicate = communicate;
    w.stats.device = s.devices[r];
    w.shards = shards[r];
    active[r] = !w.shards.empty();
    std::int64_t samples = 0;
    for (const auto& shard : w.shards) samples += shard.count;
    w.stats.samples = samples;
    w.bn_weight = static_cast<double>(samples) / static_cast<double>(batch);
    if (s.sharded()) {
      for (std::size_t j = 0; j < w.shards.size(); ++j) {
        detail::Shard& shard = w.shards[j];
        shard.live = communicate && j + 1 == w.shards.size();
        if (!shard.live) shard.store_as = s.stored_count[r]++;
        s.contributions.push_back(
            {.replica = r, .stored = shard.store_as, .coeff = shard.weight * micro_weight});
      }
      s.stored[r].resize(static_cast<std::size_t>(s.stored_count[r]));
    } else if (!w.shards.empty()) {
      detail::Shard& shard = w.shards[0];
      shard.live = communicate;
      const double coeff = shard.weight * micro_weight;
      if (s.acc_coeff[r] > 0.0 && s.acc_coeff[r] != coeff) w.rescale = s.acc_coeff[r] / coeff;
      s.acc_coeff[r] = coeff;
    }
  }
  if (communicate) {
    parallel::ReductionPlan plan;
    if (s.sharded()) {
      plan.contributions = s.contributions;
    } else {
      for (std::size_t r = 0; r < n; ++r) {
        if (s.acc_coeff[r] > 0.0)
          plan.contributions.push_back({.replica = r, .coeff = s.acc_coeff[r]});
      }
    }
    plan.base = s.stash;
    s.reducer->begin(std::move(plan));
  }
  s.group->begin_step(active);

  // Buffers (batch-norm running stats) and the train/eval flag follow the model.
  {
    NoGradGuard no_grad;
    const bool training = s.modules[0]->is_training();
    for (std::size_t r = 1; r < n; ++r) {
      if (s.modules[r]->is_training() != training) s.modules[r]->train(training);
      for (std::size_t j = 0; j < s.buffers[r].size(); ++j) {
        copy_into(s.buffers[r][j], copy_to(s.buffers[0][j], s.buffers[r][j].device()));
      }
    }
  }

  // What would make a replica thread wait for another GPU's stream is done here, before the
  // replicas start (see parameters_sync_on_caller): the parameters' copies at a cycle's start, and
  // the rows of a batch that is on a GPU for the replicas elsewhere.
  try {
    for (std::size_t r = 1; cycle_start && r < n; ++r) {
      if (!s.parameters_sync_on_caller(r)) continue;
      const auto start = Clock::now();
      for (const Tensor& p : s.params[r]) p.set_grad(Tensor());
      s.sync_parameters(r);
      s.work[r].stats.optimizer_s += seconds_since(start);
    }
    for (std::size_t r = 0; r < n; ++r) {
      const Device memory = memory_of(s.devices[r]);
      const auto elsewhere_gpu = [&](const Tensor& t) {
        return !t.device().is_cpu() && t.device() != memory;
      };
      if (!elsewhere_gpu(data) && !elsewhere_gpu(target)) continue;
      for (const detail::Shard& shard : s.work[r].shards) {
        s.work[r].inputs.emplace_back(rows(data, shard.offset, shard.count, memory),
                                      rows(target, shard.offset, shard.count, memory));
      }
    }
  } catch (...) {
    s.reset_cycle();
    throw;
  }

  s.data = &data;
  s.target = &target;
  s.loss = &loss;
  s.autocast = autocast_precision();
  for (const auto& account : s.accounts) account->reset_peak();
  for (const Device& d : s.devices) {
    if (d.is_cuda()) cuda::reset_peak_memory(d.index);
  }
  std::vector<std::exception_ptr> errors = s.threads_pool->run([&s](std::size_t r) {
    try {
      const MemoryAccountScope charged(s.accounts[r]);
      s.run_replica(r);
    } catch (...) {
      s.group->abort();
      throw;
    }
  });
  s.data = nullptr;
  s.target = nullptr;
  s.loss = nullptr;

  std::exception_ptr first, first_primary;
  for (auto& e : errors) {
    if (!e) continue;
    if (!first) first = e;
    if (first_primary) continue;
    try {
      std::rethrow_exception(e);
    } catch (const parallel::ReplicaAborted&) {
    } catch (...) {
      first_primary = e;
    }
  }
  if (first) {
    s.reset_cycle();
    std::rethrow_exception(first_primary ? first_primary : first);
  }
  TANDEM_CHECK(!communicate || s.reducer->all_reduced(),
               "DataParallel: internal error, a gradient bucket was left unsummed");

  StepResult result;
  result.samples = batch;
  Clock::time_point last = s.work[0].finished;
  for (const auto& w : s.work) last = std::max(last, w.finished);
  std::vector<std::int64_t> samples(n);
  std::vector<double> compute(n);
  for (std::size_t r = 0; r < n; ++r) {
    detail::Work& w = s.work[r];
    for (std::size_t j = 0; j < w.shards.size(); ++j)
      result.loss += w.shards[j].weight * w.losses[j];
    w.stats.wait_s += std::chrono::duration<double>(last - w.finished).count();
    // A GPU replica: its GPU's peak in use this step (shared by the replicas of one GPU).
    w.stats.peak_bytes = s.devices[r].is_cuda() ? cuda::memory_stats(s.devices[r].index).peak_in_use
                                                : s.accounts[r]->peak.load();
    result.devices.push_back(w.stats);
    s.stats.devices[r] += w.stats;
    samples[r] = w.stats.samples;
    // Busy time, the sums it ran included: with deferred sums an idle replica takes them on, so
    // balancing forward + backward + sums ends the replicas' work together.
    compute[r] = w.stats.forward_s + w.stats.backward_s + w.stats.reduction_s;
  }
  ++s.stats.micro_steps;
  s.micro = communicate ? 0 : s.micro + 1;
  result.synchronized = communicate;
  if (communicate) {
    if (!s.buckets_rebuilt) {
      s.reducer->rebuild_buckets();
      s.buckets_rebuilt = true;
    }
    s.stash.clear();
    s.contributions.clear();
    for (auto& st : s.stored) st.clear();
    std::fill(s.acc_coeff.begin(), s.acc_coeff.end(), 0.0);
    std::fill(s.stored_count.begin(), s.stored_count.end(), 0);
  }
  if (s.balancer) {
    s.balancer->record(samples, compute, s.micro == 0);
    s.stats.proportions = s.proportions();
  }
  return result;
}

double DataParallel::step(optim::Optimizer& optimizer) {
  detail::DataParallelState& s = *state_;
  TANDEM_CHECK(s.micro == 0, "DataParallel::step: the accumulation cycle is not finished (",
               s.micro, " of ", s.options.accumulate, " micro-steps done)");
  const std::size_t n = s.size();
  // The checks and the state (buffers, step counts) here; the element loops, the whole cost, are
  // shared by the replica threads: replica r updates the r-th of n equal slices of all the
  // parameters' elements taken end to end. With the replicas' OpenMP thread counts, not the
  // caller's: an update with the calling thread's own team (all cores by default) leaves spinning
  // threads that compete with the replicas (measured: 2.3-2.6 ms per step on cpu:2 against
  // 0.2-0.6 ms on a replica's thread).
  std::vector<optim::Optimizer::RangeUpdate> updates;
  {
    const MemoryAccountScope charged(s.accounts[0]);
    updates = optimizer.prepare_step();
  }
  std::int64_t total = 0;
  for (const auto& u : updates) total += u.numel;
  // A master on a GPU: its update is queued by replica 0 alone (as multi-tensor kernels).
  const std::size_t sharing = s.devices[0].is_cpu() ? n : 1;
  std::vector<double> secs(n, 0.0);
  const auto errors = s.threads_pool->run([&](std::size_t r) {
    const MemoryAccountScope charged(s.accounts[r]);
    const auto start = Clock::now();
    // Slice bounds rounded to 16 elements (a 64-byte line of float32): no line is shared.
    if (r >= sharing) return;
    if (sharing == 1) {  // a GPU master: replica 0 queues the whole update, batched
      optim::Optimizer::run_whole(updates);
      secs[r] = seconds_since(start);
      return;
    }
    const auto bound = [&](std::size_t k) {
      const std::int64_t at =
          total * static_cast<std::int64_t>(k) / static_cast<std::int64_t>(sharing);
      return k == sharing ? total : at / 16 * 16;
    };
    const std::int64_t lo = bound(r), hi = bound(r + 1);
    std::int64_t offset = 0;
    for (const auto& u : updates) {
      const std::int64_t b = std::max<std::int64_t>(lo - offset, 0);
      const std::int64_t e = std::min<std::int64_t>(hi - offset, u.numel);
      if (b < e) u.run(b, e);
      offset += u.numel;
    }
    secs[r] = seconds_since(start);
  });
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  const double wall = *std::max_element(secs.begin(), secs.end());
  for (std::size_t r = 0; r < n; ++r) {
    s.stats.devices[r].optimizer_s += secs[r];
    s.stats.devices[r].wait_s += wall - secs[r];
    s.stats.devices[r].peak_bytes =
        std::max(s.stats.devices[r].peak_bytes, s.accounts[r]->peak.load());
  }
  ++s.stats.optimizer_steps;
  return wall;
}

std::size_t DataParallel::size() const { return state_->size(); }
const std::vector<Device>& DataParallel::devices() const { return state_->devices; }
Module& DataParallel::replica(std::size_t index) const { return *state_->modules.at(index); }
std::vector<double> DataParallel::proportions() const { return state_->proportions(); }
int DataParallel::threads_per_replica() const { return state_->threads; }
const DataParallelStats& DataParallel::stats() const { return state_->stats; }
const std::vector<std::vector<std::size_t>>& DataParallel::buckets() const {
  return state_->reducer->buckets();
}
const char* DataParallel::reduction() const { return state_->reducer->kind(); }

std::vector<Device> cpu_replicas(int n) {
  TANDEM_CHECK(n >= 1, "cpu_replicas: need at least one replica, got ", n);
  std::vector<Device> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) out.emplace_back(DeviceType::CPU, i);
  return out;
}

}  // namespace tandem::nn
