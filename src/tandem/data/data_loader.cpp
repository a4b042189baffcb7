// DataLoader internals. One EpochRun per epoch: the epoch's index order, and (with workers) threads
// that claim batch numbers in order, at most `capacity` ahead of the consumer, and leave each
// finished batch (or its exception) in a ring of slots the consumer drains in order.
#include "tandem/data/data_loader.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "tandem/data/pinned_memory.h"
#include "tandem/device/cuda/copy_ahead.h"
#include "tandem/device/cuda/discovery.h"

namespace tandem::data {
namespace internal {

class EpochRun {
 public:
  EpochRun(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const Compose> transforms,
           const DataLoaderOptions& options, std::vector<std::int64_t> indices, std::int64_t epoch,
           std::uint64_t seed, std::int64_t first_batch)
      : dataset_(std::move(dataset)),
        transforms_(std::move(transforms)),
        indices_(std::move(indices)),
        batch_size_(options.batch_size),
        epoch_(epoch),
        seed_(seed),
        pinned_(options.pin_memory),
        device_(options.device),
        num_batches_(batch_count(static_cast<std::int64_t>(indices_.size()), options.batch_size,
                                 options.drop_last)),
        next_deliver_(first_batch),
        next_claim_(first_batch),
        capacity_(std::max(1, options.num_workers * options.prefetch_factor)) {
    if (options.num_workers == 0) return;
    slots_.resize(static_cast<std::size_t>(capacity_));
    workers_.reserve(static_cast<std::size_t>(options.num_workers));
    try {
      for (int w = 0; w < options.num_workers; ++w) workers_.emplace_back([this] { work(); });
    } catch (...) {
      stop_and_join();  // the threads already started; the destructor will not run
      throw;
    }
  }

  ~EpochRun() { stop_and_join(); }
  EpochRun(const EpochRun&) = delete;
  EpochRun& operator=(const EpochRun&) = delete;

  static std::int64_t batch_count(std::int64_t samples, std::int64_t batch_size, bool drop_last) {
    return drop_last ? samples / batch_size : (samples + batch_size - 1) / batch_size;
  }

  // The next batch in order; false at the end of the epoch or once stopped. Rethrows the
  // exception of a batch that failed, after which the run yields nothing more.
  bool next(Batch& out) {
    if (workers_.empty()) {
      if (stopped_ || next_deliver_ >= num_batches_) return false;
      const std::int64_t b = next_deliver_++;
      try {
        deliver(produce(b), out);
      } catch (...) {
        stopped_ = true;
        throw;
      }
      return true;
    }
    std::unique_lock lock(mutex_);
    if (stopped_ || next_deliver_ >= num_batches_) return false;
    Slot& slot = slots_[slot_of(next_deliver_)];
    ready_.wait(lock, [&] { return slot.ready || stopped_; });
    if (!slot.ready) return false;
    slot.ready = false;
    ++next_deliver_;
    if (slot.error) {
      std::exception_ptr error = std::move(slot.error);
      slot.error = nullptr;
      stopped_ = true;
      lock.unlock();
      space_.notify_all();
      std::rethrow_exception(error);
    }
    Made made = std::move(slot.made);
    slot.made = {};
    lock.unlock();
    space_.notify_all();
    deliver(std::move(made), out);
    return true;
  }

  // Stops claiming new batches and waits for the workers; safe to call more than once and from
  // any thread but a worker.
  void stop_and_join() {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    space_.notify_all();
    ready_.notify_all();
    std::lock_guard join_lock(join_mutex_);
    for (auto& worker : workers_) {
      if (worker.joinable()) worker.join();
    }
  }

 private:
  // A batch as made, with its copy to the GPU when the loader delivers there.
  struct Made {
    Batch batch;
    std::optional<cuda::CopyAhead> copy;
  };
  struct Slot {
    bool ready = false;
    Made made;
    std::exception_ptr error;
  };

  // Hands a made batch out: a GPU batch once the calling thread's stream is ordered after its
  // copy, and with its memory marked as used there (its reuse waits for that stream's work).
  static void deliver(Made made, Batch& out) {
    if (made.copy) {
      made.copy->order_current_stream_after();
      made.copy->used_on_current_stream(made.batch.data.storage()->data());
      made.copy->used_on_current_stream(made.batch.target.storage()->data());
    }
    out = std::move(made.batch);
  }

  std::size_t slot_of(std::int64_t b) const { return static_cast<std::size_t>(b % capacity_); }

  void work() {
    for (;;) {
      std::int64_t b = 0;
      {
        std::unique_lock lock(mutex_);
        space_.wait(lock, [&] {
          return stopped_ || next_claim_ >= num_batches_ || next_claim_ < next_deliver_ + capacity_;
        });
        if (stopped_ || next_claim_ >= num_batches_) return;
        b = next_claim_++;
      }
      Made made;
      std::exception_ptr error;
      try {
        made = produce(b);
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard lock(mutex_);
        Slot& slot = slots_[slot_of(b)];
        slot.made = std::move(made);
        slot.error = error;
        slot.ready = true;
      }
      ready_.notify_all();
    }
  }

  // Batch b of the epoch: its samples from the dataset, then the transforms, then (for a GPU) its
  // copy there on the GPU's copy stream. Any error comes out as one naming the epoch and batch
  // (and the sample, when one sample is to blame).
  Made produce(std::int64_t b) const {
    const std::int64_t total = static_cast<std::int64_t>(indices_.size());
    const std::int64_t begin = b * batch_size_;
    const std::int64_t count = std::min(batch_size_, total - begin);
    const std::span<const std::int64_t> batch_indices(indices_.data() + begin,
                                                      static_cast<std::size_t>(count));
    const std::string where = concat("data loader: epoch ", epoch_, ", batch ", b);
    try {
      const BatchAllocator alloc{.pinned = pinned_};
      Batch batch = dataset_->get_batch(batch_indices, alloc);
      TANDEM_CHECK(batch.data.defined() && batch.target.defined(),
                   "get_batch returned an undefined tensor");
      TANDEM_CHECK(
          batch.data.dim() >= 1 && batch.data.size(0) == count && batch.data.device().is_cpu(),
          "get_batch returned data ", show(batch.data.shape()), " on ", batch.data.device(),
          " for ", count, " samples; expected (", count, ", ...) on cpu");
      TANDEM_CHECK(batch.target.dim() == 1 && batch.target.size(0) == count &&
                       batch.target.dtype() == DType::Int64 && batch.target.device().is_cpu(),
                   "get_batch returned target ", show(batch.target.shape()), " ",
                   batch.target.dtype(), "; expected (", count, ") int64 on cpu");
      if (!transforms_->empty()) {
        const TransformContext ctx{.indices = batch_indices,
                                   .seed = seed_,
                                   .epoch = epoch_,
                                   .slot = 0,
                                   .owns_input = batch.data.storage().use_count() == 1,
                                   .alloc = alloc};
        batch.data = transforms_->apply(batch.data, ctx);
        TANDEM_CHECK(batch.data.dim() >= 1 && batch.data.size(0) == count,
                     "transforms returned data ", show(batch.data.shape()), " for ", count,
                     " samples");
      }
      if (!batch.data.is_contiguous()) batch.data = contiguous(batch.data, alloc);
      if (!batch.target.is_contiguous()) batch.target = contiguous(batch.target, alloc);
      Made made{.batch = std::move(batch)};
      if (device_.is_cuda()) {
        made.copy.emplace(device_.index);
        {
          const auto on_copy_stream = made.copy->scope();
          made.batch.data = copy_to(made.batch.data, device_);
          made.batch.target = copy_to(made.batch.target, device_);
        }
        made.copy->done();
      }
      return made;
    } catch (const SampleError& e) {
      throw SampleError(e.index(), e.detail(), where);
    } catch (const std::exception& e) {
      throw Error(concat(where, " (samples at positions ", begin, "..", begin + count - 1,
                         " of the epoch): ", e.what()));
    } catch (...) {
      throw Error(concat(where, ": an exception that is not a std::exception"));
    }
  }

  template <typename... Args>
  static std::string concat(const Args&... args) {
    return tandem::detail::concat(args...);
  }

  static Tensor contiguous(const Tensor& x, const BatchAllocator& alloc) {
    Tensor out = alloc.empty(x.shape(), x.dtype());
    copy_into(out, x);
    return out;
  }

  const std::shared_ptr<const Dataset> dataset_;
  const std::shared_ptr<const Compose> transforms_;
  const std::vector<std::int64_t> indices_;
  const std::int64_t batch_size_;
  const std::int64_t epoch_;
  const std::uint64_t seed_;
  const bool pinned_;
  const Device device_;
  const std::int64_t num_batches_;

  std::mutex mutex_;               // guards everything below (with workers)
  std::condition_variable ready_;  // a slot was filled, or stopped
  std::condition_variable space_;  // a slot was drained, or stopped
  std::int64_t next_deliver_;      // next batch the consumer takes
  std::int64_t next_claim_;        // next batch a worker builds
  const std::int64_t capacity_;    // batches in flight at most
  bool stopped_ = false;
  std::vector<Slot> slots_;  // batch b lives in slots_[b % capacity_]
  std::vector<std::thread> workers_;
  std::mutex join_mutex_;
};

struct LoaderCore {
  std::shared_ptr<const Dataset> dataset;
  DataLoaderOptions options;
  std::shared_ptr<const Sampler> sampler;
  std::shared_ptr<const Compose> transforms;

  mutable std::mutex mutex;  // guards position, run, run_id
  LoaderState position;
  std::shared_ptr<EpochRun> run;
  std::uint64_t run_id = 0;

  std::int64_t num_batches() const {
    return EpochRun::batch_count(sampler->size(), options.batch_size, options.drop_last);
  }

  // Ends the current run as an abandoned or finished epoch: the next one starts at batch 0.
  void finish_locked() {
    if (run) {
      run->stop_and_join();
      run.reset();
    }
    position.epoch += 1;
    position.batch = 0;
  }

  std::uint64_t start() {
    std::lock_guard lock(mutex);
    if (run) finish_locked();
    if (position.batch > 0 && position.batch >= num_batches()) {
      position.epoch += 1;
      position.batch = 0;
    }
    std::vector<std::int64_t> indices = sampler->indices(position.epoch, position.seed);
    TANDEM_CHECK(static_cast<std::int64_t>(indices.size()) == sampler->size(),
                 "DataLoader: the sampler gave ", indices.size(), " indices for epoch ",
                 position.epoch, " but reports size ", sampler->size());
    run = std::make_shared<EpochRun>(dataset, transforms, options, std::move(indices),
                                     position.epoch, position.seed, position.batch);
    return ++run_id;
  }

  bool next(std::uint64_t id, Batch& out) {
    std::shared_ptr<EpochRun> current;
    {
      std::lock_guard lock(mutex);
      if (id != run_id || !run) return false;
      current = run;
    }
    bool got = false;
    try {
      got = current->next(out);
    } catch (...) {
      finish(id);
      throw;
    }
    std::lock_guard lock(mutex);
    if (id != run_id || !run) return false;
    if (got) {
      ++position.batch;
    } else {
      finish_locked();
    }
    return got;
  }

  void finish(std::uint64_t id) {
    std::lock_guard lock(mutex);
    if (id == run_id && run) finish_locked();
  }

  // Stops the run without counting the epoch as done (load_state, destruction).
  void stop() {
    std::shared_ptr<EpochRun> current;
    {
      std::lock_guard lock(mutex);
      current = std::move(run);
      run.reset();
      ++run_id;  // iterators of the stopped run now see the end
    }
    if (current) current->stop_and_join();
  }
};

}  // namespace internal

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, Options options)
    : core_(std::make_shared<internal::LoaderCore>()) {
  TANDEM_CHECK(dataset != nullptr, "DataLoader: dataset is null");
  TANDEM_CHECK(options.batch_size >= 1, "DataLoader: batch_size ", options.batch_size,
               " must be at least 1");
  TANDEM_CHECK(options.num_workers >= 0 && options.num_workers <= 1024, "DataLoader: num_workers ",
               options.num_workers, " must be in [0, 1024]");
  TANDEM_CHECK(options.prefetch_factor >= 1, "DataLoader: prefetch_factor ",
               options.prefetch_factor, " must be at least 1");
  TANDEM_CHECK(options.device.is_cpu() || options.device.is_cuda(), "DataLoader: cannot deliver "
               "batches to ", options.device);
  if (options.device.is_cuda()) {
    const std::string missing = cuda::missing_gpu_message(options.device.index);
    TANDEM_CHECK(missing.empty(), "DataLoader: batches to ", options.device, ": ", missing);
  }
  TANDEM_CHECK(!(options.sampler && options.shuffle),
               "DataLoader: shuffle = true with a sampler; the sampler decides the order (give it "
               "shuffle instead)");
  core_->sampler = options.sampler;
  if (!core_->sampler) {
    if (options.shuffle) {
      core_->sampler = std::make_shared<const RandomSampler>(dataset->size());
    } else {
      core_->sampler = std::make_shared<const SequentialSampler>(dataset->size());
    }
  }
  core_->transforms = std::make_shared<const Compose>(options.transforms);
  core_->position.seed = options.seed;
  core_->dataset = std::move(dataset);
  core_->options = std::move(options);
}

DataLoader::~DataLoader() {
  if (core_) core_->stop();
}

DataLoader::DataLoader(DataLoader&&) noexcept = default;

DataLoader& DataLoader::operator=(DataLoader&& other) noexcept {
  if (this != &other) {
    if (core_) core_->stop();
    core_ = std::move(other.core_);
  }
  return *this;
}

DataLoader::Iterator DataLoader::begin() {
  TANDEM_CHECK(core_ != nullptr, "DataLoader: use of a moved-from loader");
  Iterator it(core_, core_->start());
  ++it;
  return it;
}

std::int64_t DataLoader::size() const { return core_->num_batches(); }
std::int64_t DataLoader::num_samples() const { return core_->sampler->size(); }
const Dataset& DataLoader::dataset() const { return *core_->dataset; }
const DataLoader::Options& DataLoader::options() const { return core_->options; }
bool DataLoader::pins_memory() const {
  return core_->options.pin_memory && pinned_memory_available();
}

LoaderState DataLoader::state() const {
  std::lock_guard lock(core_->mutex);
  return core_->position;
}

void DataLoader::load_state(const LoaderState& state) {
  TANDEM_CHECK(state.epoch >= 0, "DataLoader::load_state: epoch ", state.epoch, " is negative");
  const std::int64_t batches = size();
  TANDEM_CHECK(state.batch >= 0 && state.batch <= batches, "DataLoader::load_state: batch ",
               state.batch, " is outside [0, ", batches, "] (batches per epoch: ", batches, ")");
  core_->stop();
  std::lock_guard lock(core_->mutex);
  core_->position = state;
}

// ---- Iterator ----

DataLoader::Iterator::Iterator(std::shared_ptr<internal::LoaderCore> core, std::uint64_t run)
    : core_(std::move(core)), run_(run), done_(false) {}

DataLoader::Iterator::Iterator(Iterator&& other) noexcept
    : core_(std::move(other.core_)),
      run_(other.run_),
      batch_(std::move(other.batch_)),
      done_(other.done_) {
  other.done_ = true;
}

DataLoader::Iterator& DataLoader::Iterator::operator=(Iterator&& other) noexcept {
  if (this != &other) {
    release();
    core_ = std::move(other.core_);
    run_ = other.run_;
    batch_ = std::move(other.batch_);
    done_ = other.done_;
    other.done_ = true;
  }
  return *this;
}

DataLoader::Iterator::~Iterator() { release(); }

void DataLoader::Iterator::release() {
  if (core_) core_->finish(run_);
  core_.reset();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  batch_ = {};
  if (done_ || !core_) {
    done_ = true;
    return *this;
  }
  done_ = true;
  if (core_->next(run_, batch_)) done_ = false;
  return *this;
}

}  // namespace tandem::data
