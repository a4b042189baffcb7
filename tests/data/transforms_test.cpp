// Tests of the batch transforms: exact values for ToFloat and Normalize, RandomCrop and
// RandomHorizontalFlip checked against their definitions, and per-sample generators that make a
// sample's result independent of the batch (and so of the thread) it was built in.
#include <gtest/gtest.h>

#include <map>

#include "data_test_util.h"

namespace tandem::data {
namespace {

using testing::error_of;

// (B, C, H, W) uint8 with element value = (b * 37 + c * 11 + y * 5 + x) % 256.
Tensor pattern(std::int64_t batch, std::int64_t channels, std::int64_t height, std::int64_t width) {
  std::vector<std::uint8_t> v;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t c = 0; c < channels; ++c)
      for (std::int64_t y = 0; y < height; ++y)
        for (std::int64_t x = 0; x < width; ++x)
          v.push_back(static_cast<std::uint8_t>((b * 37 + c * 11 + y * 5 + x) % 256));
  return from_host(v.data(), DType::UInt8, {batch, channels, height, width});
}

TransformContext context(const std::vector<std::int64_t>& indices, std::uint64_t seed = 0,
                         std::int64_t epoch = 0) {
  return {.indices = indices, .seed = seed, .epoch = epoch};
}

TEST(ToFloat, DividesBy255) {
  const std::vector<std::uint8_t> v{0, 51, 255, 1};
  Tensor x = from_host(v.data(), DType::UInt8, {2, 2});
  Tensor y = ToFloat().apply(x, context({0, 1}));
  EXPECT_EQ(y.dtype(), DType::Float32);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0.0f, 0.2f, 1.0f, 1.0f / 255.0f}));
  TANDEM_EXPECT_ERROR_HAS(error_of([&] {
                            ToFloat().apply(y, context({0, 1}));
                          }),
                          "ToFloat: expects uint8 data, got float32");
}

TEST(Normalize, PerChannelAndLeavesBorrowedInputAlone) {
  // (B=1, C=2, 2): channel 0 mean 0.5 std 0.25; channel 1 mean -1 std 2.
  Tensor x = from_vector(std::vector<float>{0.5f, 1.0f, 1.0f, -3.0f}, {1, 2, 2});
  Normalize n({0.5f, -1.0f}, {0.25f, 2.0f});
  Tensor y = n.apply(x, context({0}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0.0f, 2.0f, 1.0f, -1.0f}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0.5f, 1.0f, 1.0f, -3.0f}));
  // An owned input is changed in place.
  TransformContext owned = context({0});
  owned.owns_input = true;
  Tensor z = n.apply(x, owned);
  EXPECT_EQ(z.storage(), x.storage());
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0.0f, 2.0f, 1.0f, -1.0f}));
  // One mean/std for every channel.
  Tensor w =
      Normalize({1.0f}, {0.5f}).apply(from_vector(std::vector<float>{2, 0}, {1, 2}), context({0}));
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{2.0f, -2.0f}));
}

TEST(Normalize, Errors) {
  TANDEM_EXPECT_ERROR_HAS(
      error_of([] {
        Normalize({0.5f, 0.5f, 0.5f}, {1.0f, 1.0f, 1.0f}).apply(zeros({2, 2, 4}), context({0, 1}));
      }),
      "3 mean/std entries for data with 2 channels");
  TANDEM_EXPECT_ERROR_HAS(
      error_of([] { Normalize({0.5f}, {0.5f}).apply(pattern(1, 1, 2, 2), context({0})); }),
      "expects float32", "uint8");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { Normalize({0.5f}, {0.0f}); }), "std[0] = 0");
  TANDEM_EXPECT_ERROR_HAS(error_of([] {
                            Normalize({0.5f}, {1.0f, 2.0f});
                          }),
                          "mean has 1 entries and std 2");
}

TEST(RandomCrop, WithoutPaddingAtFullSizeIsIdentity) {
  Tensor x = pattern(3, 2, 5, 4);
  Tensor y = RandomCrop(5, 4, 0).apply(x, context({0, 1, 2}));
  EXPECT_EQ(y.to_vector<std::int64_t>(), x.to_vector<std::int64_t>());
}

// Finds where `out` (C, h, w) sits in `img` (C, H, W) zero-padded by p: the (top, left) that
// reproduces it exactly, or (-1, -1).
std::pair<std::int64_t, std::int64_t> locate(const Tensor& img, const Tensor& out, std::int64_t p) {
  const std::int64_t channels = img.size(0), height = img.size(1), width = img.size(2);
  const std::int64_t h = out.size(1), w = out.size(2);
  for (std::int64_t top = 0; top <= height + 2 * p - h; ++top) {
    for (std::int64_t left = 0; left <= width + 2 * p - w; ++left) {
      bool match = true;
      for (std::int64_t c = 0; c < channels && match; ++c)
        for (std::int64_t y = 0; y < h && match; ++y)
          for (std::int64_t x = 0; x < w && match; ++x) {
            const std::int64_t sy = top + y - p, sx = left + x - p;
            const double expected =
                (sy < 0 || sy >= height || sx < 0 || sx >= width) ? 0.0 : img.at({c, sy, sx});
            match = out.at({c, y, x}) == expected;
          }
      if (match) return {top, left};
    }
  }
  return {-1, -1};
}

TEST(RandomCrop, IsAWindowOfThePaddedImageAtAUniformPosition) {
  // Values start at 1 so the zero padding is told apart from the image.
  Tensor x = convert_dtype(pattern(1, 2, 6, 5), DType::Float32);
  std::vector<float> shifted = x.to_vector<float>();
  for (float& v : shifted) v += 1.0f;
  x = from_vector(shifted, {1, 2, 6, 5});
  RandomCrop crop(4, 3, 2);
  std::map<std::pair<std::int64_t, std::int64_t>, int> seen;
  const int n = 1800;
  for (int i = 0; i < n; ++i) {
    Tensor y = crop.apply(x, context({i}, 5));
    ASSERT_EQ(y.shape(), (Shape{1, 2, 4, 3}));
    const auto pos =
        locate(make_view(x, {2, 6, 5}, {30, 5, 1}, 0), make_view(y, {2, 4, 3}, {12, 3, 1}, 0), 2);
    ASSERT_GE(pos.first, 0) << "sample " << i << " is not a window of the padded image";
    ++seen[pos];
  }
  // (6 + 4 - 4 + 1) x (5 + 4 - 3 + 1) = 7 x 7 positions, 1800 / 49 = 36.7 each on average.
  EXPECT_EQ(seen.size(), 49u);
  for (const auto& [pos, count] : seen) EXPECT_GT(count, 10) << pos.first << "," << pos.second;
}

TEST(RandomCrop, Errors) {
  TANDEM_EXPECT_ERROR_HAS(
      error_of([] { RandomCrop(40, 4).apply(pattern(1, 1, 28, 28), context({0})); }),
      "40x40 window does not fit a 28x28 image padded by 4");
  TANDEM_EXPECT_ERROR_HAS(error_of([] {
                            RandomCrop(2).apply(zeros({2, 4}), context({0, 1}));
                          }),
                          "expects (B, C, H, W)");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { RandomCrop(2, -1); }), "padding -1");
}

TEST(RandomHorizontalFlip, ProbabilityOneMirrorsZeroKeeps) {
  Tensor x = pattern(2, 2, 2, 3);
  Tensor y = RandomHorizontalFlip(1.0).apply(x, context({0, 1}));
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t c = 0; c < 2; ++c)
      for (std::int64_t r = 0; r < 2; ++r)
        for (std::int64_t col = 0; col < 3; ++col)
          EXPECT_EQ(y.at({b, c, r, col}), x.at({b, c, r, 2 - col}));
  EXPECT_EQ(RandomHorizontalFlip(0.0).apply(x, context({0, 1})).to_vector<std::int64_t>(),
            x.to_vector<std::int64_t>());
  // float32 and a borrowed input that stays as it was.
  Tensor f = convert_dtype(x, DType::Float32);
  Tensor g = RandomHorizontalFlip(1.0).apply(f, context({0, 1}));
  EXPECT_EQ(g.to_vector<std::int64_t>(), y.to_vector<std::int64_t>());
  EXPECT_EQ(f.to_vector<std::int64_t>(), x.to_vector<std::int64_t>());
  TANDEM_EXPECT_ERROR_HAS(error_of([] { RandomHorizontalFlip(1.5); }), "probability 1.5");
}

TEST(RandomHorizontalFlip, FlipsAboutHalf) {
  Tensor x = pattern(1, 1, 1, 2);
  int flipped = 0;
  const int n = 10000;
  for (int i = 0; i < n; ++i) {
    flipped +=
        RandomHorizontalFlip(0.5).apply(x, context({i}, 1)).at({0, 0, 0, 0}) != x.at({0, 0, 0, 0});
  }
  EXPECT_GT(flipped, 4700);  // 5000 +- 50 (one sigma)
  EXPECT_LT(flipped, 5300);
}

TEST(Transforms, ASampleDoesNotDependOnItsBatch) {
  Compose pipeline(
      {RandomCrop(5, 2), RandomHorizontalFlip(), ToFloat(), Normalize({0.5f}, {0.25f})});
  const std::vector<std::int64_t> indices{42, 7, 1000, 3};
  Tensor batch = pattern(4, 3, 5, 5);
  Tensor together = pipeline.apply(batch, context(indices, 9, 2));
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const auto b = static_cast<std::int64_t>(k);
    Tensor sample = make_view(batch, {3, 5, 5}, {25, 5, 1}, b * 75);
    Tensor alone = apply_to_sample(pipeline, sample, indices[k], 9, 2);
    const auto all = together.to_vector<float>();
    EXPECT_EQ(std::vector<float>(all.begin() + b * 75, all.begin() + (b + 1) * 75),
              alone.to_vector<float>())
        << "sample " << indices[k];
  }
  // Another epoch or seed moves the crops.
  EXPECT_NE(pipeline.apply(batch, context(indices, 9, 3)).to_vector<float>(),
            together.to_vector<float>());
  EXPECT_NE(pipeline.apply(batch, context(indices, 8, 2)).to_vector<float>(),
            together.to_vector<float>());
  EXPECT_EQ(pipeline.apply(batch, context(indices, 9, 2)).to_vector<float>(),
            together.to_vector<float>());
}

TEST(Transforms, StepsOfAPipelineDrawIndependently) {
  // Two flips with p = 0.5 cancel only when both fire or neither does: with one shared
  // generator they would always agree; independent, the result is mirrored half the time.
  Compose twice({RandomHorizontalFlip(0.5), RandomHorizontalFlip(0.5)});
  Tensor x = pattern(1, 1, 1, 2);
  int mirrored = 0;
  for (int i = 0; i < 4000; ++i)
    mirrored += twice.apply(x, context({i})).at({0, 0, 0, 0}) != x.at({0, 0, 0, 0});
  EXPECT_GT(mirrored, 1700);
  EXPECT_LT(mirrored, 2300);
  EXPECT_EQ(twice.name(), "Compose(RandomHorizontalFlip(p=0.5), RandomHorizontalFlip(p=0.5))");
}

TEST(Transforms, SampleGeneratorsAreDistinctStreams) {
  Generator a = sample_generator(1, 0, 5, 0), b = sample_generator(1, 0, 6, 0);
  Generator c = sample_generator(1, 1, 5, 0), d = sample_generator(1, 0, 5, 1);
  Generator a2 = sample_generator(1, 0, 5, 0);
  const std::uint64_t va = a.next_u64();
  EXPECT_EQ(va, a2.next_u64());
  EXPECT_NE(va, b.next_u64());
  EXPECT_NE(va, c.next_u64());
  EXPECT_NE(va, d.next_u64());
}

}  // namespace
}  // namespace tandem::data
