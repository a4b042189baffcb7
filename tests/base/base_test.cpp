// Tests of the base layer: checks and their messages, dtypes and bfloat16 rounding, shape
// arithmetic, and the Philox generator's determinism and state round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "tandem/base/check.h"
#include "tandem/base/dtype.h"
#include "tandem/base/rng.h"
#include "tandem/base/shape.h"

namespace tandem {
namespace {

TEST(Check, MessageCarriesValuesAndLocation) {
  try {
    TANDEM_CHECK(1 + 1 == 3, "arith: ", 2, " is not ", 3);
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("arith: 2 is not 3"), std::string::npos);
    EXPECT_NE(what.find("base_test.cpp:"), std::string::npos) << what;
  }
}

TEST(DType, SizesAndNames) {
  EXPECT_EQ(element_size(DType::Float32), 4u);
  EXPECT_EQ(element_size(DType::BFloat16), 2u);
  EXPECT_EQ(element_size(DType::Int64), 8u);
  EXPECT_EQ(element_size(DType::UInt8), 1u);
  EXPECT_EQ(dtype_name(DType::Float64), "float64");
  EXPECT_EQ(safetensors_dtype_name(DType::BFloat16), "BF16");
  EXPECT_TRUE(is_floating(DType::BFloat16));
  EXPECT_FALSE(is_floating(DType::Int64));
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(-2.5f)), -2.5f);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even gives 1.
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + 0x1.0p-8f)), 1.0f);
  // Slightly above halfway rounds up.
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + 0x1.0p-8f + 0x1.0p-12f)), 1.0f + 0x1.0p-7f);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::nanf("")))));
  EXPECT_TRUE(std::isinf(static_cast<float>(BFloat16(INFINITY))));
}

TEST(Shape, NumelStridesAndPrinting) {
  EXPECT_EQ(numel({2, 3, 4}), 24);
  EXPECT_EQ(numel({}), 1);
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Strides{12, 4, 1}));
  EXPECT_EQ(to_string({64, 784}), "(64, 784)");
  EXPECT_EQ(to_string({}), "()");
}

TEST(Shape, InferAndBroadcast) {
  EXPECT_EQ(infer_shape({-1, 4}, 24, "view"), (Shape{6, 4}));
  EXPECT_THROW(infer_shape({-1, 5}, 24, "view"), Error);
  EXPECT_THROW(infer_shape({-1, -1}, 24, "view"), Error);
  EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}, "add"), (Shape{2, 3, 4}));
  try {
    broadcast_shapes({2, 3}, {4}, "add");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add: shapes (2, 3) and (4) do not broadcast"),
              std::string::npos);
  }
  EXPECT_EQ(wrap_dim(-1, 3, "sum"), 2);
  EXPECT_THROW(wrap_dim(3, 3, "sum"), Error);
}

TEST(Generator, DeterministicAndStreamsDiffer) {
  Generator a(7), b(7), c(7, 1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.next_u32(), b.next_u32());
  Generator a2(7);
  int same = 0;
  for (int i = 0; i < 100; ++i) same += a2.next_u32() == c.next_u32();
  EXPECT_LT(same, 3);
}

TEST(Generator, StateRoundTripResumesExactly) {
  Generator g(99);
  for (int i = 0; i < 13; ++i) g.next_u32();
  const GeneratorState s = g.state();
  std::vector<std::uint32_t> expected;
  for (int i = 0; i < 20; ++i) expected.push_back(g.next_u32());
  Generator h(0);
  h.set_state(s);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(h.next_u32(), expected[static_cast<std::size_t>(i)]);
}

TEST(Generator, DistributionsHaveTheRightMoments) {
  Generator g(3);
  const int n = 200000;
  double su = 0, sn = 0, sn2 = 0;
  for (int i = 0; i < n; ++i) {
    const float u = g.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    su += u;
    const double z = g.normal();
    sn += z;
    sn2 += z * z;
  }
  EXPECT_NEAR(su / n, 0.5, 0.005);
  EXPECT_NEAR(sn / n, 0.0, 0.01);
  EXPECT_NEAR(sn2 / n, 1.0, 0.01);
  std::set<std::int64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const auto v = g.randint(-3, 4);
    ASSERT_GE(v, -3);
    ASSERT_LT(v, 4);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 7u);
}

TEST(Philox, KnownAnswer) {
  // Random123's known-answer test for philox4x32-10 with counter 0 and key 0.
  const auto r = philox4x32({0, 0, 0, 0}, 0);
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
}

}  // namespace
}  // namespace tandem
