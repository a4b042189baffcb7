// GlooProcessGroup: tandem's collectives on Gloo's algorithms (ring all-reduce, one-to-all
// broadcast, ring all-gather, barrier) over the TCP transport. Tensors must be in host memory.
// Repeated all-reduces (gradient buckets) run Gloo's halving-doubling all-reduce bound to their
// buffer, on a second full mesh whose pairs are in synchronous mode: the calling thread reads its
// socket itself, instead of waiting for Gloo's event-loop thread to hand each message over. On
// this kind of machine (2 processes, loopback, 1 MiB: the seed CNN's gradient) the synchronous
// pairs take the chunked ring from 0.85-1.2 ms to 0.67-0.8 ms, and halving-doubling, which
// exchanges each half once each way instead of a notification per chunk, to 0.31-0.40 ms.
#include "tandem/dist/gloo/gloo_process_group.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <cstdlib>
#include <mutex>

#include "tandem/base/check.h"
#include "tandem/dist/store.h"

namespace tandem::dist {
namespace {

// tandem's Store as Gloo's, for connectFullMesh: every wait bounded by the group's timeout.
class GlooStoreView final : public gloo::rendezvous::Store {
 public:
  // Keys under `prefix` ("gloo/", or "gloo-buckets/" for the second mesh).
  GlooStoreView(dist::Store& store, std::chrono::milliseconds timeout, std::string prefix)
      : store_(store), timeout_(timeout), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string value = store_.get(prefix_ + key, timeout_);
    return {value.begin(), value.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> full;
    for (const auto& k : keys) full.push_back(prefix_ + k);
    store_.wait(full, timeout);
  }

 private:
  dist::Store& store_;
  std::chrono::milliseconds timeout_;
  std::string prefix_;
};

template <typename T>
gloo::AllreduceOptions::Func sum_of() {
  return static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>);
}

void check_host(const Tensor& t) {
  TANDEM_CHECK(t.device().is_cpu(), "gloo: the tensor is on ", t.device(),
               "; Gloo reduces host memory (use the nccl backend for CUDA tensors)");
}

class GlooProcessGroup final : public ProcessGroup {
 public:
  explicit GlooProcessGroup(Rendezvous rv) : ProcessGroup(std::move(rv)) {
    gloo::transport::tcp::attr attr;
    if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
      attr.iface = iface;
    } else {
      attr.hostname = address();
    }
    try {
      device_ = gloo::transport::tcp::CreateDevice(attr);
      context_ = connect("gloo/");
    } catch (const std::exception& e) {
      TANDEM_FAIL("gloo: rank ", rank(), " could not connect to the other ", size() - 1,
                  " ranks within ", timeout().count() / 1000.0, " s (its address ", address(),
                  "): ", e.what());
    }
  }
  Backend backend() const override { return Backend::Gloo; }

 private:
  // A full mesh of pairs to every other rank, its rendezvous keys under `prefix`.
  std::shared_ptr<gloo::rendezvous::Context> connect(const std::string& prefix) {
    auto context = std::make_shared<gloo::rendezvous::Context>(rank(), size());
    context->setTimeout(timeout());
    GlooStoreView view(store(), timeout(), prefix);
    context->connectFullMesh(view, device_);
    return context;
  }

 protected:
  void do_all_reduce(const Tensor& t, ReduceOp op, Timeout timeout, std::uint32_t tag) override {
    check_host(t);
    if (t.numel() == 0) return;
    auto opts = options<gloo::AllreduceOptions>(timeout, tag);
    const auto n = static_cast<std::size_t>(t.numel());
    switch (t.dtype()) {
      case DType::Float32:
        opts.setOutput(t.data<float>(), n);
        opts.setReduceFunction(sum_of<float>());
        break;
      case DType::Float64:
        opts.setOutput(t.data<double>(), n);
        opts.setReduceFunction(sum_of<double>());
        break;
      default:
        opts.setOutput(t.data<std::int64_t>(), n);
        opts.setReduceFunction(sum_of<std::int64_t>());
        break;
    }
    gloo::allreduce(opts);
    if (op == ReduceOp::Mean) divide(t, static_cast<double>(size()));
  }

  void do_broadcast(const Tensor& t, int root, Timeout timeout, std::uint32_t tag) override {
    check_host(t);
    if (t.numel() == 0) return;
    auto opts = options<gloo::BroadcastOptions>(timeout, tag);
    opts.setRoot(root);
    opts.setOutput(static_cast<std::uint8_t*>(t.raw_data()), t.nbytes());
    gloo::broadcast(opts);
  }

  void do_all_gather(const Tensor& in, const Tensor& out, Timeout timeout,
                     std::uint32_t tag) override {
    check_host(in);
    check_host(out);
    if (in.numel() == 0) return;
    auto opts = options<gloo::AllgatherOptions>(timeout, tag);
    opts.setInput(static_cast<std::uint8_t*>(in.raw_data()), in.nbytes());
    opts.setOutput(static_cast<std::uint8_t*>(out.raw_data()), out.nbytes());
    gloo::allgather(opts);
  }

  void do_barrier(Timeout timeout, std::uint32_t tag) override {
    auto opts = options<gloo::BarrierOptions>(timeout, tag);
    gloo::barrier(opts);
  }

  RepeatedAllReduce::Body make_repeated_all_reduce(const Tensor& buffer) override {
    check_host(buffer);
    if (buffer.numel() == 0) return [](std::uint32_t) {};
    const int n = static_cast<int>(buffer.numel());
    TANDEM_CHECK(n == buffer.numel(), "gloo: a repeated all_reduce of ", buffer.numel(),
                 " elements is more than Gloo's all-reduce takes (2^31 - 1)");
    std::shared_ptr<gloo::Algorithm> algorithm;
    {
      // The second mesh is made by the first repeated all-reduce, in the same order on every rank.
      const std::lock_guard lock(bucket_mutex_);
      if (!bucket_context_) {
        bucket_context_ = connect("gloo-buckets/");
        for (int r = 0; r < size(); ++r) {
          if (r != rank()) bucket_context_->getPair(r)->setSync(/*sync=*/true, /*busyPoll=*/false);
        }
      }
      if (buffer.dtype() == DType::Float32) {
        algorithm = std::make_shared<gloo::AllreduceHalvingDoubling<float>>(
            bucket_context_, std::vector<float*>{buffer.data<float>()}, n);
      } else {
        algorithm = std::make_shared<gloo::AllreduceHalvingDoubling<double>>(
            bucket_context_, std::vector<double*>{buffer.data<double>()}, n);
      }
    }
    return [algorithm](std::uint32_t) { algorithm->run(); };  // slots fixed at set-up, no tag
  }

 private:
  // The options of one collective: this group's context, the timeout, the collective's number.
  template <typename Options>
  Options options(Timeout timeout, std::uint32_t tag) const {
    Options opts(context_);
    opts.setTimeout(timeout);
    opts.setTag(tag);
    return opts;
  }

  static void divide(const Tensor& t, double by) {
    if (t.dtype() == DType::Float32) {
      float* p = t.data<float>();
      for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(p[i] / by);
    } else {
      double* p = t.data<double>();
      for (std::int64_t i = 0; i < t.numel(); ++i) p[i] /= by;
    }
  }

  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::mutex bucket_mutex_;
  std::shared_ptr<gloo::rendezvous::Context> bucket_context_;  // sync pairs, repeated all-reduces
};

}  // namespace

std::unique_ptr<ProcessGroup> make_gloo_process_group(Rendezvous rendezvous) {
  return std::make_unique<GlooProcessGroup>(std::move(rendezvous));
}

}  // namespace tandem::dist
