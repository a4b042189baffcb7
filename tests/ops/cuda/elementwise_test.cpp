// The CUDA elementwise kernels against the CPU ones: broadcasting binary ops (also on strided
// views), scalar maps, every unary op and activation backward, in-place accumulate / scale / fill,
// equality and casts (bfloat16 rounding included); and operands on two devices are an error.
#include <gtest/gtest.h>

#include <vector>

#include "errors.h"
#include "parity.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/ops.h"

namespace tandem {
namespace {

using testing::near_cpu;
using testing::on_gpu;
using testing::random_cpu;

TEST(CudaElementwise, BinaryOpsBroadcastLikeTheCpu) {
  TANDEM_REQUIRE_GPU();
  const Tensor a = random_cpu({4, 1, 5}, 1), b = random_cpu({3, 1}, 2, 0.5, 2.0);
  for (ops::BinaryOp op :
       {ops::BinaryOp::Add, ops::BinaryOp::Sub, ops::BinaryOp::Mul, ops::BinaryOp::Div}) {
    EXPECT_TRUE(near_cpu(ops::binary(op, on_gpu(a), on_gpu(b)), ops::binary(op, a, b)));
  }
  // A transposed (strided) operand of the same shape.
  const Tensor m = random_cpu({6, 7}, 3), n = random_cpu({7, 6}, 4);
  const Tensor nt = make_view(n, {6, 7}, {1, 6}, 0);
  const Tensor nt_gpu = make_view(on_gpu(n), {6, 7}, {1, 6}, 0);
  EXPECT_TRUE(near_cpu(ops::binary(ops::BinaryOp::Mul, on_gpu(m), nt_gpu),
                       ops::binary(ops::BinaryOp::Mul, m, nt)));
}

TEST(CudaElementwise, ZerosAreSetOnTheGpuEvenInReusedMemory) {
  TANDEM_REQUIRE_GPU();
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
    {  // a block of the caching allocator left full of ones, then handed out again
      const Tensor ones_block = ones({4099}, {.dtype = dtype, .device = testing::kGpu});
    }
    const Tensor z = zeros({4099}, {.dtype = dtype, .device = testing::kGpu});
    const std::vector<double> host = z.to(kCPU).to(DType::Float64).to_vector<double>();
    EXPECT_EQ(host, std::vector<double>(4099, 0.0)) << dtype;
  }
}

TEST(CudaElementwise, MapsAndUnaryOpsMatchTheCpu) {
  TANDEM_REQUIRE_GPU();
  const Tensor x = random_cpu({5, 33}, 5, -3.0, 3.0);
  const Tensor pos = random_cpu({5, 33}, 6, 0.1, 4.0);
  EXPECT_TRUE(near_cpu(ops::affine(on_gpu(x), 1.5, -0.25), ops::affine(x, 1.5, -0.25)));
  EXPECT_TRUE(near_cpu(ops::reciprocal_scaled(on_gpu(pos), 3.0), ops::reciprocal_scaled(pos, 3.0)));
  EXPECT_TRUE(near_cpu(ops::pow_scalar(on_gpu(pos), 2.0), ops::pow_scalar(pos, 2.0)));
  EXPECT_TRUE(near_cpu(ops::pow_scalar(on_gpu(pos), 0.7), ops::pow_scalar(pos, 0.7)));
  for (ops::UnaryOp op :
       {ops::UnaryOp::Neg, ops::UnaryOp::Exp, ops::UnaryOp::Abs, ops::UnaryOp::Relu,
        ops::UnaryOp::Gelu, ops::UnaryOp::Sigmoid, ops::UnaryOp::Tanh}) {
    EXPECT_TRUE(near_cpu(ops::unary(op, on_gpu(x)), ops::unary(op, x)))
        << "unary op " << static_cast<int>(op);
  }
  for (ops::UnaryOp op : {ops::UnaryOp::Log, ops::UnaryOp::Sqrt}) {
    EXPECT_TRUE(near_cpu(ops::unary(op, on_gpu(pos)), ops::unary(op, pos)))
        << "unary op " << static_cast<int>(op);
  }
  const Tensor x64 = random_cpu({17}, 7, -2.0, 2.0, DType::Float64);
  EXPECT_TRUE(near_cpu(ops::unary(ops::UnaryOp::Gelu, on_gpu(x64)),
                       ops::unary(ops::UnaryOp::Gelu, x64), 1e-12, 1e-12));
}

TEST(CudaElementwise, ActivationBackwardsMatchTheCpu) {
  TANDEM_REQUIRE_GPU();
  const Tensor x = random_cpu({8, 9}, 8, -2.0, 2.0), g = random_cpu({8, 9}, 9);
  const Tensor y = ops::unary(ops::UnaryOp::Relu, x);
  EXPECT_TRUE(near_cpu(ops::relu_backward(on_gpu(g), on_gpu(y)), ops::relu_backward(g, y)));
  EXPECT_TRUE(near_cpu(ops::gelu_backward(on_gpu(g), on_gpu(x)), ops::gelu_backward(g, x)));
}

TEST(CudaElementwise, InPlaceAccumulateScaleAndFill) {
  TANDEM_REQUIRE_GPU();
  const Tensor d = random_cpu({4, 6}, 10), s = random_cpu({6, 4}, 11);
  const Tensor st = make_view(s, {4, 6}, {1, 4}, 0);
  Tensor d_gpu = on_gpu(d);
  const Tensor st_gpu = make_view(on_gpu(s), {4, 6}, {1, 4}, 0);
  const Tensor d_cpu = d.contiguous().clone();
  ops::add_(d_cpu, st, 0.5);
  ops::add_(d_gpu, st_gpu, 0.5);
  EXPECT_TRUE(near_cpu(d_gpu, d_cpu));
  ops::scale_(d_cpu, -3.0);
  ops::scale_(d_gpu, -3.0);
  EXPECT_TRUE(near_cpu(d_gpu, d_cpu));
  for (DType dtype :
       {DType::Float32, DType::Float64, DType::Int64, DType::UInt8, DType::BFloat16}) {
    Tensor f = empty({3, 5}, {.dtype = dtype, .device = testing::kGpu});
    ops::fill_(f, 7.0);
    const Tensor back = f.to(kCPU);
    for (std::int64_t i = 0; i < back.numel(); ++i) {
      EXPECT_EQ(back.to(DType::Float64).data<double>()[i], 7.0) << dtype;
    }
  }
  // A strided destination: every other column of a (3, 6) tensor.
  Tensor wide = zeros({3, 6}, {.device = testing::kGpu});
  ops::fill_(make_view(wide, {3, 3}, {6, 2}, 0), 1.0);
  const Tensor host = wide.to(kCPU);
  for (std::int64_t i = 0; i < 18; ++i) EXPECT_EQ(host.data<float>()[i], i % 2 == 0 ? 1.0f : 0.0f);
}

TEST(CudaElementwise, EqualityAndCastsMatchTheCpu) {
  TANDEM_REQUIRE_GPU();
  const Tensor a = random_cpu({50}, 12, -300.0, 300.0);
  Tensor b = a.clone();
  b.data<float>()[3] += 1.0f;
  EXPECT_TRUE(near_cpu(ops::equal(on_gpu(a), on_gpu(b)), ops::equal(a, b), 0, 0));
  for (DType to : {DType::Float64, DType::BFloat16, DType::Int64, DType::UInt8}) {
    const Tensor source = to == DType::UInt8 ? random_cpu({50}, 13, 0.0, 250.0) : a;
    EXPECT_TRUE(near_cpu(ops::cast(on_gpu(source), to), ops::cast(source, to), 0, 0)) << to;
  }
  const Tensor bf = ops::cast(a, DType::BFloat16);
  EXPECT_TRUE(near_cpu(ops::cast(on_gpu(bf), DType::Float32), ops::cast(bf, DType::Float32), 0, 0));
}

TEST(CudaElementwise, OperandsOnTwoDevicesAreAnError) {
  TANDEM_REQUIRE_GPU();
  const Tensor a = random_cpu({3}, 14);
  testing::expect_contains(
      testing::error_of([&] { ops::binary(ops::BinaryOp::Add, a, on_gpu(a)); }),
      "add: operands on different devices (cuda:0 and cpu)");
}

}  // namespace
}  // namespace tandem
