// The CUDA reductions, copies and joins against the CPU: sum over every set of dims (keepdim or
// not, strided input), the broadcast-gradient sum_to_shape, argmax with ties and NaN, contiguous
// copies of views, cat along each dim, and dropout masks equal to the CPU's for one seed.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "parity.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/ops.h"

namespace tandem {
namespace {

using testing::near_cpu;
using testing::on_gpu;
using testing::random_cpu;

TEST(CudaReduce, SumOverEveryDimSetMatchesTheCpu) {
  TANDEM_REQUIRE_GPU();
  const Tensor x = random_cpu({3, 4, 5}, 20);
  const std::vector<std::vector<std::int64_t>> sets = {{},     {0},     {1},      {2},
                                                       {0, 2}, {-1, 0}, {0, 1, 2}};
  for (const auto& dims : sets) {
    for (bool keepdim : {false, true}) {
      EXPECT_TRUE(near_cpu(ops::sum(on_gpu(x), dims, keepdim), ops::sum(x, dims, keepdim)))
          << dims.size() << " dims, keepdim " << keepdim;
    }
  }
  // A permuted view, and a large reduction (more elements than threads in a block).
  const Tensor xt = make_view(x, {5, 4, 3}, {1, 5, 20}, 0);
  EXPECT_TRUE(near_cpu(ops::sum(make_view(on_gpu(x), {5, 4, 3}, {1, 5, 20}, 0), {1}, false),
                       ops::sum(xt, {1}, false)));
  const Tensor big = random_cpu({3000, 7}, 21);
  EXPECT_TRUE(near_cpu(ops::sum(on_gpu(big), {0}, false), ops::sum(big, {0}, false), 1e-4));
  EXPECT_TRUE(
      near_cpu(ops::sum_to_shape(on_gpu(big), {1, 7}), ops::sum_to_shape(big, {1, 7}), 1e-4));
}

TEST(CudaReduce, ArgmaxTakesTheFirstLargestAndNan) {
  TANDEM_REQUIRE_GPU();
  const Tensor x = random_cpu({6, 10}, 22);
  for (std::int64_t dim : {0, 1}) {
    EXPECT_TRUE(near_cpu(ops::argmax(on_gpu(x), dim, false), ops::argmax(x, dim, false), 0, 0));
    EXPECT_TRUE(near_cpu(ops::argmax(on_gpu(x), dim, true), ops::argmax(x, dim, true), 0, 0));
  }
  Tensor ties = zeros({2, 4});
  ties.data<float>()[1] = 5.0f;
  ties.data<float>()[2] = 5.0f;
  ties.data<float>()[6] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(near_cpu(ops::argmax(on_gpu(ties), 1, false), ops::argmax(ties, 1, false), 0, 0));
}

TEST(CudaReduce, ContiguousCopiesAndCatMatchTheCpu) {
  TANDEM_REQUIRE_GPU();
  const Tensor x = random_cpu({4, 6}, 23);
  const Tensor view = make_view(on_gpu(x), {3, 4}, {1, 6}, 2);
  EXPECT_TRUE(near_cpu(ops::cuda::contiguous(view),
                       contiguous_copy(make_view(x, {3, 4}, {1, 6}, 2)), 0, 0));
  const Tensor a = random_cpu({2, 3, 4}, 24), b = random_cpu({2, 5, 4}, 25);
  EXPECT_TRUE(near_cpu(ops::cat({on_gpu(a), on_gpu(b)}, 1), ops::cat({a, b}, 1), 0, 0));
  const Tensor c = random_cpu({1, 3, 4}, 26);
  EXPECT_TRUE(near_cpu(ops::cat({on_gpu(a), on_gpu(c)}, 0), ops::cat({a, c}, 0), 0, 0));
  const Tensor d = random_cpu({2, 3, 2}, 27);
  EXPECT_TRUE(near_cpu(ops::cat({on_gpu(a), on_gpu(d)}, -1), ops::cat({a, d}, -1), 0, 0));
}

TEST(CudaReduce, DropoutMasksAreTheCpusForOneSeed) {
  TANDEM_REQUIRE_GPU();
  Generator g_cpu(99), g_gpu(99);
  const Tensor cpu = ops::dropout_mask({7, 9}, 0.3, DType::Float32, kCPU, g_cpu);
  const Tensor gpu = ops::dropout_mask({7, 9}, 0.3, DType::Float32, testing::kGpu, g_gpu);
  EXPECT_TRUE(near_cpu(gpu, cpu, 0, 0));
}

}  // namespace
}  // namespace tandem
