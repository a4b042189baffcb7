// NcclClique over ncclCommInitAll: a communicator, a communication stream and an event per rank.
// Every CUDA and NCCL call is checked and its error names the call, the rank and its GPU.
#include "tandem/dist/nccl/nccl_clique.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <string>

#include "tandem/base/check.h"
#include "tandem/device/cuda/check.h"
#include "tandem/device/cuda/stream.h"

namespace tandem::dist {

bool nccl_clique_built() { return true; }

std::string nccl_version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess || code <= 0) return "";
  // NCCL 2.9 on: major * 10000 + minor * 100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

struct NcclClique::Impl {
  std::vector<int> devices;
  std::vector<ncclComm_t> comms;
  std::vector<cuda::Stream> streams;    // [rank] communication streams
  std::vector<cuda::Event> queued;      // [rank] the compute work a collective waits for
  std::vector<cuda::Event> communicated;  // [rank] the collectives join() waits for
  std::atomic<bool> aborted{false};

  void check(ncclResult_t rc, const char* what, std::size_t rank) const {
    if (rc == ncclSuccess) return;
    TANDEM_FAIL("nccl: ", what, " on rank ", rank, " (cuda:", devices[rank],
                ") failed: ", ncclGetErrorString(rc), " (", ncclGetLastError(comms[rank]), ")");
  }
  void check_usable(std::size_t rank) const {
    TANDEM_CHECK(rank < devices.size(), "nccl: rank ", rank, " of a clique of ", devices.size());
    TANDEM_CHECK(!aborted.load(std::memory_order_acquire),
                 "nccl: the communicators of this clique were aborted");
  }
};

NcclClique::NcclClique(const std::vector<int>& cuda_devices) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.devices = cuda_devices;
  TANDEM_CHECK(s.devices.size() >= 2, "nccl: a clique needs at least two GPUs, got ",
               s.devices.size());
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      TANDEM_CHECK(s.devices[i] != s.devices[j], "nccl: cuda:", s.devices[i],
                   " is listed twice; NCCL needs one rank per GPU");
    }
  }
  s.comms.assign(s.devices.size(), nullptr);
  const ncclResult_t rc =
      ncclCommInitAll(s.comms.data(), static_cast<int>(s.devices.size()), s.devices.data());
  if (rc != ncclSuccess) {
    std::string gpus;
    for (int d : s.devices) gpus += (gpus.empty() ? "cuda:" : ", cuda:") + std::to_string(d);
    TANDEM_FAIL("nccl: ncclCommInitAll over ", gpus, " failed: ", ncclGetErrorString(rc), " (",
                ncclGetLastError(nullptr), ")");
  }
  for (int d : s.devices) {
    s.streams.emplace_back(d);
    s.queued.emplace_back(d);
    s.communicated.emplace_back(d);
  }
}

NcclClique::~NcclClique() { abort(); }

std::size_t NcclClique::size() const { return impl_->devices.size(); }
int NcclClique::device(std::size_t rank) const { return impl_->devices.at(rank); }

void NcclClique::reduce_sum(std::size_t rank, const Tensor& t, std::size_t root) {
  Impl& s = *impl_;
  s.check_usable(rank);
  const int gpu = s.devices[rank];
  TANDEM_CHECK(t.device().is_cuda() && t.device().index == gpu, "nccl: rank ", rank,
               " reduces a tensor on ", t.device(), ", its GPU is cuda:", gpu);
  TANDEM_CHECK(t.is_contiguous(), "nccl: rank ", rank, " reduces a non-contiguous tensor");
  TANDEM_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64, "nccl: rank ", rank,
               " cannot sum a tensor of dtype ", t.dtype());
  TANDEM_CHECK(root < s.devices.size(), "nccl: root ", root, " of a clique of ", s.devices.size());
  const cuda::DeviceGuard guard(gpu);
  const cuda::Stream& stream = s.streams[rank];
  s.queued[rank].record(cuda::current_stream(gpu));
  stream.wait(s.queued[rank]);
  s.check(ncclReduce(t.raw_data(), t.raw_data(), static_cast<std::size_t>(t.numel()),
                     t.dtype() == DType::Float32 ? ncclFloat32 : ncclFloat64, ncclSum,
                     static_cast<int>(root), s.comms[rank], stream.get()),
          "ncclReduce", rank);
}

void NcclClique::on_communication_stream(std::size_t rank, const std::function<void()>& work) {
  Impl& s = *impl_;
  s.check_usable(rank);
  const cuda::StreamGuard guard(s.devices[rank], s.streams[rank].get());
  work();
}

void NcclClique::join(std::size_t rank) {
  Impl& s = *impl_;
  s.check_usable(rank);
  const int gpu = s.devices[rank];
  s.communicated[rank].record(s.streams[rank].get());
  const cuda::DeviceGuard guard(gpu);
  TANDEM_CUDA_CHECK(
      cudaStreamWaitEvent(cuda::current_stream(gpu), s.communicated[rank].get(), 0));
}

void NcclClique::abort() {
  Impl& s = *impl_;
  if (s.aborted.exchange(true, std::memory_order_acq_rel)) return;
  // ncclCommAbort, not ncclCommFinalize: finalize would wait for the collectives of a rank that
  // failed before queuing its part; abort ends them.
  for (ncclComm_t& comm : s.comms) {
    if (comm != nullptr) (void)ncclCommAbort(comm);
    comm = nullptr;
  }
  // The aborted collectives have ended; what was queued after them (the master's copies into its
  // .grad) is waited for here, so that no memory is written once its owner has let it go.
  for (const cuda::Stream& stream : s.streams) (void)cudaStreamSynchronize(stream.get());
  (void)cudaGetLastError();  // an abort is not an error to leave behind for the next call
}

bool NcclClique::aborted() const { return impl_->aborted.load(std::memory_order_acquire); }

}  // namespace tandem::dist
