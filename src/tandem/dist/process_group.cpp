// The backend-independent half of every collective: argument checks, numbering, and the one
// error message a failure becomes (with the monitor's diagnosis of which rank is to blame).
#include "tandem/dist/process_group.h"

#include <sstream>

#include "tandem/base/check.h"
#include "tandem/dist/monitor.h"
#include "tandem/dist/socket.h"
#include "tandem/dist/store.h"
#include "tandem/dist/tcp_store.h"

namespace tandem::dist {
namespace {

std::string describe(const char* op, const Tensor& t) {
  std::ostringstream out;
  out << op << " of " << t.numel() << " " << dtype_name(t.dtype()) << " on " << t.device();
  return out.str();
}

void check_operand(const Tensor& t, const char* op) {
  TANDEM_CHECK(t.defined(), op, ": undefined tensor");
  TANDEM_CHECK(t.is_contiguous(), op, ": the tensor must be contiguous (shape ", show(t.shape()),
               ")");
}

}  // namespace

const char* backend_name(Backend backend) { return backend == Backend::Gloo ? "gloo" : "nccl"; }

Rendezvous::Rendezvous() = default;
Rendezvous::Rendezvous(Rendezvous&&) noexcept = default;
Rendezvous& Rendezvous::operator=(Rendezvous&&) noexcept = default;
Rendezvous::~Rendezvous() = default;

ProcessGroup::ProcessGroup(Rendezvous rendezvous) : rv_(std::move(rendezvous)) {}
ProcessGroup::~ProcessGroup() = default;

Rendezvous ProcessGroup::companion(const std::string& name) const {
  Rendezvous rv;
  rv.rank = rv_.rank;
  rv.size = rv_.size;
  rv.timeout = rv_.timeout;
  rv.address = rv_.address;
  rv.store = std::make_shared<PrefixStore>(name, rv_.store);
  return rv;
}

void ProcessGroup::run(const std::string& what, Timeout timeout,
                       const std::function<void(std::uint32_t)>& body) {
  const std::uint64_t seq = ++seq_;
  if (rv_.monitor) rv_.monitor->entered(seq);
  const auto start = Clock::now();
  std::string cause;
  try {
    body(static_cast<std::uint32_t>(seq));
    return;
  } catch (const std::exception& e) {
    cause = e.what();
  }
  const auto elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  const std::string blame = rv_.monitor ? rv_.monitor->diagnose(seq) : "";
  TANDEM_FAIL(backend_name(backend()), " ", what, " (collective #", seq, " on rank ", rank(),
              " of ", size(), ", timeout ", timeout.count() / 1000.0, " s) failed after ",
              static_cast<double>(elapsed_ms) / 1000.0,
              " s: ", blame.empty() ? std::string("every rank looks alive") : blame,
              ". Cause: ", cause);
}

void ProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op, Timeout timeout) {
  const char* name = op == ReduceOp::Sum ? "all_reduce(sum)" : "all_reduce(mean)";
  check_operand(tensor, name);
  const DType dt = tensor.dtype();
  TANDEM_CHECK(
      dt == DType::Float32 || dt == DType::Float64 || (dt == DType::Int64 && op == ReduceOp::Sum),
      name, ": ", dtype_name(dt), " is not supported (float32, float64; int64 for sum)");
  run(describe(name, tensor), timeout,
      [&](std::uint32_t tag) { do_all_reduce(tensor, op, timeout, tag); });
}

void ProcessGroup::broadcast(const Tensor& tensor, int root, Timeout timeout) {
  check_operand(tensor, "broadcast");
  TANDEM_CHECK(root >= 0 && root < size(), "broadcast: root ", root, " is not a rank (world size ",
               size(), ")");
  run(describe("broadcast", tensor) + " from rank " + std::to_string(root), timeout,
      [&](std::uint32_t tag) { do_broadcast(tensor, root, timeout, tag); });
}

void ProcessGroup::all_gather(const Tensor& input, const Tensor& output, Timeout timeout) {
  check_operand(input, "all_gather");
  check_operand(output, "all_gather");
  TANDEM_CHECK(output.dtype() == input.dtype() && output.numel() == input.numel() * size(),
               "all_gather: output (", dtype_name(output.dtype()), ", shape ", show(output.shape()),
               ") must hold ", size(), " x ", input.numel(), " ", dtype_name(input.dtype()));
  run(describe("all_gather", input), timeout,
      [&](std::uint32_t tag) { do_all_gather(input, output, timeout, tag); });
}

void ProcessGroup::barrier(Timeout timeout) {
  run("barrier", timeout, [&](std::uint32_t tag) { do_barrier(timeout, tag); });
}

std::unique_ptr<RepeatedAllReduce> ProcessGroup::repeated_all_reduce(const Tensor& buffer) {
  check_operand(buffer, "repeated all_reduce");
  TANDEM_CHECK(buffer.dtype() == DType::Float32 || buffer.dtype() == DType::Float64,
               "repeated all_reduce: ", dtype_name(buffer.dtype()),
               " is not supported (float32, float64)");
  return std::make_unique<RepeatedAllReduce>(*this, buffer, make_repeated_all_reduce(buffer));
}

RepeatedAllReduce::Body ProcessGroup::make_repeated_all_reduce(const Tensor& buffer) {
  return [this, buffer](std::uint32_t tag) {
    do_all_reduce(buffer, ReduceOp::Sum, timeout(), tag);
  };
}

RepeatedAllReduce::RepeatedAllReduce(ProcessGroup& group, Tensor buffer, Body body)
    : group_(group), buffer_(std::move(buffer)), body_(std::move(body)) {}

void RepeatedAllReduce::run() {
  group_.run(describe("all_reduce(sum)", buffer_) + " (a repeated one)", group_.timeout(),
             [&](std::uint32_t tag) { body_(tag); });
}

}  // namespace tandem::dist
