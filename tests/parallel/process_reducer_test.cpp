// ProcessReducer in a world of one process: host gradients (float32 and float64, in several
// buckets) come back weighted or averaged, the extras summed; a group for GPU tensors, when given,
// is left alone by host gradients (its collectives are counted).
#include "tandem/parallel/process_reducer.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "solo_group.h"
#include "tandem/dist/process_group.h"
#include "tandem/tensor/factories.h"

namespace tandem::parallel::testing {
namespace {

std::vector<Tensor> params_with_grads() {
  std::vector<Tensor> params{zeros({3}), zeros({2, 2}, {.dtype = DType::Float64}), zeros({5})};
  params[0].set_grad(from_vector(std::vector<double>{1, 2, 3}, {3}));
  params[1].set_grad(
      from_vector(std::vector<double>{0.5, -1, 4, 8}, {2, 2}, {.dtype = DType::Float64}));
  params[2].set_grad(from_vector(std::vector<double>{-2, 6, 10, 0.25, 1}, {5}));
  return params;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    out.push_back(t.dtype() == DType::Float64 ? t.data<double>()[i] : t.data<float>()[i]);
  }
  return out;
}

TEST(ProcessReducer, AWeightScalesTheGradientsAndTheExtrasAreSummedInEveryBucket) {
  data::testing::TempDir dir;
  const auto group = solo_group(dir, "weights");
  const std::vector<Tensor> params = params_with_grads();
  ProcessReducer reducer(*group, params, /*bucket_bytes=*/16, /*extras=*/2);
  ASSERT_GE(reducer.buckets().size(), 2U);  // the float64 parameter and a float32 one apart
  reducer.weigh(0.5);
  reducer.arm();
  const std::array<double, 2> extras{3, 7.5};
  std::array<double, 2> summed{};
  reducer.finish(extras, summed);
  EXPECT_EQ(values(params[0].grad()), (std::vector<double>{0.5, 1, 1.5}));
  EXPECT_EQ(values(params[1].grad()), (std::vector<double>{0.25, -0.5, 2, 4}));
  EXPECT_EQ(values(params[2].grad()), (std::vector<double>{-1, 3, 5, 0.125, 0.5}));
  EXPECT_EQ(summed, extras);
  EXPECT_EQ(group->collectives(), reducer.buckets().size());
}

TEST(ProcessReducer, HostGradientsLeaveTheGroupForGpuTensorsAlone) {
  data::testing::TempDir dir;
  const auto group = solo_group(dir, "host");
  const auto gpu_group = solo_group(dir, "gpu");
  const std::vector<Tensor> params = params_with_grads();
  ProcessReducer reducer(*group, params, /*bucket_bytes=*/16, /*extras=*/1, gpu_group.get());
  for (int step = 0; step < 2; ++step) {  // averaged over one rank: unchanged
    reducer.arm();
    const std::array<double, 1> extras{2};
    std::array<double, 1> summed{};
    reducer.finish(extras, summed);
    EXPECT_EQ(summed[0], 2);
  }
  EXPECT_EQ(values(params[1].grad()), (std::vector<double>{0.5, -1, 4, 8}));
  EXPECT_EQ(group->collectives(), 2 * reducer.buckets().size());
  EXPECT_EQ(gpu_group->collectives(), 0U);
}

}  // namespace
}  // namespace tandem::parallel::testing
