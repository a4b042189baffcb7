// ProcessGroup: the collectives data-parallel training needs across processes (all_reduce sum or
// mean, broadcast, all_gather, barrier), each bounded by a timeout. A failure or a timeout is a
// tandem::Error naming the operation, the timeout and the rank to blame (see PeerMonitor).
// Backends: Gloo (host tensors, gloo/) and NCCL (CUDA tensors, nccl/); init.h builds either.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tandem/tensor/tensor.h"

namespace tandem::dist {

class PeerMonitor;
class Store;
class TcpStoreServer;

class ProcessGroup;

enum class ReduceOp : std::uint8_t { Sum, Mean };
enum class Backend : std::uint8_t { Gloo, Nccl };
const char* backend_name(Backend backend);

// What a backend is built on: the store (and, on rank 0 with a TCP store, its server) and the
// monitor, all set up by init_process_group().
struct Rendezvous {
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{60000};
  std::string address;  // where the other ranks reach this one
  std::unique_ptr<TcpStoreServer> server;
  std::shared_ptr<Store> store;
  std::unique_ptr<PeerMonitor> monitor;
  Rendezvous();
  Rendezvous(Rendezvous&&) noexcept;
  Rendezvous& operator=(Rendezvous&&) noexcept;
  ~Rendezvous();
};

// One buffer summed over the ranks again and again, such as a gradient bucket: the backend sets
// up once what every all_reduce would set up anew (Gloo: a ring bound to the buffer, on
// connections of its own). Each run() is one collective of its group: numbered, bounded by the
// group's timeout, its failure the same error as all_reduce's.
class RepeatedAllReduce {
 public:
  using Body = std::function<void(std::uint32_t tag)>;  // tag: the collective's number
  RepeatedAllReduce(ProcessGroup& group, Tensor buffer, Body body);
  // Every rank's buffer becomes the element-wise sum over the ranks.
  void run();

 private:
  ProcessGroup& group_;
  Tensor buffer_;
  Body body_;
};

class ProcessGroup {
 public:
  using Timeout = std::chrono::milliseconds;
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rv_.rank; }
  int size() const { return rv_.size; }
  Timeout timeout() const { return rv_.timeout; }  // the default of every call
  virtual Backend backend() const = 0;

  // In place: every rank's `tensor` becomes the element-wise sum (or mean) over the ranks.
  // Contiguous float32, float64 (Sum also int64) tensors of the same shape on every rank.
  void all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum) {
    all_reduce(tensor, op, timeout());
  }
  void all_reduce(const Tensor& tensor, ReduceOp op, Timeout timeout);
  // In place: every rank's `tensor` becomes rank `root`'s.
  void broadcast(const Tensor& tensor, int root) { broadcast(tensor, root, timeout()); }
  void broadcast(const Tensor& tensor, int root, Timeout timeout);
  // output (size, *input.shape), contiguous, input's dtype: row r receives rank r's input.
  void all_gather(const Tensor& input, const Tensor& output) {
    all_gather(input, output, timeout());
  }
  void all_gather(const Tensor& input, const Tensor& output, Timeout timeout);
  // Returns once every rank has called it.
  void barrier() { barrier(timeout()); }
  void barrier(Timeout timeout);
  // `buffer` (contiguous float32 or float64, kept alive by the result) summed by each run().
  // Made, like every collective, in the same order on every rank.
  std::unique_ptr<RepeatedAllReduce> repeated_all_reduce(const Tensor& buffer);

  // The rendezvous of another group of the same ranks (an NCCL group beside a Gloo one), set up
  // through this group's store under keys "<name>/...": no store server and no monitor of its
  // own, so it is made while this group lives (its rank 0 serves a TCP store).
  Rendezvous companion(const std::string& name) const;

  // Collectives started so far (the number the monitor reports).
  std::uint64_t collectives() const { return seq_; }

 protected:
  explicit ProcessGroup(Rendezvous rendezvous);
  Store& store() { return *rv_.store; }
  const std::string& address() const { return rv_.address; }

  // The backend's collectives; `tag` is the collective's number, the same on every rank.
  virtual void do_all_reduce(const Tensor& tensor, ReduceOp op, Timeout timeout,
                             std::uint32_t tag) = 0;
  virtual void do_broadcast(const Tensor& tensor, int root, Timeout timeout, std::uint32_t tag) = 0;
  virtual void do_all_gather(const Tensor& input, const Tensor& output, Timeout timeout,
                             std::uint32_t tag) = 0;
  virtual void do_barrier(Timeout timeout, std::uint32_t tag) = 0;
  // What each RepeatedAllReduce::run() does; by default an all_reduce(sum) of the buffer.
  virtual RepeatedAllReduce::Body make_repeated_all_reduce(const Tensor& buffer);

 private:
  friend class RepeatedAllReduce;
  // Numbers the collective, tells the monitor, runs `body`, and turns any failure into one
  // error: "<backend> <what> (collective #n, timeout T s) failed after S s: <blame>: <cause>".
  void run(const std::string& what, Timeout timeout,
           const std::function<void(std::uint32_t)>& body);

  Rendezvous rv_;
  std::uint64_t seq_ = 0;
};

}  // namespace tandem::dist
