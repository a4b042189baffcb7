// Copies between strided GPU tensors (ops/cuda/copy.cu, the tensor layer's strided copy for GPUs):
// copy_into between any strides and contiguous_copy of a view match the CPU bit for bit and stay
// on the GPU (they can be captured in a CUDA graph, which a trip through the host could not); the
// backward of slice, narrow and select, which writes into a strided view of a zeroed gradient,
// matches the CPU's.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "parity.h"
#include "tandem/device/cuda/graph.h"
#include "tandem/tandem.h"

namespace tandem::testing {
namespace {

TEST(CudaCopy, CopiesBetweenAnyStridesMatchTheCpu) {
  TANDEM_REQUIRE_GPU();
  const Tensor src = random_cpu({4, 6}, 41);
  // Into every other column of a zeroed (4, 12): a strided destination.
  Tensor cpu_dst = zeros({4, 12});
  Tensor gpu_dst = zeros({4, 12}, {.device = kGpu});
  copy_into(cpu_dst.slice(1, 0, 12, 2), src);
  copy_into(gpu_dst.slice(1, 0, 12, 2), on_gpu(src));
  EXPECT_TRUE(near_cpu(gpu_dst, cpu_dst, 0, 0));
  // From a transposed source into a strided destination.
  const Tensor square = random_cpu({5, 5}, 42);
  Tensor cpu_into = zeros({5, 10});
  Tensor gpu_into = zeros({5, 10}, {.device = kGpu});
  copy_into(cpu_into.narrow(1, 3, 5), square.t());
  copy_into(gpu_into.narrow(1, 3, 5), on_gpu(square).t());
  EXPECT_TRUE(near_cpu(gpu_into, cpu_into, 0, 0));
  // From the host into a strided GPU view, and from a strided GPU view to the host.
  Tensor gpu_from_host = zeros({4, 12}, {.device = kGpu});
  copy_into(gpu_from_host.slice(1, 0, 12, 2), src);
  EXPECT_TRUE(near_cpu(gpu_from_host, cpu_dst, 0, 0));
  Tensor host = zeros({5, 5});
  copy_into(host, on_gpu(square).t());
  EXPECT_TRUE(near_cpu(on_gpu(host), square.t().contiguous(), 0, 0));
}

TEST(CudaCopy, AContiguousCopyOfAViewStaysOnTheGpu) {
  TANDEM_REQUIRE_GPU();
  const Tensor x = random_cpu({6, 4}, 43);
  const Tensor gpu_x = on_gpu(x);
  Tensor packed;
  // A copy through the host would be refused inside a capture; the GPU's own copy is captured.
  auto graph = cuda::CapturedGraph::capture(0, [&] { packed = contiguous_copy(gpu_x.t()); });
  graph->replay();
  EXPECT_TRUE(packed.is_contiguous());
  EXPECT_TRUE(near_cpu(packed, x.t().contiguous(), 0, 0));
}

// d(sum(view * view))/dx on the device of x: 2 * view inside the view, 0 elsewhere.
Tensor view_gradient(const Tensor& x_values, Device device,
                     const std::function<Tensor(const Tensor&)>& view) {
  Tensor x = copy_to(x_values, device).clone();
  x.set_requires_grad(true);
  const Tensor v = view(x);
  (v * v).sum().backward();
  return x.grad();
}

TEST(CudaCopy, TheBackwardOfSliceNarrowAndSelectMatchesTheCpu) {
  TANDEM_REQUIRE_GPU();
  const Tensor x = random_cpu({4, 6, 5}, 44);
  const std::vector<std::function<Tensor(const Tensor&)>> views{
      [](const Tensor& t) { return t.narrow(1, 2, 3); },
      [](const Tensor& t) { return t.slice(2, 0, 5, 2); },
      [](const Tensor& t) { return t.select(1, 4); },
      [](const Tensor& t) { return t.slice(0, 1, 4, 2).narrow(2, 1, 3); },
  };
  for (std::size_t i = 0; i < views.size(); ++i) {
    EXPECT_TRUE(near_cpu(view_gradient(x, kGpu, views[i]), view_gradient(x, kCPU, views[i]), 0, 0))
        << "view " << i;
  }
}

}  // namespace
}  // namespace tandem::testing
