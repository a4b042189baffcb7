// Every differentiable op against PyTorch: forward outputs and input gradients (for a fixed random
// upstream gradient) in float32, from the golden files tools/gen_golden.py writes.
// Tolerance: |tandem - torch| <= kAtol + kRtol * |torch| per element (float32 kernels that sum in
// a different order than PyTorch's agree to a few ulps of the largest partial sums).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "golden.h"
#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::allclose;
using testing::GoldenFile;

constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;

// Checks y against "<c>.y", runs backward with "<c>.gy" and checks each input's gradient against
// "<c>.g<role>".
void check_case(const GoldenFile& g, const std::string& c, const Tensor& y,
                const std::vector<std::pair<std::string, Tensor>>& inputs) {
  SCOPED_TRACE("case " + c);
  ASSERT_EQ(y.dtype(), DType::Float32);
  EXPECT_TRUE(allclose(y, g.get(c + ".y"), kRtol, kAtol)) << c << ".y";
  y.backward(g.get(c + ".gy"));
  for (const auto& [role, t] : inputs) {
    ASSERT_TRUE(t.grad().defined()) << c << ": no gradient for " << role;
    const std::string key =
        c + ".g" + role;  // NOLINT(performance-inefficient-string-concatenation)
    EXPECT_TRUE(allclose(t.grad(), g.get(key), kRtol, kAtol)) << key;
  }
}

// The file holds exactly the cases the test runs (a new case in the generator fails here until
// it is tested).
void expect_cases(const GoldenFile& g, const std::set<std::string>& cases) {
  EXPECT_EQ(g.cases(), cases);
}

TEST(GoldenOps, Linear) {
  GoldenFile g("op_linear.safetensors");
  expect_cases(g, {"bias", "nobias"});
  {
    Tensor x = g.input("bias.x"), w = g.input("bias.w"), b = g.input("bias.b");
    check_case(g, "bias", linear(x, w, b), {{"x", x}, {"w", w}, {"b", b}});
  }
  {
    Tensor x = g.input("nobias.x"), w = g.input("nobias.w");
    check_case(g, "nobias", linear(x, w), {{"x", x}, {"w", w}});
  }
}

TEST(GoldenOps, Conv2d) {
  GoldenFile g("op_conv2d.safetensors");
  expect_cases(g, {"s1p1", "s2p0d2", "groups2"});
  for (const std::string c : {"s1p1", "s2p0d2", "groups2"}) {
    Conv2dParams p;
    p.stride = g.pair(c + ".param.stride");
    p.padding = g.pair(c + ".param.padding");
    p.dilation = g.pair(c + ".param.dilation");
    p.groups = g.integer(c + ".param.groups");
    Tensor x = g.input(c + ".x"), w = g.input(c + ".w"), b = g.input(c + ".b");
    check_case(g, c, conv2d(x, w, b, p), {{"x", x}, {"w", w}, {"b", b}});
  }
}

// bfloat16 autocast against torch.autocast("cpu", bfloat16). Both round the same operands to
// bfloat16 and accumulate in float32, but PyTorch adds the bias in bfloat16 before rounding the
// output, tandem in float32 after: the outputs and gradients agree to a couple of bfloat16 ulps
// (2^-7 relative) of the tensor's largest element, which bounds every element's difference here.
::testing::AssertionResult close_in_bf16(const Tensor& a, const Tensor& b) {
  const Tensor wide = contiguous_copy(convert_dtype(b, DType::Float64));
  double scale = 0.0;
  for (std::int64_t i = 0; i < wide.numel(); ++i) {
    scale = std::max(scale, std::abs(wide.data<double>()[i]));
  }
  return allclose(a, b, 0.0, scale / 64.0);
}

void check_autocast_case(const GoldenFile& g, const std::string& c, const Tensor& y,
                         const std::vector<std::pair<std::string, Tensor>>& inputs) {
  SCOPED_TRACE("case " + c);
  ASSERT_EQ(y.dtype(), DType::Float32);
  EXPECT_TRUE(close_in_bf16(y, g.get(c + ".y"))) << c << ".y";
  y.backward(g.get(c + ".gy"));
  for (const auto& [role, t] : inputs) {
    ASSERT_TRUE(t.grad().defined()) << c << ": no gradient for " << role;
    EXPECT_EQ(t.grad().dtype(), DType::Float32) << role;
    EXPECT_TRUE(close_in_bf16(t.grad(), g.get(c + ".g" + role))) << c << ".g" << role;
  }
}

TEST(GoldenOps, AutocastBf16) {
  GoldenFile g("op_autocast_bf16.safetensors");
  expect_cases(g, {"conv2d", "linear", "matmul"});
  const AutocastGuard bf16(Precision::BFloat16);
  {
    Conv2dParams p;
    p.stride = g.pair("conv2d.param.stride");
    p.padding = g.pair("conv2d.param.padding");
    Tensor x = g.input("conv2d.x"), w = g.input("conv2d.w"), b = g.input("conv2d.b");
    check_autocast_case(g, "conv2d", conv2d(x, w, b, p), {{"x", x}, {"w", w}, {"b", b}});
  }
  {
    Tensor x = g.input("linear.x"), w = g.input("linear.w"), b = g.input("linear.b");
    check_autocast_case(g, "linear", linear(x, w, b), {{"x", x}, {"w", w}, {"b", b}});
  }
  {
    Tensor a = g.input("matmul.a"), b = g.input("matmul.b");
    check_autocast_case(g, "matmul", matmul(a, b), {{"a", a}, {"b", b}});
  }
}

Pool2dParams pool_params(const GoldenFile& g, const std::string& c) {
  Pool2dParams p;
  p.kernel = g.pair(c + ".param.kernel");
  p.stride = g.pair(c + ".param.stride");
  p.padding = g.pair(c + ".param.padding");
  if (g.has(c + ".param.ceil_mode")) p.ceil_mode = g.integer(c + ".param.ceil_mode") != 0;
  if (g.has(c + ".param.count_include_pad")) {
    p.count_include_pad = g.integer(c + ".param.count_include_pad") != 0;
  }
  return p;
}

TEST(GoldenOps, MaxPool2d) {
  GoldenFile g("op_max_pool2d.safetensors");
  expect_cases(g, {"k2s2", "k3s2p1", "k2s2ceil"});
  for (const std::string c : {"k2s2", "k3s2p1", "k2s2ceil"}) {
    Tensor x = g.input(c + ".x");
    check_case(g, c, max_pool2d(x, pool_params(g, c)), {{"x", x}});
  }
}

TEST(GoldenOps, AvgPool2d) {
  GoldenFile g("op_avg_pool2d.safetensors");
  expect_cases(g, {"k2s2", "k3s2p1", "k3s2p1_exclude_pad"});
  for (const std::string c : {"k2s2", "k3s2p1", "k3s2p1_exclude_pad"}) {
    Tensor x = g.input(c + ".x");
    check_case(g, c, avg_pool2d(x, pool_params(g, c)), {{"x", x}});
  }
}

TEST(GoldenOps, AdaptiveAvgPool2d) {
  GoldenFile g("op_adaptive_avg_pool2d.safetensors");
  expect_cases(g, {"7to3", "6x5to4x3", "global"});
  for (const std::string c : {"7to3", "6x5to4x3", "global"}) {
    Tensor x = g.input(c + ".x");
    check_case(g, c, adaptive_avg_pool2d(x, g.pair(c + ".param.output_size")), {{"x", x}});
  }
}

TEST(GoldenOps, BatchNorm) {
  GoldenFile g("op_batch_norm.safetensors");
  expect_cases(g, {"train4d", "train2d", "eval4d"});
  for (const std::string c : {"train4d", "train2d", "eval4d"}) {
    const bool training = g.integer(c + ".param.training") != 0;
    Tensor x = g.input(c + ".x"), w = g.input(c + ".w"), b = g.input(c + ".b");
    Tensor running_mean = contiguous_copy(g.get(c + ".running_mean"));
    Tensor running_var = contiguous_copy(g.get(c + ".running_var"));
    Tensor y = batch_norm(x, running_mean, running_var, w, b, training, 0.1, 1e-5);
    EXPECT_TRUE(allclose(running_mean, g.get(c + ".running_mean_after"), kRtol, kAtol)) << c;
    EXPECT_TRUE(allclose(running_var, g.get(c + ".running_var_after"), kRtol, kAtol)) << c;
    check_case(g, c, y, {{"x", x}, {"w", w}, {"b", b}});
  }
}

TEST(GoldenOps, Relu) {
  GoldenFile g("op_relu.safetensors");
  expect_cases(g, {"basic"});
  Tensor x = g.input("basic.x");
  check_case(g, "basic", relu(x), {{"x", x}});
}

TEST(GoldenOps, Gelu) {
  GoldenFile g("op_gelu.safetensors");
  expect_cases(g, {"basic"});
  Tensor x = g.input("basic.x");
  check_case(g, "basic", gelu(x), {{"x", x}});
}

TEST(GoldenOps, Softmax) {
  GoldenFile g("op_softmax.safetensors");
  expect_cases(g, {"dim1", "dim0_3d", "dimlast_3d"});
  for (const std::string c : {"dim1", "dim0_3d", "dimlast_3d"}) {
    Tensor x = g.input(c + ".x");
    check_case(g, c, softmax(x, g.integer(c + ".param.dim")), {{"x", x}});
  }
}

TEST(GoldenOps, LogSoftmax) {
  GoldenFile g("op_log_softmax.safetensors");
  expect_cases(g, {"dim1", "dim0_3d", "dimlast_3d"});
  for (const std::string c : {"dim1", "dim0_3d", "dimlast_3d"}) {
    Tensor x = g.input(c + ".x");
    check_case(g, c, log_softmax(x, g.integer(c + ".param.dim")), {{"x", x}});
  }
}

TEST(GoldenOps, CrossEntropy) {
  GoldenFile g("op_cross_entropy.safetensors");
  expect_cases(g, {"ls0_mean", "ls0_sum", "ls01_mean", "ls01_sum"});
  for (const std::string c : {"ls0_mean", "ls0_sum", "ls01_mean", "ls01_sum"}) {
    Tensor x = g.input(c + ".x");
    const double smoothing = g.get(c + ".param.label_smoothing").item();
    const Reduction reduction = g.integer(c + ".param.sum") != 0 ? Reduction::Sum : Reduction::Mean;
    check_case(g, c, cross_entropy(x, g.get(c + ".target"), smoothing, reduction), {{"x", x}});
  }
}

TEST(GoldenOps, MseLoss) {
  GoldenFile g("op_mse_loss.safetensors");
  expect_cases(g, {"mean", "sum"});
  for (const std::string c : {"mean", "sum"}) {
    Tensor x = g.input(c + ".x"), t = g.input(c + ".t");
    const Reduction reduction = g.integer(c + ".param.sum") != 0 ? Reduction::Sum : Reduction::Mean;
    check_case(g, c, mse_loss(x, t, reduction), {{"x", x}, {"t", t}});
  }
}

TEST(GoldenOps, Cat) {
  GoldenFile g("op_cat.safetensors");
  expect_cases(g, {"dim0", "dim1_3way", "dimlast"});
  for (const std::string c : {"dim0", "dim1_3way", "dimlast"}) {
    std::vector<std::pair<std::string, Tensor>> inputs;
    std::vector<Tensor> parts;
    for (const std::string role : {"a", "b", "c"}) {
      const std::string key =
          c + "." + role;  // NOLINT(performance-inefficient-string-concatenation)
      if (!g.has(key)) continue;
      inputs.emplace_back(role, g.input(key));
      parts.push_back(inputs.back().second);
    }
    check_case(g, c, cat(parts, g.integer(c + ".param.dim")), inputs);
  }
}

TEST(GoldenOps, BroadcastingAddMulDiv) {
  GoldenFile g("op_binary.safetensors");
  expect_cases(g, {"add", "mul", "div", "mul_same"});
  for (const std::string c : {"add", "mul", "div", "mul_same"}) {
    Tensor a = g.input(c + ".a"), b = g.input(c + ".b");
    Tensor y = c == "add" ? add(a, b) : c == "div" ? div(a, b) : mul(a, b);
    check_case(g, c, y, {{"a", a}, {"b", b}});
  }
}

TEST(GoldenOps, SumAndMeanOverDims) {
  GoldenFile g("op_reduce.safetensors");
  const std::vector<std::string> cases = {"sum_d1",  "sum_d02_keep",  "sum_dlast",  "sum_all",
                                          "mean_d1", "mean_d02_keep", "mean_dlast", "mean_all"};
  expect_cases(g, {cases.begin(), cases.end()});
  for (const std::string& c : cases) {
    Tensor x = g.input(c + ".x");
    const std::vector<std::int64_t> dims = g.ints(c + ".param.dims");
    const bool keepdim = g.integer(c + ".param.keepdim") != 0;
    Tensor y = c.starts_with("sum") ? sum(x, dims, keepdim) : mean(x, dims, keepdim);
    check_case(g, c, y, {{"x", x}});
  }
}

}  // namespace
}  // namespace tandem
