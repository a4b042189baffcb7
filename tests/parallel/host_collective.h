// HostCollective: a RankCollective over host tensors for the tests, keeping NCCL's contract and
// checking its callers keep theirs. A sum is queued and returns at once; it is carried out (in
// rank order) by the thread of the last rank to queue it; work after_sums() runs once the rank's
// earlier sums are done, on whichever thread finishes them. Every rank must queue sums of the same
// size, dtype and root in the same order: a mismatch throws on the rank that breaks it. join()
// does not wait: once every replica has returned, every rank has queued every sum, so all have run.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tandem/ops/ops.h"
#include "tandem/tandem.h"

namespace tandem::testing {

class HostCollective final : public parallel::RankCollective {
 public:
  struct Counters {
    std::atomic<int> made{0};     // collectives made
    std::atomic<int> sums{0};     // sums carried out
    std::atomic<int> aborted{0};  // collectives aborted
  };

  HostCollective(std::size_t ranks, std::shared_ptr<Counters> counters)
      : ranks_(ranks), counters_(std::move(counters)), issued_(ranks, 0), queues_(ranks) {
    ++counters_->made;
  }

  // The factory DataParallelOptions::collective takes.
  static parallel::RankCollectiveFactory factory(std::shared_ptr<Counters> counters) {
    return [counters](const std::vector<Device>& devices) {
      return std::make_unique<HostCollective>(devices.size(), counters);
    };
  }

  const char* name() const override { return "host-collective"; }

  void reduce_sum(std::size_t rank, const Tensor& t, std::size_t root) override {
    std::lock_guard lock(mutex_);
    TANDEM_CHECK(!aborted_, "host collective: used after an abort");
    TANDEM_CHECK(t.is_contiguous() && t.device().is_cpu(), "host collective: rank ", rank,
                 " queued a tensor that is not a contiguous host tensor");
    const std::size_t seq = issued_[rank]++;
    if (seq >= sums_.size()) sums_.resize(seq + 1);
    Sum& s = sums_[seq];
    if (s.parts.empty()) {
      s.parts.resize(ranks_);
      s.numel = t.numel();
      s.dtype = t.dtype();
      s.root = root;
    }
    TANDEM_CHECK(t.numel() == s.numel && t.dtype() == s.dtype && root == s.root,
                 "host collective: rank ", rank, "'s sum number ", seq, " has ", t.numel(), " ",
                 t.dtype(), " elements into rank ", root, "; another rank's has ", s.numel, " ",
                 s.dtype, " into rank ", s.root, " (the ranks queue different sums)");
    s.parts[rank] = t;
    queues_[rank].push_back({.sum = static_cast<std::int64_t>(seq)});
    if (++s.arrived == ranks_) {
      Tensor acc = contiguous_copy(s.parts[0]);
      for (std::size_t r = 1; r < ranks_; ++r) ops::add_(acc, s.parts[r]);
      copy_into(s.parts[s.root], acc);
      s.parts.assign(ranks_, Tensor());
      s.done = true;
      ++counters_->sums;
    }
    drain();
  }

  void after_sums(std::size_t rank, std::function<void()> work) override {
    std::lock_guard lock(mutex_);
    TANDEM_CHECK(!aborted_, "host collective: used after an abort");
    queues_[rank].push_back({.work = std::move(work)});
    drain();
  }

  void join(std::size_t /*rank*/) override {}

  void abort() override {
    std::lock_guard lock(mutex_);
    aborted_ = true;
    for (auto& q : queues_) q.clear();
    ++counters_->aborted;
  }

  // Sums queued by some rank and not yet carried out, and work still waiting for them.
  std::size_t pending() const {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const auto& q : queues_) n += q.size();
    return n;
  }

 private:
  struct Sum {
    std::vector<Tensor> parts;  // [rank], released once summed
    std::int64_t numel = 0;
    DType dtype = DType::Float32;
    std::size_t root = 0;
    std::size_t arrived = 0;
    bool done = false;
  };
  struct Item {
    std::int64_t sum = -1;  // a sum's number, or -1 for work
    std::function<void()> work;
  };

  // Under the lock: every rank's items whose sums are done, and the work behind them, in order.
  void drain() {
    for (auto& q : queues_) {
      while (!q.empty()) {
        Item& item = q.front();
        if (item.sum >= 0) {
          if (!sums_[static_cast<std::size_t>(item.sum)].done) break;
        } else {
          item.work();
        }
        q.pop_front();
      }
    }
  }

  const std::size_t ranks_;
  const std::shared_ptr<Counters> counters_;
  mutable std::mutex mutex_;
  std::vector<Sum> sums_;                 // by number, in the order the ranks queue them
  std::vector<std::size_t> issued_;       // [rank] sums queued so far
  std::vector<std::deque<Item>> queues_;  // [rank]
  bool aborted_ = false;
};

}  // namespace tandem::testing
