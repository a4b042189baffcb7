// relu and gelu: float32 (oneDNN eltwise) against the float64 reference loops, forward and
// backward, on contiguous and strided inputs, plus values checked by hand.
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::allclose;

void check_against_reference(Tensor (*f)(const Tensor&), const Tensor& x32) {
  Tensor a = x32.detach().set_requires_grad(true);
  Tensor b = x32.detach().to(DType::Float64).set_requires_grad(true);
  Tensor ya = f(a), yb = f(b);
  EXPECT_TRUE(allclose(ya, yb, 1e-6, 1e-6));
  Generator g(9);
  Tensor gy = randn(ya.shape(), {}, &g);
  ya.backward(gy);
  yb.backward(gy.to(DType::Float64));
  EXPECT_TRUE(allclose(a.grad(), b.grad(), 1e-5, 1e-6));
}

TEST(Activation, ReluAndGeluMatchTheReference) {
  Generator g(4);
  Tensor x = randn({7, 33}, {}, &g) * 3.0;
  check_against_reference(&relu, x);
  check_against_reference(&gelu, x);
  // Strided input takes the loop path; the result must agree too.
  check_against_reference(&relu, x.transpose(0, 1));
  check_against_reference(&gelu, x.transpose(0, 1));
}

TEST(Activation, HandValues) {
  Tensor x = from_vector(std::vector<float>{-2, -0.5, 0, 0.5, 2}, {5});
  EXPECT_TRUE(allclose(relu(x), {0, 0, 0, 0.5, 2}));
  // torch.nn.functional.gelu(torch.tensor([-2., -.5, 0., .5, 2.]))
  EXPECT_TRUE(allclose(gelu(x), {-0.04550027, -0.15426877, 0.0, 0.34573123, 1.95449972}, 1e-5,
                       1e-6));
}

}  // namespace
}  // namespace tandem
