// ProcessReducer with GPU gradients through an NCCL group beside a Gloo one, in a world of one
// process (the one GPU a test machine may have): the buckets cross on the GPU (the Gloo group is
// never used), weighted, with the extras summed, step after step; and gradients handed over by
// the hooks while a real backward runs are the backward's own (the collective waits for them).
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "gpu_skip.h"
#include "solo_group.h"
#include "tandem/parallel/process_reducer.h"
#include "tandem/tandem.h"

namespace tandem::parallel::testing {
namespace {

const Device kGpu0(DeviceType::CUDA, 0);

std::vector<double> host_values(const Tensor& t) {
  const Tensor h = convert_dtype(copy_to(t, kCPU), DType::Float64);
  return {h.data<double>(), h.data<double>() + h.numel()};
}

TEST(ProcessReducerNccl, GpuBucketsCrossThroughNcclWeightedWithTheExtrasSummed) {
  TANDEM_REQUIRE_GPU();
  data::testing::TempDir dir;
  const auto group = solo_group(dir, "host");
  const auto nccl = dist::init_nccl_beside(*group, 0);
  ASSERT_EQ(nccl->backend(), dist::Backend::Nccl);
  const std::vector<Tensor> params{zeros({3}, {.device = kGpu0}),
                                   zeros({2, 2}, {.dtype = DType::Float64, .device = kGpu0})};
  ProcessReducer reducer(*group, params, /*bucket_bytes=*/8, /*extras=*/2, nccl.get());
  ASSERT_EQ(reducer.buckets().size(), 2U);
  for (double step = 1; step <= 3; ++step) {
    params[0].set_grad(from_vector(std::vector<double>{1 * step, 2, 3}, {3}, {.device = kGpu0}));
    params[1].set_grad(from_vector(std::vector<double>{0.5, -1, 4, 8 * step}, {2, 2},
                                   {.dtype = DType::Float64, .device = kGpu0}));
    reducer.weigh(0.5);
    reducer.arm();
    const std::array<double, 2> extras{step, 100};
    std::array<double, 2> summed{};
    reducer.finish(extras, summed);
    EXPECT_EQ(host_values(params[0].grad()), (std::vector<double>{0.5 * step, 1, 1.5}));
    EXPECT_EQ(host_values(params[1].grad()), (std::vector<double>{0.25, -0.5, 2, 4 * step}));
    EXPECT_EQ(summed, extras);
  }
  EXPECT_EQ(group->collectives(), 0U);
  EXPECT_EQ(nccl->collectives(), 3 * reducer.buckets().size());
}

TEST(ProcessReducerNccl, BucketsHandedOverDuringTheBackwardHoldItsGradients) {
  TANDEM_REQUIRE_GPU();
  data::testing::TempDir dir;
  const auto group = solo_group(dir, "host");
  const auto nccl = dist::init_nccl_beside(*group, 0);
  manual_seed(3);
  nn::Sequential net(nn::Linear(256, 512), nn::ReLU(), nn::Linear(512, 256), nn::ReLU(),
                     nn::Linear(256, 10));
  net.to(kGpu0);
  const Tensor x = randn({64, 256}).to(kGpu0);
  // The gradients alone, for reference.
  net.forward(x).sum().backward();
  std::vector<std::vector<double>> expected;
  for (const Tensor& p : net.parameters()) expected.push_back(host_values(p.grad()));
  // The same backward with the buckets crossing as their gradients are ready: 4 KiB buckets close
  // at the first parameter that fills them, so (from the last layer) fc3, fc2, fc1 in 3 buckets.
  for (const Tensor& p : net.parameters()) p.set_grad(Tensor());
  ProcessReducer reducer(*group, net.parameters(), 1 << 12, 0, nccl.get());
  ASSERT_GE(reducer.buckets().size(), 3U);
  reducer.attach_hooks();
  reducer.arm();
  net.forward(x).sum().backward();
  reducer.finish();
  const std::vector<Tensor> params = net.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(host_values(params[i].grad()), expected[i]) << "parameter " << i;
  }
  EXPECT_EQ(group->collectives(), 0U);
}

}  // namespace
}  // namespace tandem::parallel::testing
