// Tests of the tensor layer: factories, metadata, views sharing storage, contiguous copies,
// dtype conversion (bfloat16 included), element access and printing, and error messages.
#include <gtest/gtest.h>

#include <sstream>

#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::allclose;

TEST(Factories, FillsAndShapes) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), DType::Float32);
  EXPECT_EQ(z.device(), kCPU);
  EXPECT_TRUE(allclose(z, std::vector<double>(6, 0.0)));
  EXPECT_TRUE(allclose(ones({4}, {.dtype = DType::Int64}), {1, 1, 1, 1}));
  EXPECT_TRUE(allclose(full({2}, 2.5, {.dtype = DType::Float64}), {2.5, 2.5}));
  EXPECT_TRUE(allclose(arange(0, 5), {0, 1, 2, 3, 4}));
  EXPECT_TRUE(allclose(arange(1, 2, 0.25), {1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(empty({0, 3}).numel(), 0);
  EXPECT_THROW(zeros({-1, 2}), Error);
}

TEST(Factories, SeededRandomIsReproducible) {
  Generator g1(5), g2(5);
  Tensor a = randn({100}, {}, &g1), b = randn({100}, {}, &g2);
  EXPECT_TRUE(allclose(a, b, 0, 0));
  Tensor r = randint(0, 10, {1000}, {.dtype = DType::Int64}, &g1);
  for (auto v : r.to_vector<std::int64_t>()) {
    ASSERT_GE(v, 0);
    ASSERT_LT(v, 10);
  }
  manual_seed(11);
  Tensor c = rand({10});
  manual_seed(11);
  Tensor d = rand({10});
  EXPECT_TRUE(allclose(c, d, 0, 0));
}

TEST(Tensor, FromVectorItemAndAt) {
  Tensor t = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.at({1, 2}), 6.0);
  EXPECT_EQ(t.at({0, 1}), 2.0);
  EXPECT_THROW(t.at({2, 0}), Error);
  EXPECT_THROW(t.item(), Error);
  EXPECT_EQ(scalar_tensor(3.5).item(), 3.5);
  EXPECT_EQ(t.data<float>()[4], 5.0f);
  EXPECT_THROW(t.data<double>(), Error);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = arange(0, 12).reshape({3, 4});
  Tensor tr = t.transpose(0, 1);
  EXPECT_EQ(tr.shape(), (Shape{4, 3}));
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(tr.at({3, 1}), 7.0);
  Tensor s = t.slice(1, 1, 4, 2);  // columns 1 and 3
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  EXPECT_TRUE(allclose(s, {1, 3, 5, 7, 9, 11}));
  Tensor n = t.narrow(0, 1, 2);
  EXPECT_TRUE(allclose(n.flatten(), {4, 5, 6, 7, 8, 9, 10, 11}));
  n.fill_(-1);
  EXPECT_EQ(t.at({1, 0}), -1.0);  // written through the view
  EXPECT_EQ(t.at({0, 0}), 0.0);
  Tensor c = tr.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_TRUE(allclose(c.flatten().slice(0, 0, 3), {0, -1, -1}));  // rows 1 and 2 were filled
}

TEST(Tensor, TensorsWithoutElementsAreContiguous) {
  // Found by the safetensors fuzzer: a (4, 0) tensor read from a file was not contiguous.
  EXPECT_TRUE(empty({4, 0}).is_contiguous());
  EXPECT_TRUE(empty({0, 3, 2}).is_contiguous());
  EXPECT_TRUE(make_view(zeros({6}), {2, 0}, {1, 5}, 0).is_contiguous());
  EXPECT_FALSE(make_view(zeros({6}), {2, 3}, {1, 2}, 0).is_contiguous());
}

TEST(Tensor, ViewOfNonContiguousIsAClearError) {
  Tensor t = zeros({3, 4}).transpose(0, 1);
  try {
    t.view({12});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("view: tensor of shape (4, 3) is not contiguous"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(t.reshape({12}).numel(), 12);
  EXPECT_THROW(zeros({3, 4}).view({5, -1}), Error);
}

TEST(Tensor, DtypeConversions) {
  Tensor f = from_vector(std::vector<double>{1.5, -2.25, 3.0, 1e-3}, {4});
  Tensor d = f.to(DType::Float64);
  EXPECT_EQ(d.dtype(), DType::Float64);
  EXPECT_TRUE(allclose(d, f, 0, 0));
  Tensor b = f.to(DType::BFloat16);
  EXPECT_EQ(b.dtype(), DType::BFloat16);
  EXPECT_EQ(b.nbytes(), 8u);
  EXPECT_TRUE(allclose(b.to(DType::Float32), {1.5, -2.25, 3.0, 0.00099945068359375}, 0, 0));
  Tensor i = f.to(DType::Int64);
  EXPECT_TRUE(allclose(i, {1, -2, 3, 0}));
  Tensor u = from_vector(std::vector<double>{0, 255}, {2}, {.dtype = DType::UInt8});
  EXPECT_TRUE(allclose(u.to(DType::Float32), {0, 255}));
}

TEST(Tensor, CopyToSameDeviceIsIdentity) {
  Tensor t = ones({2});
  EXPECT_TRUE(t.to(kCPU).is_same(t));
}

TEST(Tensor, PrintsShapeDtypeAndValues) {
  std::ostringstream out;
  out << from_vector(std::vector<float>{1, 2}, {2});
  EXPECT_NE(out.str().find("shape=(2)"), std::string::npos);
  EXPECT_NE(out.str().find("float32"), std::string::npos);
  EXPECT_NE(out.str().find("[1, 2]"), std::string::npos) << out.str();
}

TEST(Tensor, RequiresGradOnlyForFloats) {
  EXPECT_THROW(zeros({2}, {.dtype = DType::Int64}).set_requires_grad(true), Error);
  Tensor t = zeros({2}, {.requires_grad = true});
  EXPECT_TRUE(t.requires_grad());
  EXPECT_TRUE(t.is_leaf());
}

TEST(Tensor, UndefinedTensorIsAClearError) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_THROW(t.shape(), Error);
}

TEST(Ops, BinaryDtypeMismatchNamesTheOp) {
  try {
    zeros({2}) + zeros({2}, {.dtype = DType::Float64});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add: dtypes differ"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
