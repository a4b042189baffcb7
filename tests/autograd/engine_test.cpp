// Tests of the tape and the backward engine: accumulation, shared inputs, no-grad, hooks,
// retain_graph, and gradient checks of the elementwise, shape and reduction functions.
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::allclose;
using testing::gradcheck;
using testing::random_input;

TEST(Engine, ScalarBackwardAccumulatesUntilZeroed) {
  Tensor x = from_vector(std::vector<double>{1, 2, 3}, {3}, {.requires_grad = true});
  (x * x).sum().backward();
  EXPECT_TRUE(allclose(x.grad(), {2, 4, 6}));
  (x * 3.0).sum().backward();
  EXPECT_TRUE(allclose(x.grad(), {5, 7, 9}));
  x.grad().zero_();
  x.sum().backward();
  EXPECT_TRUE(allclose(x.grad(), {1, 1, 1}));
}

TEST(Engine, SharedInputGetsSummedGradient) {
  Tensor x = from_vector(std::vector<double>{2.0}, {1}, {.requires_grad = true});
  Tensor y = x * x + x * 3.0 + x;  // dy/dx = 2x + 4 = 8
  y.sum().backward();
  EXPECT_DOUBLE_EQ(x.grad().item(), 8.0);
}

TEST(Engine, BackwardWithGivenGradient) {
  Tensor x = from_vector(std::vector<double>{1, 2}, {2}, {.requires_grad = true});
  Tensor y = x * 2.0;
  y.backward(from_vector(std::vector<double>{10, 100}, {2}));
  EXPECT_TRUE(allclose(x.grad(), {20, 200}));
}

TEST(Engine, NonScalarWithoutGradientIsAnError) {
  Tensor x = ones({2}, {.requires_grad = true});
  EXPECT_THROW((x * 2.0).backward(), Error);
}

TEST(Engine, NoGradRecordsNothing) {
  Tensor x = ones({3}, {.requires_grad = true});
  NoGradGuard guard;
  Tensor y = x * 2.0;
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
}

TEST(Engine, DetachCutsTheGraph) {
  Tensor x = ones({3}, {.requires_grad = true});
  Tensor y = (x * 2.0).detach();
  EXPECT_FALSE(y.requires_grad());
}

TEST(Engine, SecondBackwardWithoutRetainGraphIsAnError) {
  Tensor x = ones({3}, {.requires_grad = true});
  Tensor y = (x * x).sum();
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  EXPECT_TRUE(allclose(x.grad(), {4, 4, 4}));
  EXPECT_THROW(y.backward(), Error);
}

TEST(Engine, GradReadyHooksFireInReverseOrderOfUse) {
  Tensor a = ones({2}, {.requires_grad = true});
  Tensor b = ones({2}, {.requires_grad = true});
  Tensor c = ones({2}, {.requires_grad = true});
  std::vector<std::string> order;
  a.register_grad_ready_hook([&](const Tensor&) { order.push_back("a"); });
  b.register_grad_ready_hook([&](const Tensor&) { order.push_back("b"); });
  c.register_grad_ready_hook([&](const Tensor& leaf) {
    EXPECT_TRUE(leaf.grad().defined());
    order.push_back("c");
  });
  Tensor y = ((a * 2.0 + b) * 3.0 + c).sum();
  y.backward();
  EXPECT_EQ(order, (std::vector<std::string>{"c", "b", "a"}));
}

TEST(Gradcheck, Elementwise) {
  auto a = random_input({3, 4}, 1), b = random_input({3, 4}, 2);
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0] + in[1]; }, {a, b}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0] - in[1]; }, {a, b}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0] * in[1]; }, {a, b}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0] / (in[1] + 3.0); }, {a, b}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return exp(in[0]); }, {a}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return log(in[0] + 2.0); }, {a}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return sqrt(in[0] + 2.0); }, {a}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return pow(in[0], 3.0); }, {a}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return rdiv(2.0, in[0] + 3.0); }, {a}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return relu(in[0]); }, {a}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return gelu(in[0]); }, {a}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return sigmoid(in[0]); }, {a}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return tanh(in[0]); }, {a}));
}

TEST(Gradcheck, Broadcasting) {
  auto a = random_input({2, 3, 4}, 3), b = random_input({3, 1}, 4);
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0] * in[1]; }, {a, b}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[1] - in[0]; }, {a, b}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0] / (in[1] + 3.0); }, {a, b}));
}

TEST(Gradcheck, ShapeFunctions) {
  auto x = random_input({2, 3, 4}, 5);
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].view({6, 4}) * 2.0; }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].transpose(0, 2).contiguous(); }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].permute({1, 2, 0}) * 1.5; }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].slice(2, 1, 4, 2) * 1.0; }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].narrow(1, 1, 2) * 1.0; }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].select(0, 1) * 1.0; }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].flatten(1) * 1.0; }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].transpose(0, 1).reshape({3, 8}); }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].unsqueeze(1).squeeze(1) * 1.0; }, {x}));
  auto y = random_input({3, 1}, 6);
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].expand({2, 3, 4}) * 1.0; }, {y}));
}

TEST(Gradcheck, Reductions) {
  auto x = random_input({2, 3, 4}, 7);
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].sum(); }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].sum({1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].sum({0, 2}, true); }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].mean(); }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return in[0].mean({-1}); }, {x}));
}

TEST(Gradcheck, MatmulAndLinear) {
  auto a = random_input({3, 5}, 8), b = random_input({5, 4}, 9);
  EXPECT_TRUE(gradcheck([](const auto& in) { return matmul(in[0], in[1]); }, {a, b}));
  auto x = random_input({6, 5}, 10), w = random_input({4, 5}, 11), bias = random_input({4}, 12);
  EXPECT_TRUE(gradcheck([](const auto& in) { return linear(in[0], in[1], in[2]); }, {x, w, bias}));
  auto ba = random_input({2, 3, 5}, 13), bb = random_input({2, 5, 4}, 14);
  EXPECT_TRUE(gradcheck([](const auto& in) { return matmul(in[0], in[1]); }, {ba, bb}));
}

TEST(Linear, Float32MatchesFloat64Reference) {
  // oneDNN (float32) against the reference loops (float64), forward and backward.
  Generator g(42);
  Tensor x = randn({7, 13}, {}, &g), w = randn({5, 13}, {}, &g), b = randn({5}, {}, &g);
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  b.set_requires_grad(true);
  Tensor x64 = x.detach().to(DType::Float64).set_requires_grad(true);
  Tensor w64 = w.detach().to(DType::Float64).set_requires_grad(true);
  Tensor b64 = b.detach().to(DType::Float64).set_requires_grad(true);
  Tensor y = linear(x, w, b), y64 = linear(x64, w64, b64);
  EXPECT_TRUE(allclose(y, y64, 1e-5, 1e-5));
  Tensor gy = randn({7, 5}, {}, &g);
  y.backward(gy);
  y64.backward(gy.to(DType::Float64));
  EXPECT_TRUE(allclose(x.grad(), x64.grad(), 1e-5, 1e-5));
  EXPECT_TRUE(allclose(w.grad(), w64.grad(), 1e-5, 1e-5));
  EXPECT_TRUE(allclose(b.grad(), b64.grad(), 1e-5, 1e-5));
}

TEST(Linear, ShapeMismatchNamesTheShapes) {
  Tensor x = zeros({64, 784}), w = zeros({50, 100});
  try {
    linear(x, w);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear: input (64, 784) does not match weight (50, 100)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem
