// NcclProcessGroup: a non-blocking NCCL communicator on its own CUDA stream. Each collective
// starts after the work the calling thread queued on its current stream (the GPU waits for it,
// through an event), and is polled (cudaStreamQuery, ncclCommGetAsyncError) until done or until
// the timeout, which aborts the communicator; every CUDA/NCCL call is checked and its error names
// the operation. When a call returns, its results are in place for any stream.
#include "tandem/dist/nccl/nccl_process_group.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <thread>

#include "tandem/base/check.h"
#include "tandem/dist/socket.h"
#include "tandem/dist/store.h"
#if TANDEM_DIST_CUDA_STREAMS
#include "tandem/device/cuda/stream.h"
#endif

namespace tandem::dist {
namespace {

void check_cuda(cudaError_t rc, const char* what) {
  TANDEM_CHECK(rc == cudaSuccess, "nccl: ", what, " failed: ", cudaGetErrorString(rc));
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return ncclFloat32;
    case DType::Float64:
      return ncclFloat64;
    case DType::Int64:
      return ncclInt64;
    default:
      return ncclUint8;
  }
}

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(Rendezvous rv, int cuda_device)
      : ProcessGroup(std::move(rv)), device_(cuda_device) {
    try {
      set_up();
    } catch (...) {  // the destructor does not run for a constructor that throws
      release();
      throw;
    }
  }

  ~NcclProcessGroup() override { release(); }

  Backend backend() const override { return Backend::Nccl; }

 private:
  void set_up() {
    check_cuda(cudaSetDevice(device_), ("cudaSetDevice(" + std::to_string(device_) + ")").c_str());
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaMalloc(&scratch_, sizeof(float)), "cudaMalloc (barrier scratch)");
    check_cuda(cudaEventCreateWithFlags(&queued_, cudaEventDisableTiming), "cudaEventCreate");
    ncclUniqueId id;
    if (rank() == 0) {
      check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
      store().set("nccl/id", std::string(id.internal, sizeof id.internal));
    } else {
      const std::string bytes = store().get("nccl/id", timeout());
      TANDEM_CHECK(bytes.size() == sizeof id.internal, "nccl: the unique id in the store has ",
                   bytes.size(), " bytes, not ", sizeof id.internal);
      std::copy(bytes.begin(), bytes.end(), id.internal);
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    check_nccl(ncclCommInitRankConfig(&comm_, size(), id, rank(), &config), "ncclCommInitRank");
    settle("ncclCommInitRank", timeout());
  }

  void release() {
    if (comm_) ncclCommAbort(comm_);  // finalize would wait for peers that may be gone
    if (scratch_) cudaFree(scratch_);
    if (queued_) cudaEventDestroy(queued_);
    if (stream_) cudaStreamDestroy(stream_);
    comm_ = nullptr;
    scratch_ = nullptr;
    queued_ = nullptr;
    stream_ = nullptr;
  }

 protected:
  void do_all_reduce(const Tensor& t, ReduceOp op, Timeout timeout, std::uint32_t) override {
    check_device(t);
    launch("ncclAllReduce", timeout, [&] {
      return ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<std::size_t>(t.numel()),
                           nccl_type(t.dtype()), op == ReduceOp::Sum ? ncclSum : ncclAvg, comm_,
                           stream_);
    });
  }
  void do_broadcast(const Tensor& t, int root, Timeout timeout, std::uint32_t) override {
    check_device(t);
    launch("ncclBroadcast", timeout, [&] {
      return ncclBroadcast(t.raw_data(), t.raw_data(), t.nbytes(), ncclUint8, root, comm_, stream_);
    });
  }
  void do_all_gather(const Tensor& in, const Tensor& out, Timeout timeout, std::uint32_t) override {
    check_device(in);
    check_device(out);
    launch("ncclAllGather", timeout, [&] {
      return ncclAllGather(in.raw_data(), out.raw_data(), in.nbytes(), ncclUint8, comm_, stream_);
    });
  }
  void do_barrier(Timeout timeout, std::uint32_t) override {
    launch("ncclAllReduce (barrier)", timeout, [&] {
      return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_);
    });
  }

 private:
  void check_nccl(ncclResult_t rc, const char* what) {
    if (rc == ncclSuccess || rc == ncclInProgress) return;
    TANDEM_FAIL("nccl: ", what, " on rank ", rank(), " (cuda:", device_,
                ") failed: ", ncclGetErrorString(rc), " (", ncclGetLastError(comm_), ")");
  }

  void check_device(const Tensor& t) const {
    TANDEM_CHECK(t.device().is_cuda() && t.device().index == device_, "nccl: the tensor is on ",
                 t.device(), "; this rank's communicator is on cuda:", device_);
  }

  // Waits until the communicator is no longer busy with a non-blocking call; aborts on timeout.
  void settle(const char* what, Timeout timeout) {
    const auto deadline = deadline_in(timeout);
    for (;;) {
      ncclResult_t state = ncclSuccess;
      check_nccl(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
      if (state != ncclInProgress) {
        check_nccl(state, what);
        return;
      }
      abort_after(deadline, what, timeout);
      std::this_thread::yield();
    }
  }

  template <typename Call>
  void launch(const char* what, Timeout timeout, Call&& call) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
#if TANDEM_DIST_CUDA_STREAMS
    // The operands were written by work queued on the caller's stream (a gradient bucket's copies).
    check_cuda(cudaEventRecord(queued_, cuda::current_stream(device_)), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream_, queued_, 0), "cudaStreamWaitEvent");
#endif
    check_nccl(call(), what);
    settle(what, timeout);
    const auto deadline = deadline_in(timeout);
    for (;;) {
      const cudaError_t rc = cudaStreamQuery(stream_);
      if (rc == cudaSuccess) return;
      if (rc != cudaErrorNotReady) check_cuda(rc, what);
      (void)cudaGetLastError();  // "not ready" is an answer: left behind, a later launch reports it
      ncclResult_t state = ncclSuccess;
      check_nccl(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
      check_nccl(state, what);
      abort_after(deadline, what, timeout);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void abort_after(Clock::time_point deadline, const char* what, Timeout timeout) {
    if (Clock::now() < deadline) return;
    ncclCommAbort(comm_);
    comm_ = nullptr;
    TANDEM_FAIL("nccl: ", what, " on rank ", rank(), " did not finish within ",
                timeout.count() / 1000.0, " s; the communicator was aborted");
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t queued_ = nullptr;  // the caller's work a collective waits for
  void* scratch_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_nccl_process_group(Rendezvous rendezvous, int cuda_device) {
  return std::make_unique<NcclProcessGroup>(std::move(rendezvous), cuda_device);
}

}  // namespace tandem::dist
