// The DataLoader with device = cuda:0: every batch arrives on the GPU with the host loader's
// values, in order, with and without workers and across epochs; GPU work queued on the batches
// right away (on the compute stream) sees the copied values, never a copy still under way; and
// batches dropped while that work runs are not overwritten under it (the copies' memory is
// marked as used on the compute stream).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gpu_skip.h"
#include "tandem/tandem.h"

namespace tandem::data {
namespace {

const Device kGpu0(DeviceType::CUDA, 0);

std::vector<Batch> host_batches(const SyntheticDataset& ds, DataLoaderOptions options,
                                int epochs) {
  options.device = kCPU;
  DataLoader loader(ds, options);
  std::vector<Batch> out;
  for (int e = 0; e < epochs; ++e) {
    for (auto& b : loader) out.push_back({contiguous_copy(b.data), contiguous_copy(b.target)});
  }
  return out;
}

void expect_equal(const Tensor& gpu, const Tensor& host) {
  ASSERT_EQ(gpu.shape(), host.shape());
  const Tensor back = copy_to(gpu, kCPU);
  ASSERT_EQ(back.nbytes(), host.nbytes());
  EXPECT_EQ(0, std::memcmp(back.raw_data(), host.raw_data(), host.nbytes()));
}

TEST(DataLoaderGpu, BatchesArriveOnTheGpuWithTheHostsValues) {
  TANDEM_REQUIRE_GPU();
  const SyntheticDataset ds({.shape = {1, 28, 28}, .count = 300});
  for (int workers : {0, 2}) {
    const DataLoaderOptions options{
        .batch_size = 64, .shuffle = true, .num_workers = workers, .device = kGpu0, .seed = 3};
    const std::vector<Batch> host = host_batches(ds, options, 2);
    DataLoader loader(ds, options);
    std::size_t k = 0;
    for (int e = 0; e < 2; ++e) {
      for (auto& b : loader) {
        ASSERT_LT(k, host.size());
        EXPECT_EQ(b.data.device(), kGpu0);
        EXPECT_EQ(b.target.device(), kGpu0);
        expect_equal(b.data, host[k].data);
        expect_equal(b.target, host[k].target);
        ++k;
      }
    }
    EXPECT_EQ(k, host.size()) << workers << " workers";
  }
}

TEST(DataLoaderGpu, WorkQueuedAtOnceSeesTheCopiedValuesAndDroppedBatchesStayIntact) {
  TANDEM_REQUIRE_GPU();
  const SyntheticDataset ds({.shape = {3, 64, 64}, .count = 512, .dtype = DType::Float32});
  const DataLoaderOptions options{.batch_size = 128, .num_workers = 2, .device = kGpu0};
  const std::vector<Batch> host = host_batches(ds, options, 1);
  DataLoader loader(ds, options);
  std::vector<Tensor> sums;  // computed on the GPU from each batch as soon as it is handed out
  for (auto& b : loader) {
    Tensor x = b.data;
    for (int i = 0; i < 20; ++i) x = x * 1.0 + 0.0;  // a queue of kernels reading the batch
    sums.push_back(x.sum());
  }
  ASSERT_EQ(sums.size(), host.size());
  for (std::size_t k = 0; k < sums.size(); ++k) {
    const double expected = host[k].data.sum().item();
    EXPECT_NEAR(copy_to(sums[k], kCPU).item(), expected, 1e-3 * std::abs(expected) + 1e-3) << k;
  }
}

}  // namespace
}  // namespace tandem::data
