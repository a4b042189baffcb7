// NcclClique: the refusals any machine can check (one GPU, a GPU twice, GPUs that are not there,
// a build without NCCL), and on a machine with two GPUs or more a reduce queued from one thread
// per rank, each rank's part ordered after the work on its compute stream, joined before reading.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "errors.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/dist/nccl/nccl_clique.h"
#include "tandem/tensor/factories.h"

namespace tandem::dist::testing {
namespace {

using tandem::testing::error_of;
using tandem::testing::expect_contains;

TEST(NcclClique, RefusesFewerThanTwoGpusAndAGpuListedTwice) {
  if (!nccl_clique_built()) {
    expect_contains(error_of([] { NcclClique clique({0, 1}); }), "built without NCCL");
    return;
  }
  expect_contains(error_of([] { NcclClique clique({0}); }), "at least two GPUs, got 1");
  expect_contains(error_of([] { NcclClique clique({1, 1}); }),
                  "cuda:1 is listed twice; NCCL needs one rank per GPU");
}

TEST(NcclClique, GpusThatAreNotThereAreAClearError) {
  if (!nccl_clique_built()) GTEST_SKIP() << "built without NCCL";
  const int missing = cuda::device_count();  // cuda:0 .. cuda:count-1 exist
  const std::string message = error_of([&] { NcclClique clique({missing, missing + 1}); });
  expect_contains(message, "nccl: ncclCommInitAll over cuda:" + std::to_string(missing) +
                               ", cuda:" + std::to_string(missing + 1) + " failed");
}

TEST(NcclClique, ReducesIntoTheRootFromOneThreadPerRank) {
  if (!nccl_clique_built()) GTEST_SKIP() << "built without NCCL";
  const int gpus = cuda::device_count();
  if (gpus < 2) GTEST_SKIP() << "needs two GPUs, this machine has " << gpus;
  const std::size_t n = static_cast<std::size_t>(gpus);
  std::vector<int> devices;
  for (int d = 0; d < gpus; ++d) devices.push_back(d);
  NcclClique clique(devices);
  // Rank r holds r + 1 in every element, set on its compute stream just before the reduce.
  std::vector<Tensor> parts;
  for (std::size_t r = 0; r < n; ++r) {
    parts.push_back(empty({1000}, {.device = Device(DeviceType::CUDA, devices[r])}));
  }
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      copy_into(parts[r], full({1000}, static_cast<double>(r + 1)));
      clique.reduce_sum(r, parts[r], 0);
      clique.join(r);
    });
  }
  for (auto& t : threads) t.join();
  const Tensor sum = copy_to(parts[0], kCPU);
  const float expected = static_cast<float>(n * (n + 1) / 2);
  for (std::int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sum.data<float>()[i], expected) << i;
  expect_contains(error_of([&] { clique.reduce_sum(0, full({3}, 1.0), 0); }),
                  "nccl: rank 0 reduces a tensor on cpu, its GPU is cuda:0");
  clique.abort();
  EXPECT_TRUE(clique.aborted());
  expect_contains(error_of([&] { clique.reduce_sum(0, parts[0], 0); }), "were aborted");
}

}  // namespace
}  // namespace tandem::dist::testing
