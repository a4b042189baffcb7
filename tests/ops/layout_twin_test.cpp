// Tests of layout twins (ops/cpu/layout_twin.h, tensor/storage.h): a conv's blocked output feeds
// the next conv and a grad_output feeds both backwards, and a twin is never used stale: not after
// an in-place write, not for a slice or a reshape of the tensor it was made for.
// x (N, C, H, W), w (K, C, 3, 3) with padding 1, so every conv keeps (H, W).
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::allclose;

const Conv2dParams kPad1{.padding = {1, 1}};

Tensor f64(const Tensor& t) { return convert_dtype(t, DType::Float64); }

// The float64 reference of conv2d(x, w), read from x's plain data.
Tensor reference(const Tensor& x, const Tensor& w) {
  return convert_dtype(ops::conv2d(f64(x), f64(w), Tensor(), kPad1), DType::Float32);
}

bool has_twin(const Tensor& t) { return t.storage()->twin() != nullptr; }

struct Net {
  Generator gen{7};
  Tensor x = randn({4, 16, 6, 6}, {}, &gen);
  Tensor w1 = randn({16, 16, 3, 3}, {}, &gen) * 0.1;
  Tensor w2 = randn({32, 16, 3, 3}, {}, &gen) * 0.1;
};

TEST(LayoutTwin, ConvOutputFeedsTheNextConv) {
  Net n;
  Tensor y1 = ops::conv2d(n.x, n.w1, Tensor(), kPad1);
  // oneDNN picks a blocked layout for 16 channels on AVX2 and AVX-512 machines; y1's values then
  // live only in its twin until someone reads them.
  const bool blocked = has_twin(y1);
  Tensor y2 = ops::conv2d(y1, n.w2, Tensor(), kPad1);
  EXPECT_EQ(has_twin(y1), blocked);  // the conv read the twin and left it
  EXPECT_TRUE(allclose(y2, reference(y1, n.w2), 1e-4, 1e-4));
  EXPECT_FALSE(has_twin(y1));  // reading the plain data (reference) wrote it back and dropped it
  EXPECT_TRUE(allclose(y1, reference(n.x, n.w1), 1e-4, 1e-4));
}

TEST(LayoutTwin, InPlaceWriteAfterAConvIsSeenByTheNext) {
  Net n;
  Tensor y1 = ops::conv2d(n.x, n.w1, Tensor(), kPad1);
  Tensor before = ops::conv2d(y1, n.w2, Tensor(), kPad1);
  // An in-place op, then a raw write through data<float>().
  ops::fill_(y1, 0.5);
  y1.data<float>()[7] = -3.0f;
  Tensor after = ops::conv2d(y1, n.w2, Tensor(), kPad1);
  EXPECT_TRUE(allclose(after, reference(y1, n.w2), 1e-4, 1e-4));
  EXPECT_FALSE(allclose(after, before, 1e-2, 1e-2));
}

TEST(LayoutTwin, InPlaceWriteToAReorderedInputIsSeen) {
  // x is plain; the first conv keeps its blocked copy as x's twin for the next reader.
  Net n;
  Tensor first = ops::conv2d(n.x, n.w2, Tensor(), kPad1);
  n.x.data<float>()[0] += 10.0f;
  Tensor second = ops::conv2d(n.x, n.w2, Tensor(), kPad1);
  EXPECT_TRUE(allclose(second, reference(n.x, n.w2), 1e-4, 1e-4));
  EXPECT_FALSE(allclose(first, second, 1e-2, 1e-2));
}

TEST(LayoutTwin, SlicesAndReshapesDoNotUseTheWholeTensorsTwin) {
  Net n;
  Tensor y1 = ops::conv2d(n.x, n.w1, Tensor(), kPad1);  // (4, 16, 6, 6)
  Tensor y1_copy = contiguous_copy(ops::conv2d(n.x, n.w1, Tensor(), kPad1));
  // Samples 1 and 2: the same storage at another offset.
  Tensor slice = make_view(y1, {2, 16, 6, 6}, y1.strides(), y1.offset() + 16 * 36);
  EXPECT_TRUE(allclose(ops::conv2d(slice, n.w2, Tensor(), kPad1),
                       reference(make_view(y1_copy, {2, 16, 6, 6}, y1.strides(), 16 * 36), n.w2),
                       1e-4, 1e-4));
  // The same elements as (2, 16, 12, 6): same offset, another shape.
  Tensor y1b = ops::conv2d(n.x, n.w1, Tensor(), kPad1);
  Tensor reshaped = make_view(y1b, {2, 16, 12, 6}, contiguous_strides({2, 16, 12, 6}), 0);
  Tensor reshaped_copy = make_view(y1_copy, {2, 16, 12, 6}, contiguous_strides({2, 16, 12, 6}), 0);
  EXPECT_TRUE(allclose(ops::conv2d(reshaped, n.w2, Tensor(), kPad1),
                       reference(reshaped_copy, n.w2), 1e-4, 1e-4));
  // A view with the same geometry may use the twin, and gets the same values.
  Tensor y1c = ops::conv2d(n.x, n.w1, Tensor(), kPad1);
  EXPECT_TRUE(allclose(ops::conv2d(data_only(y1c), n.w2, Tensor(), kPad1),
                       reference(y1_copy, n.w2), 1e-4, 1e-4));
}

TEST(LayoutTwin, GradOutputServesBothBackwardsAndInPlaceWritesAreSeen) {
  Net n;
  Generator gen(11);
  Tensor g = randn({4, 32, 6, 6}, {}, &gen);
  const Shape x_shape = n.x.shape(), w_shape = n.w2.shape();
  Tensor gx = ops::conv2d_backward_input(g, n.w2, x_shape, kPad1);
  Tensor gw, gw_ref;
  ops::conv2d_backward_weights(g, n.x, w_shape, kPad1, &gw, nullptr);
  ops::conv2d_backward_weights(f64(g), f64(n.x), w_shape, kPad1, &gw_ref, nullptr);
  EXPECT_TRUE(allclose(gw, convert_dtype(gw_ref, DType::Float32), 1e-3, 1e-3));
  EXPECT_TRUE(allclose(gx, convert_dtype(ops::conv2d_backward_input(f64(g), f64(n.w2), x_shape,
                                                                    kPad1), DType::Float32),
                       1e-4, 1e-4));
  // Between the two backwards someone changes grad_out in place.
  Tensor gx2 = ops::conv2d_backward_input(g, n.w2, x_shape, kPad1);
  ops::fill_(g, 1.0);
  ops::conv2d_backward_weights(g, n.x, w_shape, kPad1, &gw, nullptr);
  ops::conv2d_backward_weights(f64(g), f64(n.x), w_shape, kPad1, &gw_ref, nullptr);
  EXPECT_TRUE(allclose(gw, convert_dtype(gw_ref, DType::Float32), 1e-3, 1e-3));
}

TEST(LayoutTwin, BackwardDataOutputFeedsBackwardWeightsOfTheLayerBelow) {
  // conv2's input gradient (blocked, pending) is conv1's grad_output.
  Net n;
  Generator gen(5);
  Tensor g2 = randn({4, 32, 6, 6}, {}, &gen);
  Tensor g1 = ops::conv2d_backward_input(g2, n.w2, n.x.shape(), kPad1);  // (4, 16, 6, 6)
  Tensor gw1;
  ops::conv2d_backward_weights(g1, n.x, n.w1.shape(), kPad1, &gw1, nullptr);
  Tensor gw1_ref;
  ops::conv2d_backward_weights(f64(g1), f64(n.x), n.w1.shape(), kPad1, &gw1_ref, nullptr);
  EXPECT_TRUE(allclose(gw1, convert_dtype(gw1_ref, DType::Float32), 1e-3, 1e-3));
}

TEST(LayoutTwin, StorageDropsItsTwinOnRawAccess) {
  Net n;
  Tensor y1 = ops::conv2d(n.x, n.w1, Tensor(), kPad1);
  if (!has_twin(y1)) GTEST_SKIP() << "oneDNN chose plain layouts on this CPU";
  const Tensor view = y1.view({4, -1});
  (void)view.raw_data();  // any raw pointer, through any view of the storage
  EXPECT_FALSE(has_twin(y1));
  EXPECT_TRUE(allclose(y1, reference(n.x, n.w1), 1e-4, 1e-4));
}

// The float64 reference of linear(x, w, b), b optional.
Tensor ref_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor y = ops::matmul(f64(x), f64(w), false, true);
  if (b.defined()) y = ops::binary(ops::BinaryOp::Add, y, f64(b));
  return convert_dtype(y, DType::Float32);
}

TEST(LayoutTwin, LinearReadsAConvOutputAndWritesItsGradientBlocked) {
  // conv (4, 16, 6, 6) -> flatten (4, 576) -> linear (4, 10), and the backward down to the conv.
  Net n;
  Generator gen(3);
  Tensor wl = randn({10, 576}, {}, &gen) * 0.05, bl = randn({10}, {}, &gen);
  Tensor g = randn({4, 10}, {}, &gen);
  Tensor y1 = ops::conv2d(n.x, n.w1, Tensor(), kPad1);
  Tensor flat = make_view(y1, {4, 576}, contiguous_strides({4, 576}), 0);
  Tensor out = ops::linear(flat, wl, bl);
  Tensor gx = ops::linear_backward_input(g, wl);  // (4, 576)
  Tensor gw, gb;
  ops::linear_backward_weights(g, flat, &gw, &gb);
  Tensor gx4 = make_view(gx, {4, 16, 6, 6}, contiguous_strides({4, 16, 6, 6}), 0);
  Tensor gw1, gw1_ref;
  ops::conv2d_backward_weights(gx4, n.x, n.w1.shape(), kPad1, &gw1, nullptr);
  // References, all from plain data (which writes the twins back).
  EXPECT_TRUE(allclose(out, ref_linear(flat, wl, bl), 1e-4, 1e-4));
  EXPECT_TRUE(allclose(gx, convert_dtype(ops::matmul(f64(g), f64(wl)), DType::Float32), 1e-4,
                       1e-5));
  EXPECT_TRUE(allclose(gw, convert_dtype(ops::matmul(f64(g), f64(flat), true, false),
                                         DType::Float32), 1e-4, 1e-4));
  EXPECT_TRUE(allclose(gb, convert_dtype(ops::sum(f64(g), {0}, false), DType::Float32), 1e-5,
                       1e-5));
  ops::conv2d_backward_weights(f64(gx4), f64(n.x), n.w1.shape(), kPad1, &gw1_ref, nullptr);
  EXPECT_TRUE(allclose(gw1, convert_dtype(gw1_ref, DType::Float32), 1e-3, 1e-3));
}

// Whatever the conv's channel count (a multiple of the 16-channel block, read through a matmul
// over both twins; or padded up to it, read through the inner product), with or without a bias,
// the linear layer over the conv's output equals the product of the plain values.
TEST(LayoutTwin, LinearOverAConvOutputOfAnyChannelCount) {
  for (const std::int64_t channels : {16, 20, 8, 48}) {
    for (const bool bias : {true, false}) {
      SCOPED_TRACE(::testing::Message() << channels << " channels, bias " << bias);
      Generator gen(5);
      const Tensor x = randn({3, 4, 5, 5}, {}, &gen);
      const Tensor w = randn({channels, 4, 3, 3}, {}, &gen) * 0.2;
      const std::int64_t d = channels * 25;
      const Tensor wl = randn({7, d}, {}, &gen) * 0.05;
      const Tensor bl = bias ? randn({7}, {}, &gen) : Tensor();
      const Tensor y = ops::conv2d(x, w, Tensor(), kPad1);
      const Tensor flat = make_view(y, {3, d}, contiguous_strides({3, d}), 0);
      const Tensor out = ops::linear(flat, wl, bl);
      EXPECT_TRUE(allclose(out, ref_linear(flat, wl, bl), 1e-4, 1e-4));  // from plain values
    }
  }
}

TEST(LayoutTwin, LinearBackwardSeesAWeightWrittenAfterTheForward) {
  Net n;
  Generator gen(4);
  Tensor wl = randn({10, 576}, {}, &gen) * 0.05, bl = randn({10}, {}, &gen);
  Tensor g = randn({4, 10}, {}, &gen);
  Tensor y1 = ops::conv2d(n.x, n.w1, Tensor(), kPad1);
  Tensor out = ops::linear(make_view(y1, {4, 576}, contiguous_strides({4, 576}), 0), wl, bl);
  wl.data<float>()[3] = 7.0f;  // drops the weight's blocked twin
  Tensor gx = ops::linear_backward_input(g, wl);
  EXPECT_TRUE(allclose(gx, convert_dtype(ops::matmul(f64(g), f64(wl)), DType::Float32), 1e-4,
                       1e-5));
}

}  // namespace
}  // namespace tandem
