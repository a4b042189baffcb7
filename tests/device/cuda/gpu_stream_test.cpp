// Streams, events and the device guard on a real GPU (skipping, saying why, without one); and
// TANDEM_CUDA_CHECK's message, which needs no GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "gpu_support.h"
#include "tandem/device/cuda/check.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/device/cuda/stream.h"

namespace tandem::cuda {
namespace {

TEST(CudaCheck, NamesTheCallAndTheError) {
  try {
    TANDEM_CUDA_CHECK(cudaSetDevice(4096));
    FAIL() << "cudaSetDevice(4096) succeeded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("CUDA: cudaSetDevice(4096) failed: cudaError"), std::string::npos) << m;
    EXPECT_NE(m.find("gpu_stream_test.cpp:"), std::string::npos) << m;  // where it was raised
  }
  (void)cudaGetLastError();
}

TEST(CudaStream, EventsTellWhenTheWorkBeforeThemIsDone) {
  TANDEM_REQUIRE_GPU();
  const Stream stream(0);
  Event event(0);
  {
    Gate gate(stream.get());
    event.record(stream.get());
    EXPECT_FALSE(event.query());
    EXPECT_FALSE(stream.query());
    gate.open();
    event.synchronize();
    EXPECT_TRUE(event.query());
  }
  stream.synchronize();
  EXPECT_TRUE(stream.query());
}

TEST(CudaStream, AStreamWaitsForAnotherStreamsEvent) {
  TANDEM_REQUIRE_GPU();
  const Stream producer(0);
  const Stream consumer(0);
  Event produced(0);
  Event consumed(0);
  {
    Gate gate(producer.get());
    produced.record(producer.get());
    consumer.wait(produced);
    consumed.record(consumer.get());
    EXPECT_FALSE(consumed.query()) << "the consumer ran ahead of the producer";
    gate.open();
    consumer.synchronize();
    EXPECT_TRUE(consumed.query());
    EXPECT_TRUE(produced.query());
  }
}

TEST(CudaStream, MovesAndDeviceGuard) {
  TANDEM_REQUIRE_GPU();
  Stream a(0);
  const cudaStream_t raw = a.get();
  Stream b(std::move(a));
  EXPECT_EQ(b.get(), raw);
  EXPECT_EQ(a.get(), nullptr);  // NOLINT(bugprone-use-after-move): checking the moved-from state
  Event e(0);
  Event f(std::move(e));
  EXPECT_NE(f.get(), nullptr);
  EXPECT_EQ(e.get(), nullptr);  // NOLINT(bugprone-use-after-move)

  int before = -1;
  TANDEM_CUDA_CHECK(cudaGetDevice(&before));
  {
    const DeviceGuard guard(device_count() - 1);
    int now = -1;
    TANDEM_CUDA_CHECK(cudaGetDevice(&now));
    EXPECT_EQ(now, device_count() - 1);
  }
  int after = -1;
  TANDEM_CUDA_CHECK(cudaGetDevice(&after));
  EXPECT_EQ(after, before);
  EXPECT_THROW(Stream{device_count()}, Error);
  EXPECT_THROW(compute_stream(device_count()), Error);
}

TEST(CudaStream, ComputeAndCopyStreamsArePerDeviceAndNonBlocking) {
  TANDEM_REQUIRE_GPU();
  for (int d = 0; d < device_count(); ++d) {
    EXPECT_NE(compute_stream(d), nullptr);
    EXPECT_NE(copy_stream(d), nullptr);
    EXPECT_NE(compute_stream(d), copy_stream(d));
    EXPECT_EQ(compute_stream(d), compute_stream(d));  // made once
    unsigned flags = 0;
    TANDEM_CUDA_CHECK(cudaStreamGetFlags(compute_stream(d), &flags));
    EXPECT_EQ(flags & cudaStreamNonBlocking, static_cast<unsigned>(cudaStreamNonBlocking));
  }
}

}  // namespace
}  // namespace tandem::cuda
